package manifest

import (
	"fmt"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// Attach returns module with payload as its only .berm.abi section, after
// every other section. The payload is not checked: Read is what checks an image.
func Attach(module, payload []byte) ([]byte, error) {
	stripped, err := Strip(module)
	if err != nil {
		return nil, err
	}
	return AppendSection(stripped, payload), nil
}

// Strip returns a copy of module without its .berm.abi sections.
func Strip(module []byte) ([]byte, error) {
	if len(module) < len(wasmbin.Header) || string(module[:4]) != wasmbin.Magic {
		return nil, ErrNotModule
	}
	out := append([]byte(nil), module[:len(wasmbin.Header)]...)
	for sec, err := range wasmbin.Sections(module) {
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrMalformed)
		}
		if sec.ID == wasmbin.SectionCustom {
			if name, _, err := customSection(sec.Payload); err == nil && name == sectionName {
				continue
			}
		}
		out = append(out, module[sec.Start:sec.End]...)
	}
	return out, nil
}

// AppendSection appends one .berm.abi custom section holding payload, keeping
// any the module has (which Read then refuses as duplicated).
func AppendSection(module, payload []byte) []byte {
	body := append(wasmbin.AppendName(nil, sectionName), payload...)
	return wasmbin.AppendSection(append([]byte(nil), module...), wasmbin.SectionCustom, body)
}
