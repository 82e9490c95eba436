package runtime

import (
	"bytes"
	"math"
	"slices"
	"strings"
)

// Go's linker writes a program's initial memory as tens of thousands of small
// active data segments (it leaves out every run of zeros longer than a few
// bytes), and wazero evaluates and copies each of them on every instantiation:
// the 37,000 of a Go hello world take about 4 ms of every call, where the two
// segments they merge into take 1. coalesceData rewrites the data section into
// a handful of segments that leave memory exactly as the originals do. berm
// compiles the rewritten bytes; the program's identity stays the digest of the
// image as deployed.

// coalesceGap is the longest run of zeros written out to join two segments
// into one. In offset order, the 37,107 gaps between the segments of a Go
// hello world are 18 bytes long in the median and under 64 bytes but for ten,
// the longest 2,845 bytes: from 64 bytes up, a threshold leaves a dozen
// segments or fewer, and instantiation takes the same time.
const coalesceGap = 1024

// coalesceData returns module with the active data segments that have
// constant offsets merged into as few as memory allows, or module itself when
// the rewrite does not apply, would gain nothing, or cannot be shown safe.
// Every section but the data section is kept byte for byte.
//
// What it preserves, and how:
//   - Memory after instantiation: segments are applied in their order, a
//     later one overwriting an earlier one where they overlap, and the merged
//     segment holds the result. Zeros fill a gap only in the segments applied
//     before any segment whose offset is not a constant, when that memory can
//     still be nothing but zero.
//   - Failure: a segment reaching past memory fails instantiation. A module
//     in which one does, against its own memory's initial size, is left as
//     it is, so wazero's error names the original segment. Besides, a merged
//     segment ends where one of its originals ends and reaches as far as
//     each of them (an empty one's offset included), so it overruns memory
//     exactly when one of its originals would, whatever memory's size.
//   - Segment indices, which memory.init and data.drop name: those need a
//     data count section (wazero refuses them without one), so a module with
//     one is left as it is, as is one whose name section names data segments
//     or that carries linking or relocation sections.
//   - Memory shared with other modules: the rewrite applies only to a module
//     that defines its one memory and imports none, where the writes of an
//     instantiation that fails are never seen.
func coalesceData(module []byte) (out []byte) {
	// A bug here must cost a program its speed, not its deploy.
	defer func() {
		if recover() != nil {
			out = module
		}
	}()
	if b, ok := coalesce(module, coalesceGap, true); ok {
		return b
	}
	return module
}

// Segment kinds.
const (
	segConst   uint8 = iota // active, memory 0, offset i32.const
	segPassive              // applied by memory.init only
	segOther                // active with any other offset: global.get, extended const
)

// dataSegment locates a segment in the module, small and without pointers
// for the garbage collector to follow: Go's tens of thousands add up.
type dataSegment struct {
	start, end uint32 // its whole encoding, for the segments kept as they are
	init       uint32 // where its bytes start; they end at end
	off        uint32 // segConst only
	kind       uint8
}

func (s *dataSegment) len() uint64 { return uint64(s.end - s.init) }

type moduleData struct {
	segments           []dataSegment
	sectionStart, end  int    // of the data section, header included
	memoryBytes        uint64 // the memory's initial size
	hasMemory, hasData bool
}

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// parseDataSection finds and decodes the data section. It is false for
// anything it does not fully understand or that makes the rewrite unsafe.
func parseDataSection(module []byte) (*moduleData, bool) {
	if !bytes.HasPrefix(module, wasmHeader) || len(module) > math.MaxUint32 {
		return nil, false
	}
	md := &moduleData{}
	var seen uint32
	r := &wasmReader{b: module, i: len(wasmHeader)}
	for r.i < len(module) {
		start := r.i
		id := r.byte()
		payload := r.bytes(r.u32())
		if r.bad {
			return nil, false
		}
		if id != 0 {
			// Unknown or repeated sections are wazero's to refuse.
			if id > 13 || seen&(1<<id) != 0 {
				return nil, false
			}
			seen |= 1 << id
		}
		switch id {
		case 0:
			if !customSectionSafe(payload) {
				return nil, false
			}
		case 2:
			if !importsNoMemory(payload) {
				return nil, false
			}
		case 5:
			n, ok := definedMemorySize(payload)
			if !ok {
				return nil, false
			}
			md.memoryBytes, md.hasMemory = n, true
		case 11:
			segs, ok := parseDataSegments(payload, r.i-len(payload))
			if !ok {
				return nil, false
			}
			md.segments, md.hasData = segs, true
			md.sectionStart, md.end = start, r.i
		case 12:
			return nil, false
		}
	}
	return md, md.hasData && md.hasMemory
}

func customSectionSafe(payload []byte) bool {
	r := &wasmReader{b: payload}
	name := string(r.bytes(r.u32()))
	if r.bad || name == "linking" || strings.HasPrefix(name, "reloc.") {
		return false
	}
	if name != "name" {
		return true
	}
	for r.i < len(r.b) {
		id := r.byte()
		r.bytes(r.u32())
		if r.bad || id == 9 { // 9: data segment names
			return false
		}
	}
	return true
}

// importsNoMemory is true when the module imports no memory and every import is
// one this parser knows how to step over.
func importsNoMemory(payload []byte) bool {
	r := &wasmReader{b: payload}
	for n := r.u32(); n > 0 && !r.bad; n-- {
		r.bytes(r.u32())
		r.bytes(r.u32())
		switch r.byte() {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			if t := r.byte(); t != 0x70 && t != 0x6f {
				return false
			}
			if !r.limits() {
				return false
			}
		case 0x03: // global
			switch r.byte() {
			case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			default:
				return false
			}
			if m := r.byte(); m > 1 {
				return false
			}
		case 0x04: // tag
			if r.byte() != 0 {
				return false
			}
			r.u32()
		default: // 0x02, a memory, and anything unknown
			return false
		}
	}
	return r.done()
}

// definedMemorySize is the initial size in bytes of the one memory the section
// defines; only unshared 32-bit memories qualify.
func definedMemorySize(payload []byte) (uint64, bool) {
	r := &wasmReader{b: payload}
	if r.u32() != 1 {
		return 0, false
	}
	flag := r.byte()
	pages := r.u32()
	switch flag {
	case 0x00:
	case 0x01:
		r.u32()
	default:
		return 0, false
	}
	if !r.done() || pages > 1<<16 {
		return 0, false
	}
	return uint64(pages) * PageSize, true
}

// parseDataSegments decodes the data section's payload, found at base in the
// module.
func parseDataSegments(payload []byte, base int) ([]dataSegment, bool) {
	r := &wasmReader{b: payload}
	n := r.u32()
	// Every segment takes at least two bytes: never trust the count to size
	// an allocation.
	segs := make([]dataSegment, 0, min(int(n), len(payload)/2))
	for ; n > 0; n-- {
		start := r.i
		s := dataSegment{kind: segOther}
		flag := r.u32()
		switch flag {
		case 0:
		case 1:
			s.kind = segPassive
		case 2:
			// Memory 0 named explicitly, valid only with bulk memory on: kept
			// as it is, so that what a runtime refuses stays refused.
			if r.u32() != 0 {
				return nil, false
			}
		default:
			return nil, false
		}
		if s.kind != segPassive {
			exprStart := r.i
			if flag == 0 && r.byte() == 0x41 {
				off := r.s32()
				if r.byte() == 0x0b {
					s.kind, s.off = segConst, uint32(off)
				}
			}
			if s.kind != segConst {
				r.i = exprStart
				if !r.offsetExpr() {
					return nil, false
				}
			}
		}
		size := r.u32()
		s.init = uint32(base + r.i)
		r.bytes(size)
		if r.bad {
			return nil, false
		}
		s.start, s.end = uint32(base+start), uint32(base+r.i)
		segs = append(segs, s)
	}
	return segs, r.done()
}

// coalesce rewrites the data section with gaps of up to gap zeros filled.
// With keepOutOfBounds, a module whose constant segments do not all fit the
// memory's initial size is not rewritten.
func coalesce(module []byte, gap uint64, keepOutOfBounds bool) ([]byte, bool) {
	md, ok := parseDataSection(module)
	if !ok {
		return nil, false
	}
	segs := md.segments
	var constBytes uint64
	for i := range segs {
		s := &segs[i]
		if s.kind != segConst {
			continue
		}
		if keepOutOfBounds && uint64(s.off)+s.len() > md.memoryBytes {
			return nil, false
		}
		constBytes += s.len()
	}
	// However far apart the segments lie, the zeros written out stay within
	// this; past it only touching or overlapping segments merge.
	fillBudget := max(constBytes, 1<<20)

	// First the plan: the segments of the new section in order, and for
	// each constant segment the merged one it goes into.
	var pieces []dataPiece
	pieceOf := make([]int32, len(segs))
	var run []int
	var passive []int
	first := true // no segment with an unknown offset applied yet
	flush := func() {
		g := uint64(0)
		if first {
			g = gap
		}
		pieces = planDataRun(pieces, pieceOf, segs, run, g, fillBudget)
		for _, i := range passive {
			pieces = append(pieces, dataPiece{start: segs[i].start, end: segs[i].end})
		}
		run, passive = run[:0], passive[:0]
	}
	for i := range segs {
		switch segs[i].kind {
		case segConst:
			run = append(run, i)
		case segPassive:
			// Without memory.init nothing but its index tells it from
			// another, and nothing can name an index.
			passive = append(passive, i)
		default:
			flush()
			first = false
			pieces = append(pieces, dataPiece{start: segs[i].start, end: segs[i].end})
		}
	}
	flush()
	if len(pieces) >= len(segs) {
		return nil, false
	}

	// Then the bytes, into a module allocated at its final size, which
	// also makes it zero wherever no segment writes.
	size := uint64(ulebLen(uint32(len(pieces))))
	for i := range pieces {
		size += pieces[i].encodedLen()
	}
	if size > math.MaxUint32 {
		return nil, false
	}
	rest := len(module) - md.end
	out := make([]byte, md.sectionStart+1+ulebLen(uint32(size))+int(size)+rest)
	w := copy(out, module[:md.sectionStart])
	out[w] = 11
	w = len(appendULEB(out[:w+1], uint32(size)))
	w = len(appendULEB(out[:w], uint32(len(pieces))))
	for i := range pieces {
		p := &pieces[i]
		if !p.merged {
			w += copy(out[w:], module[p.start:p.end])
			continue
		}
		b := append(out[:w], 0x00, 0x41)
		b = appendSLEB(b, int32(uint32(p.lo)))
		b = append(b, 0x0b)
		b = appendULEB(b, uint32(p.hi-p.lo))
		p.at = len(b)
		w = p.at + int(p.hi-p.lo)
	}
	// Later segments overwrite earlier ones, as instantiation would.
	for i := range segs {
		s := &segs[i]
		if s.kind == segConst {
			p := &pieces[pieceOf[i]]
			copy(out[p.at+int(uint64(s.off)-p.lo):], module[s.init:s.end])
		}
	}
	copy(out[w:], module[md.end:])
	return out, true
}

// dataPiece is a segment of the new data section: merged from constant ones
// (memory [lo, hi)), or one of the module's kept as it is (module[start:end]).
type dataPiece struct {
	merged     bool
	lo, hi     uint64
	start, end uint32
	at         int // where a merged one's bytes start in the new module
}

func (p *dataPiece) encodedLen() uint64 {
	if !p.merged {
		return uint64(p.end - p.start)
	}
	n := p.hi - p.lo
	return uint64(3+slebLen(int32(uint32(p.lo)))+ulebLen(uint32(n))) + n
}

// planDataRun appends the merged segments that leave memory as the run of
// constant segments (indices into segs, in order) does, and notes in pieceOf
// which one each goes into.
func planDataRun(pieces []dataPiece, pieceOf []int32, segs []dataSegment, run []int, gap, fillBudget uint64) []dataPiece {
	if len(run) == 0 {
		return pieces
	}
	// Sorted by offset, then index: segment i at offset off is off<<32 | i
	// (a data section has fewer than 1<<31 segments).
	byOffset := make([]uint64, len(run))
	for k, i := range run {
		byOffset[k] = uint64(segs[i].off)<<32 | uint64(i)
	}
	slices.Sort(byOffset)
	base := len(pieces)
	plan := func(gap uint64) (filled uint64) {
		pieces = pieces[:base]
		for _, key := range byOffset {
			i := int(uint32(key))
			s := &segs[i]
			lo := uint64(s.off)
			hi := lo + s.len()
			if n := len(pieces); n > base && lo <= pieces[n-1].hi+gap {
				p := &pieces[n-1]
				if lo > p.hi {
					filled += lo - p.hi
				}
				// An empty segment still counts where it lies: past
				// memory's end, it fails instantiation.
				p.hi = max(p.hi, hi)
			} else {
				pieces = append(pieces, dataPiece{merged: true, lo: lo, hi: hi})
			}
			pieceOf[i] = int32(len(pieces) - 1)
		}
		return filled
	}
	if plan(gap) > fillBudget {
		plan(0)
	}
	return pieces
}

// wasmReader decodes the binary format as strictly as wazero does or more:
// what it accepts, wazero accepts. After a failure every read is a no-op and
// bad is set.
type wasmReader struct {
	b   []byte
	i   int
	bad bool
}

func (r *wasmReader) done() bool { return !r.bad && r.i == len(r.b) }

func (r *wasmReader) byte() byte {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *wasmReader) bytes(n uint32) []byte {
	if r.bad || uint64(n) > uint64(len(r.b)-r.i) {
		r.bad = true
		return nil
	}
	r.i += int(n)
	return r.b[r.i-int(n) : r.i]
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose unused bits are zero.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for k := 0; k < 5; k++ {
		c := r.byte()
		if r.bad || k == 4 && c&0xf0 != 0 {
			r.bad = true
			return 0
		}
		v |= uint32(c&0x7f) << (7 * k)
		if c < 0x80 {
			return v
		}
	}
	r.bad = true
	return 0
}

// s32 reads a signed LEB128 of at most 5 bytes whose unused bits extend the
// sign.
func (r *wasmReader) s32() int32 {
	var v uint32
	for k := 0; k < 5; k++ {
		c := r.byte()
		if r.bad {
			return 0
		}
		if k == 4 {
			if ext := c & 0xf8; ext != 0 && ext != 0x78 {
				r.bad = true
				return 0
			}
			return int32(v | uint32(c&0x0f)<<28)
		}
		v |= uint32(c&0x7f) << (7 * k)
		if c < 0x80 {
			if c&0x40 != 0 {
				v |= ^uint32(0) << (7 * (k + 1))
			}
			return int32(v)
		}
	}
	return 0
}

func (r *wasmReader) limits() bool {
	switch r.byte() {
	case 0x00:
		r.u32()
	case 0x01:
		r.u32()
		r.u32()
	default:
		return false
	}
	return !r.bad
}

// offsetExpr steps over an offset expression that is not a lone i32.const:
// global.get, or extended constant arithmetic. Anything else is refused.
func (r *wasmReader) offsetExpr() bool {
	for !r.bad {
		switch r.byte() {
		case 0x41: // i32.const
			r.s32()
		case 0x23: // global.get
			r.u32()
		case 0x6a, 0x6b, 0x6c: // i32.add, i32.sub, i32.mul
		case 0x0b: // end
			return !r.bad
		default:
			return false
		}
	}
	return false
}

func appendULEB(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func ulebLen(v uint32) int { return len(appendULEB(make([]byte, 0, 5), v)) }

func slebLen(v int32) int { return len(appendSLEB(make([]byte, 0, 5), v)) }

func appendSLEB(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
