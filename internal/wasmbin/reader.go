package wasmbin

import (
	"errors"
	"unicode/utf8"
)

// The errors a Reader stops at. manifest's refusals quote them, so their
// text is part of what users see.
var (
	ErrUnexpectedEnd = errors.New("unexpected end")
	ErrTooLarge      = errors.New("integer too large")
	ErrNotUTF8       = errors.New("name is not UTF-8")
)

// Reader decodes a byte slice front to back. Its error is sticky: after the
// first failure every read returns zero and Err reports that failure, so a
// caller may read several fields and check once, before it acts on any of
// them. Every read is bounds-checked, so no input makes a Reader panic.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader of b from its first byte.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// Offset is how many bytes have been read.
func (r *Reader) Offset() int { return r.off }

// Len is how many bytes are left.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Done reports whether every byte was read without a failure.
func (r *Reader) Done() bool { return r.err == nil && r.off == len(r.b) }

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail(ErrUnexpectedEnd)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// Bytes reads n bytes, a subslice of the Reader's.
func (r *Reader) Bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(r.Len()) {
		r.fail(ErrUnexpectedEnd)
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

// U32 reads an unsigned LEB128 of at most 5 bytes whose unused bits are
// zero. Padding with 0x80 bytes, which the format allows, is accepted.
func (r *Reader) U32() uint32 { return uint32(r.uleb(32)) }

// U64 reads an unsigned LEB128 of at most 10 bytes whose unused bits are
// zero.
func (r *Reader) U64() uint64 { return r.uleb(64) }

func (r *Reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.Byte()
		if r.err != nil {
			return 0
		}
		// A byte past the width, or bits of this one past it, is too
		// large. That a last byte carries on is learnt from the next one,
		// so a truncated input says so first.
		if shift >= bits || shift+7 > bits && uint64(c&0x7f)>>(bits-shift) != 0 {
			r.fail(ErrTooLarge)
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// S32 reads a signed LEB128 of at most 5 bytes whose unused bits extend the
// sign.
func (r *Reader) S32() int32 { return int32(r.sleb(32)) }

// S33 reads a signed LEB128 of at most 5 bytes as wide as 33 bits, as a
// block type's type index is written.
func (r *Reader) S33() int64 { return r.sleb(33) }

func (r *Reader) sleb(bits uint) int64 {
	var v int64
	for shift := uint(0); ; shift += 7 {
		c := r.Byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.fail(ErrTooLarge)
			return 0
		}
		if shift+7 > bits {
			// The bits from the sign bit up are all zero or all one.
			if ext := (c & 0x7f) >> (bits - shift - 1); ext != 0 && ext != 0x7f>>(bits-shift-1) {
				r.fail(ErrTooLarge)
				return 0
			}
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v
		}
	}
}

// Count reads a vector's length. Every element takes at least one byte, so
// a length over the bytes left is refused before it can size an allocation
// or a loop.
func (r *Reader) Count() int {
	n := r.U32()
	if uint64(n) > uint64(r.Len()) {
		r.fail(ErrUnexpectedEnd)
		return 0
	}
	return int(n)
}

// Name reads a name: a length, then that many bytes of UTF-8.
func (r *Reader) Name() string {
	b := r.Bytes(r.U32())
	if r.err == nil && !utf8.Valid(b) {
		r.fail(ErrNotUTF8)
		return ""
	}
	return string(b)
}
