// Package wasmbin reads and writes the pieces of the WebAssembly binary format
// that berm handles itself: LEB128 integers, names, vectors and sections.
//
// It decodes without validating. What a module means is its callers' to decide
// (manifest reads what an image declares, the runtime rewrites data segments),
// and wazero checks the rest when it compiles. What wasmbin promises is that no
// input makes it panic, hang or allocate more than the input's size:
//
//	for sec, err := range wasmbin.Sections(module) {
//		if err != nil {
//			return err
//		}
//		if sec.ID == wasmbin.SectionImport {
//			r := wasmbin.NewReader(sec.Payload)
//			for range r.Count() {
//				module, name := r.Name(), r.Name()
//				// ...
//			}
//			if err := r.Err(); err != nil {
//				return err
//			}
//		}
//	}
package wasmbin
