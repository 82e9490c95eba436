package manifest

import "errors"

// ErrInvalid is wrapped by every refusal of an image, so that callers can tell
// "this image is not a berm program" from I/O and other failures.
var ErrInvalid = errors.New("invalid image")

// refusal is a sentinel that is also an ErrInvalid.
type refusal string

func (r refusal) Error() string { return string(r) }
func (r refusal) Unwrap() error { return ErrInvalid }

// Each refusal ABI.md lists has its own sentinel; errors wrap one of them with the
// object at fault (which tool, which field, which export).
var (
	ErrNotModule     error = refusal("not a WebAssembly core module")
	ErrMalformed     error = refusal("malformed module")
	ErrNoManifest    error = refusal("no .berm.abi custom section")
	ErrManyManifests error = refusal("more than one .berm.abi custom section")
	ErrJSON          error = refusal("manifest is not valid JSON")
	ErrField         error = refusal("manifest field has the wrong type")
	ErrABIVersion    error = refusal("unsupported abi_version")
	ErrNoTools       error = refusal("manifest declares no tools")
	ErrToolName      error = refusal("bad tool name")
	ErrDuplicateTool error = refusal("duplicate tool name")
	ErrToolExport    error = refusal("tool has no export of type [] -> []")
	ErrSchema        error = refusal("bad parameters schema")
	ErrNoMemory      error = refusal("module does not export its memory as \"memory\"")
	ErrInitialize    error = refusal("_initialize is not of type [] -> []")
	ErrBermImport    error = refusal("bad import from module berm")
	ErrSyscallName   error = refusal("bad syscall name")
	ErrCallName      error = refusal("bad call target")
	// ErrTooMany: the module declares more of a part (types, imports,
	// functions, tables, exports) than berm reads, far more than any host
	// would run.
	ErrTooMany error = refusal("module declares more than berm reads")
	// ErrTooLarge: the manifest, or a tool's parameters, is larger than
	// berm reads (MaxManifest, MaxParameters): compiling a schema takes
	// time that grows faster than its size.
	ErrTooLarge error = refusal("manifest is larger than berm reads")
	// ErrCompileCost: a function's code, or the module's, is shaped so
	// that compiling it would take wazero far longer, or far more memory,
	// than its size says (MaxBlocks and the bounds beside it).
	ErrCompileCost error = refusal("code too costly to compile")
)
