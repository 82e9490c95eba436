package wasmbin

import "fmt"

// SkipLEB reads past a LEB128 integer of at most 10 bytes, whatever its sign
// or width. An 11th byte is read too, so that the caller's next read fails
// or meets garbage it refuses.
func (r *Reader) SkipLEB() {
	for range 10 {
		if r.Byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.Byte()
}

// SkipConstExpr reads past a constant expression up to its end (0x0b). It
// knows the instructions of constant expressions (extended-const included)
// and refuses any other.
func (r *Reader) SkipConstExpr() error {
	for {
		op := r.Byte()
		if r.err != nil {
			return r.err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41, 0x42, 0xd0: // i32.const, i64.const, ref.null heaptype
			r.SkipLEB()
		case 0x23, 0xd2: // global.get, ref.func
			r.U32()
		case 0x43: // f32.const
			r.Bytes(4)
		case 0x44: // f64.const
			r.Bytes(8)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // i32/i64 add, sub, mul
		case 0xfd: // v128.const
			if sub := r.U32(); sub != 12 && r.err == nil {
				return fmt.Errorf("unsupported instruction 0xfd %d in a constant expression", sub)
			}
			r.Bytes(16)
		default:
			return fmt.Errorf("unsupported instruction 0x%02x in a constant expression", op)
		}
		if r.err != nil {
			return r.err
		}
	}
}
