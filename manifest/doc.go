// Package manifest reads what a berm program says of itself from the bytes of
// its image alone, never compiling or running it.
//
// An image is one WebAssembly core module carrying exactly one .berm.abi custom
// section, whose JSON names the program's tools, their parameter schemas, when
// to reach for them, and the syscalls and calls the program will make (see
// ABI.md). Read checks every rule of the ABI that the bytes can show:
//
//	m, err := manifest.Read(image)
//	if errors.Is(err, manifest.ErrInvalid) {
//		// not a berm program; err names the problem
//	}
//	for _, t := range m.Tools {
//		fmt.Println(t.Name, t.Description)
//	}
//
// Tool.Validate checks a call's arguments against the tool's schema.
package manifest
