package manifest

import "encoding/binary"

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
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return nil, ErrNotModule
	}
	out := append([]byte(nil), module[:8]...)
	r := &reader{b: module, off: 8}
	for r.left() > 0 {
		start := r.off
		id, body, err := r.section()
		if err != nil {
			return nil, err
		}
		if id == 0 {
			if name, err := (&reader{b: body}).name(); err == nil && name == sectionName {
				continue
			}
		}
		out = append(out, module[start:r.off]...)
	}
	return out, nil
}

// AppendSection appends one .berm.abi custom section holding payload, keeping
// any the module has (which Read then refuses as duplicated).
func AppendSection(module, payload []byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(sectionName)))
	body = append(body, sectionName...)
	out := append(append([]byte(nil), module...), 0)
	out = binary.AppendUvarint(out, uint64(len(body)+len(payload)))
	out = append(out, body...)
	return append(out, payload...)
}
