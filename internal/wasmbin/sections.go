package wasmbin

import (
	"fmt"
	"iter"
)

// Header opens every core module of the binary format's version 1: the
// magic bytes, then the version.
const (
	Magic   = "\x00asm"
	Version = "\x01\x00\x00\x00"
	Header  = Magic + Version
)

// Section ids.
const (
	SectionCustom    byte = 0
	SectionType      byte = 1
	SectionImport    byte = 2
	SectionFunction  byte = 3
	SectionTable     byte = 4
	SectionMemory    byte = 5
	SectionGlobal    byte = 6
	SectionExport    byte = 7
	SectionStart     byte = 8
	SectionElement   byte = 9
	SectionCode      byte = 10
	SectionData      byte = 11
	SectionDataCount byte = 12
	SectionTag       byte = 13
)

// Section is one section of a module. Its offsets count from the module's
// first byte, so that a caller can copy the section whole or splice another
// in its place.
type Section struct {
	ID      byte
	Payload []byte
	Start   int // of the id
	Offset  int // of the payload
	End     int // just past the payload
}

// Sections walks the sections of module, in order, after its header, which
// it skips unread: callers differ in what they refuse there and how they say
// so. The first error ends the walk; it names the section header or the
// section that runs past the module's end. Ids, order and payloads are not
// checked.
func Sections(module []byte) iter.Seq2[Section, error] {
	return func(yield func(Section, error) bool) {
		if len(module) < len(Header) {
			yield(Section{}, fmt.Errorf("header: %w", ErrUnexpectedEnd))
			return
		}
		r := &Reader{b: module, off: len(Header)}
		for r.Len() > 0 {
			s := Section{Start: r.off}
			s.ID = r.Byte()
			size := r.U32()
			if r.err != nil {
				yield(Section{}, fmt.Errorf("section header: %w", r.err))
				return
			}
			s.Offset = r.off
			if s.Payload = r.Bytes(size); r.err != nil {
				yield(Section{}, fmt.Errorf("section %d: %w", s.ID, r.err))
				return
			}
			s.End = r.off
			if !yield(s, nil) {
				return
			}
		}
	}
}
