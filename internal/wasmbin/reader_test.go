package wasmbin

import (
	"errors"
	"math"
	"testing"
)

// leb is an integer decoding case: what a read of in returns and how many
// bytes it takes, or the error it stops at.
type leb struct {
	name string
	in   []byte
	want int64 // U32 and S32 widen to it; U64's cases stay under 1<<63 but one
	n    int
	err  error
}

func TestU32(t *testing.T) {
	tests := []leb{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "one byte", in: []byte{0x7f}, want: 127, n: 1},
		{name: "two bytes", in: []byte{0x80, 0x01}, want: 128, n: 2},
		{name: "stops at its last byte", in: []byte{0x05, 0xff}, want: 5, n: 1},
		{name: "padded", in: []byte{0x80, 0x80, 0x00}, want: 0, n: 3},
		{name: "padded to 5 bytes", in: []byte{0x81, 0x80, 0x80, 0x80, 0x00}, want: 1, n: 5},
		{name: "max", in: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, want: math.MaxUint32, n: 5},
		{name: "5 bytes, bit 32 set", in: []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, err: ErrTooLarge},
		{name: "5 bytes, top bit only", in: []byte{0x80, 0x80, 0x80, 0x80, 0x40}, err: ErrTooLarge},
		{name: "5 bytes carrying on, then a sixth", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, err: ErrTooLarge},
		{name: "5 bytes carrying on, then the end", in: []byte{0xff, 0xff, 0xff, 0xff, 0x8f}, err: ErrUnexpectedEnd},
		{name: "empty", in: nil, err: ErrUnexpectedEnd},
		{name: "truncated", in: []byte{0x80}, err: ErrUnexpectedEnd},
		{name: "truncated at 4 bytes", in: []byte{0xff, 0xff, 0xff, 0xff}, err: ErrUnexpectedEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			checkRead(t, r, int64(r.U32()), tt)
		})
	}
}

func TestU64(t *testing.T) {
	tests := []leb{
		{name: "2^32", in: []byte{0x80, 0x80, 0x80, 0x80, 0x10}, want: 1 << 32, n: 5},
		{name: "2^63-1", in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, want: math.MaxInt64, n: 9},
		{name: "10 bytes, bit 64 set", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, err: ErrTooLarge},
		{name: "11 bytes", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, err: ErrTooLarge},
		{name: "truncated", in: []byte{0xff, 0xff, 0xff, 0xff, 0xff}, err: ErrUnexpectedEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			checkRead(t, r, int64(r.U64()), tt)
		})
	}
	t.Run("max", func(t *testing.T) {
		r := NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
		if v := r.U64(); v != math.MaxUint64 || !r.Done() {
			t.Fatalf("got %d, %v", v, r.Err())
		}
	})
}

func TestS32(t *testing.T) {
	tests := []leb{
		{name: "zero", in: []byte{0x00}, want: 0, n: 1},
		{name: "minus one", in: []byte{0x7f}, want: -1, n: 1},
		{name: "63", in: []byte{0x3f}, want: 63, n: 1},
		{name: "64", in: []byte{0xc0, 0x00}, want: 64, n: 2},
		{name: "-64", in: []byte{0x40}, want: -64, n: 1},
		{name: "-65", in: []byte{0xbf, 0x7f}, want: -65, n: 2},
		{name: "minus one, padded", in: []byte{0xff, 0xff, 0x7f}, want: -1, n: 3},
		{name: "max", in: []byte{0xff, 0xff, 0xff, 0xff, 0x07}, want: math.MaxInt32, n: 5},
		{name: "min", in: []byte{0x80, 0x80, 0x80, 0x80, 0x78}, want: math.MinInt32, n: 5},
		{name: "minus one in 5 bytes", in: []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, want: -1, n: 5},
		{name: "5 bytes, sign bit not extended", in: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, err: ErrTooLarge},
		{name: "5 bytes, extension without the sign", in: []byte{0x80, 0x80, 0x80, 0x80, 0x70}, err: ErrTooLarge},
		{name: "5 bytes carrying on, then a sixth", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, err: ErrTooLarge},
		{name: "5 bytes carrying on, then the end", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80}, err: ErrUnexpectedEnd},
		{name: "empty", in: nil, err: ErrUnexpectedEnd},
		{name: "truncated", in: []byte{0xc0}, err: ErrUnexpectedEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			checkRead(t, r, int64(r.S32()), tt)
		})
	}
}

func checkRead(t *testing.T, r *Reader, got int64, tt leb) {
	t.Helper()
	if tt.err != nil {
		if !errors.Is(r.Err(), tt.err) || got != 0 {
			t.Fatalf("got %d, %v; want %v", got, r.Err(), tt.err)
		}
		return
	}
	if r.Err() != nil || got != tt.want || r.Offset() != tt.n {
		t.Fatalf("got %d in %d bytes, %v; want %d in %d", got, r.Offset(), r.Err(), tt.want, tt.n)
	}
}

func TestSticky(t *testing.T) {
	r := NewReader([]byte{0x02, 'a', 'b', 0x05, 0x01, 0x02})
	if got := r.Name(); got != "ab" {
		t.Fatalf("name %q", got)
	}
	if got := r.Bytes(4); got != nil || !errors.Is(r.Err(), ErrUnexpectedEnd) {
		t.Fatalf("bytes past the end: %v, %v", got, r.Err())
	}
	at := r.Offset()
	first := r.Err()
	if r.Byte() != 0 || r.U32() != 0 || r.S32() != 0 || r.Count() != 0 || r.Name() != "" || r.Done() {
		t.Fatal("a read after a failure returned something")
	}
	if r.Err() != first || r.Offset() != at {
		t.Fatalf("after a failure: %v at %d, want %v at %d", r.Err(), r.Offset(), first, at)
	}
}

func TestCountAndName(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		read func(*Reader) any
		want any
		err  error
	}{
		{"count", []byte{0x02, 0, 0}, func(r *Reader) any { return r.Count() }, 2, nil},
		{"count of the bytes left", []byte{0x03, 0, 0}, func(r *Reader) any { return r.Count() }, 0, ErrUnexpectedEnd},
		{"count too large", []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, func(r *Reader) any { return r.Count() }, 0, ErrTooLarge},
		{"name", []byte{0x03, 'a', 0xc3, 0xa9}, func(r *Reader) any { return r.Name() }, "aé", nil},
		{"empty name", []byte{0x00}, func(r *Reader) any { return r.Name() }, "", nil},
		{"name not UTF-8", []byte{0x02, 0xc3, 0x28}, func(r *Reader) any { return r.Name() }, "", ErrNotUTF8},
		{"name past the end", []byte{0x05, 'a'}, func(r *Reader) any { return r.Name() }, "", ErrUnexpectedEnd},
		{"bytes up to the end", []byte{1, 2}, func(r *Reader) any { return string(r.Bytes(2)) }, "\x01\x02", nil},
		{"bytes of 2^32-1", []byte{1, 2}, func(r *Reader) any { return r.Bytes(math.MaxUint32) == nil }, true, ErrUnexpectedEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			got := tt.read(r)
			if got != tt.want || !errors.Is(r.Err(), tt.err) || (tt.err == nil) != (r.Err() == nil) {
				t.Fatalf("got %v, %v; want %v, %v", got, r.Err(), tt.want, tt.err)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 127, 128, 1<<14 - 1, 1 << 14, math.MaxUint32, 1 << 32, math.MaxUint64} {
		b := AppendULEB([]byte{0xaa}, v)
		if len(b)-1 != ULEBLen(v) {
			t.Errorf("ULEBLen(%d) = %d, encoding %d bytes", v, ULEBLen(v), len(b)-1)
		}
		r := NewReader(b[1:])
		if got := r.U64(); got != v || !r.Done() {
			t.Errorf("ULEB %d: read back %d, %v", v, got, r.Err())
		}
	}
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1<<13 - 1, 1 << 13, -1 << 13, math.MaxInt32, math.MinInt32} {
		b := AppendSLEB([]byte{0xaa}, int64(v))
		if len(b)-1 != SLEBLen(int64(v)) {
			t.Errorf("SLEBLen(%d) = %d, encoding %d bytes", v, SLEBLen(int64(v)), len(b)-1)
		}
		r := NewReader(b[1:])
		if got := r.S32(); got != v || !r.Done() {
			t.Errorf("SLEB %d: read back %d, %v", v, got, r.Err())
		}
	}
	if got := SLEBLen(math.MinInt64); got != 10 {
		t.Errorf("SLEBLen(MinInt64) = %d", got)
	}
}
