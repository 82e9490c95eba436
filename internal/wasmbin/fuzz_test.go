package wasmbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLEB holds the integer readers to references: encoding/binary's
// Uvarint, which reads the same unsigned LEB128, and a signed decoder of
// any width. A read that succeeds re-encodes to a value that reads back.
func FuzzLEB(f *testing.F) {
	for _, b := range [][]byte{
		{0x00}, {0x7f}, {0x80, 0x01}, {0x80, 0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0x0f}, {0xff, 0xff, 0xff, 0xff, 0x1f}, {0xff, 0xff, 0xff, 0xff, 0x7f},
		{0x80, 0x80, 0x80, 0x80, 0x78}, {0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkLEB(t, b)
	})
}

// FuzzSections walks any bytes as a module: the sections it yields tile the
// module from its header on, and a failure ends the walk. Each payload is
// also read as integers at every offset. Seeds: every fixture, valid and
// broken.
func FuzzSections(f *testing.F) {
	for _, pattern := range []string{"../../testdata/*.wasm", "../../testdata/broken/*.wasm"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, module []byte) {
		end := len(Header)
		var failed error
		for s, err := range Sections(module) {
			if failed != nil {
				t.Fatalf("a section after %v", failed)
			}
			if err != nil {
				if !errors.Is(err, ErrUnexpectedEnd) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v", err)
				}
				failed = err
				continue
			}
			if s.Start != end || s.Offset < s.Start+2 || s.Offset > s.Start+6 || s.End > len(module) ||
				module[s.Start] != s.ID || !bytes.Equal(s.Payload, module[s.Offset:s.End]) {
				t.Fatalf("section %+v after %d in %d bytes", s, end, len(module))
			}
			r := NewReader(module[s.Start+1 : s.Offset])
			if r.U32() != uint32(len(s.Payload)) || !r.Done() {
				t.Fatalf("section %+v: size", s)
			}
			end = s.End
			for i := range s.Payload {
				checkLEB(t, s.Payload[i:])
			}
			checkReads(t, s.Payload)
		}
		if failed == nil && len(module) >= len(Header) && end != len(module) {
			t.Fatalf("sections end at %d of %d", end, len(module))
		}
	})
}

func checkLEB(t *testing.T, b []byte) {
	t.Helper()
	want, n := binary.Uvarint(b)

	r := NewReader(b)
	got := r.U64()
	if ok := n > 0; ok != (r.Err() == nil) || ok && (got != want || r.Offset() != n) {
		t.Fatalf("U64 % x: %d in %d bytes, %v; Uvarint %d, %d", b, got, r.Offset(), r.Err(), want, n)
	}

	r = NewReader(b)
	got32 := r.U32()
	if ok := n > 0 && n <= 5 && want <= math.MaxUint32; ok != (r.Err() == nil) || ok && (uint64(got32) != want || r.Offset() != n) {
		t.Fatalf("U32 % x: %d in %d bytes, %v; Uvarint %d, %d", b, got32, r.Offset(), r.Err(), want, n)
	}
	if r.Err() == nil {
		checkRoundTrip(t, uint64(got32), int64(int32(got32)))
	}

	swant, sn, sok := signedLEB(b, 5)
	r = NewReader(b)
	gots := r.S32()
	if ok := sok && swant >= math.MinInt32 && swant <= math.MaxInt32; ok != (r.Err() == nil) || ok && (int64(gots) != swant || r.Offset() != sn) {
		t.Fatalf("S32 % x: %d in %d bytes, %v; want %d in %d, %v", b, gots, r.Offset(), r.Err(), swant, sn, sok)
	}
	if r.Err() == nil {
		checkRoundTrip(t, uint64(uint32(gots)), int64(gots))
	}
}

// signedLEB decodes a signed LEB128 of at most max bytes as wide as they
// make it (up to 9 bytes, 63 bits and the sign).
func signedLEB(b []byte, max int) (int64, int, bool) {
	var v int64
	for i := 0; i < len(b) && i < max; i++ {
		v |= int64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			if b[i]&0x40 != 0 {
				v |= -1 << (7 * (i + 1))
			}
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

func checkRoundTrip(t *testing.T, u uint64, s int64) {
	t.Helper()
	if r := NewReader(AppendULEB(nil, u)); r.U64() != u || !r.Done() || ULEBLen(u) != r.Offset() {
		t.Fatalf("ULEB %d does not read back", u)
	}
	if r := NewReader(AppendSLEB(nil, s)); int64(r.S32()) != s || !r.Done() || SLEBLen(s) != r.Offset() {
		t.Fatalf("SLEB %d does not read back", s)
	}
}

// checkReads reads b as a vector of names and integers, to see that a
// Reader never panics, never goes back, and keeps its first failure.
func checkReads(t *testing.T, b []byte) {
	t.Helper()
	r := NewReader(b)
	var first error
	for i := 0; r.Err() == nil && r.Len() > 0; i++ {
		at := r.Offset()
		switch i % 6 {
		case 0:
			r.Count()
		case 1:
			r.Name()
		case 2:
			r.S32()
		case 3:
			r.U64()
		case 4:
			r.Bytes(uint32(i))
		case 5:
			r.Byte()
		}
		if r.Offset() < at || r.Offset() > len(b) || r.Len() != len(b)-r.Offset() {
			t.Fatalf("offset %d after %d of %d", r.Offset(), at, len(b))
		}
		first = r.Err()
	}
	if first != nil && (r.U32() != 0 || r.Err() != first || r.Done()) {
		t.Fatal("failure did not stick")
	}
}

// FuzzReadShape walks any bytes as a function body: it returns or fails as
// it does reading every instruction with SkipInstruction, never panics, and counts no more blocks than the body has bytes (a
// br_table of n labels takes n+3 bytes at least), nor an arity not given.
// Seeds: every function body of the fixtures and examples.
func FuzzReadShape(f *testing.F) {
	for _, pattern := range []string{"../../testdata/*.wasm", "../../examples/*/*.wasm"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			bodies := 0
			for s, err := range Sections(b) {
				if err != nil || s.ID != SectionCode {
					continue
				}
				r := NewReader(s.Payload)
				for range r.Count() {
					if body := r.Bytes(r.U32()); r.Err() == nil && bodies < 64 && len(body) < 4096 {
						f.Add(body)
						bodies++
					}
				}
			}
		}
	}
	f.Add([]byte{0x00, 0x41, 0x00, 0x04, 0x40, 0x0b, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x0b})
	arity := func(typeIndex uint32) uint64 { return uint64(typeIndex % 7) }
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := ReadShape(body, arity)
		// The common instructions' fast path reads as SkipInstruction.
		if slow, slowErr := readShape(body, arity, false); s != slow || (err == nil) != (slowErr == nil) {
			t.Fatalf("ReadShape = %+v, %v; with SkipInstruction alone %+v, %v", s, err, slow, slowErr)
		}
		if err != nil {
			return
		}
		if s.Blocks > uint64(len(body)) || s.Arity > 6 {
			t.Fatalf("shape %+v of a body of %d bytes", s, len(body))
		}
	})
}
