package wasmbin

// AppendULEB appends v as an unsigned LEB128 of the fewest bytes. For a v
// that fits in 32 bits, that is the encoding of a u32.
func AppendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendSLEB appends v as a signed LEB128 of the fewest bytes. For a v that
// fits in 32 bits, that is the encoding of an s32.
func AppendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// ULEBLen is the length of AppendULEB's encoding of v, for sizing a buffer
// before writing it.
func ULEBLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// SLEBLen is the length of AppendSLEB's encoding of v.
func SLEBLen(v int64) int {
	var buf [10]byte
	return len(AppendSLEB(buf[:0], v))
}

// AppendName appends s as a name: its length, then its bytes.
func AppendName(b []byte, s string) []byte {
	return append(AppendULEB(b, uint64(len(s))), s...)
}

// AppendSection appends a section of the given id holding payload.
func AppendSection(b []byte, id byte, payload []byte) []byte {
	return append(AppendULEB(append(b, id), uint64(len(payload))), payload...)
}
