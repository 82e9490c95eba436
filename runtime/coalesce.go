package runtime

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"github.com/berm-dev/berm/internal/wasmbin"
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
	// indexed is set when segments may be named by index: a data count
	// section (which memory.init and data.drop need) or data segment names.
	// Merging segments would move them; emptying them in place does not.
	indexed bool
}

// parseDataSection finds and decodes the data section of a module that
// defines its one memory and imports none (hasData false when it has no data
// section). It is false for anything it does not fully understand.
func parseDataSection(module []byte) (*moduleData, bool) {
	if !bytes.HasPrefix(module, []byte(wasmbin.Header)) || uint64(len(module)) > math.MaxUint32 {
		return nil, false
	}
	md := &moduleData{}
	var seen uint32
	for sec, err := range wasmbin.Sections(module) {
		if err != nil {
			return nil, false
		}
		if id := sec.ID; id != wasmbin.SectionCustom {
			// Unknown or repeated sections are wazero's to refuse.
			if id > wasmbin.SectionTag || seen&(1<<id) != 0 {
				return nil, false
			}
			seen |= 1 << id
		}
		switch sec.ID {
		case wasmbin.SectionCustom:
			safe, namesData := customSectionSafe(sec.Payload)
			if !safe {
				return nil, false
			}
			md.indexed = md.indexed || namesData
		case wasmbin.SectionImport:
			if !importsNoMemory(sec.Payload) {
				return nil, false
			}
		case wasmbin.SectionMemory:
			n, ok := definedMemorySize(sec.Payload)
			if !ok {
				return nil, false
			}
			md.memoryBytes, md.hasMemory = n, true
		case wasmbin.SectionData:
			segs, ok := parseDataSegments(sec.Payload, sec.Offset)
			if !ok {
				return nil, false
			}
			md.segments, md.hasData = segs, true
			md.sectionStart, md.end = sec.Start, sec.End
		case wasmbin.SectionDataCount:
			md.indexed = true
		}
	}
	return md, md.hasMemory
}

// The readers below decode the binary format as strictly as wazero does or
// more: what they accept, wazero accepts. They lean on wasmbin.Reader's
// sticky failure, checking it once a structure is read.

// customSectionSafe is false for a section of an object file (linking,
// relocations) or one it cannot read; namesData reports names of data
// segments.
func customSectionSafe(payload []byte) (safe, namesData bool) {
	r := wasmbin.NewReader(payload)
	// The name's bytes as they are: whether they are UTF-8 is wazero's to
	// judge.
	name := string(r.Bytes(r.U32()))
	if r.Err() != nil || name == "linking" || strings.HasPrefix(name, "reloc.") {
		return false, false
	}
	if name != "name" {
		return true, false
	}
	for r.Len() > 0 {
		id := r.Byte()
		r.Bytes(r.U32())
		if r.Err() != nil {
			return false, false
		}
		namesData = namesData || id == 9 // 9: data segment names
	}
	return true, namesData
}

// importsNoMemory is true when the module imports no memory and every import is
// one this parser knows how to step over.
func importsNoMemory(payload []byte) bool {
	r := wasmbin.NewReader(payload)
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		r.Bytes(r.U32()) // module
		r.Bytes(r.U32()) // name
		switch r.Byte() {
		case 0x00: // func
			r.U32()
		case 0x01: // table
			if t := r.Byte(); t != 0x70 && t != 0x6f {
				return false
			}
			if !tableLimits(r) {
				return false
			}
		case 0x03: // global
			switch r.Byte() {
			case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			default:
				return false
			}
			if m := r.Byte(); m > 1 {
				return false
			}
		case 0x04: // tag
			if r.Byte() != 0 {
				return false
			}
			r.U32()
		default: // 0x02, a memory, and anything unknown
			return false
		}
	}
	return r.Done()
}

// tableLimits steps over a table's limits, of 32 bits.
func tableLimits(r *wasmbin.Reader) bool {
	switch r.Byte() {
	case 0x00:
		r.U32()
	case 0x01:
		r.U32()
		r.U32()
	default:
		return false
	}
	return r.Err() == nil
}

// definedMemorySize is the initial size in bytes of the one memory the section
// defines; only unshared 32-bit memories qualify.
func definedMemorySize(payload []byte) (uint64, bool) {
	r := wasmbin.NewReader(payload)
	if r.U32() != 1 {
		return 0, false
	}
	flag := r.Byte()
	pages := r.U32()
	switch flag {
	case 0x00:
	case 0x01:
		r.U32()
	default:
		return 0, false
	}
	if !r.Done() || pages > 1<<16 {
		return 0, false
	}
	return uint64(pages) * PageSize, true
}

// parseDataSegments decodes the data section's payload, found at base in the
// module.
func parseDataSegments(payload []byte, base int) ([]dataSegment, bool) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	// Every segment takes at least two bytes: never trust the count to size
	// an allocation.
	segs := make([]dataSegment, 0, min(n, len(payload)/2))
	for range n {
		start := r.Offset()
		s := dataSegment{kind: segOther}
		flag := r.U32()
		switch flag {
		case 0:
		case 1:
			s.kind = segPassive
		case 2:
			// Memory 0 named explicitly, valid only with bulk memory on: kept
			// as it is, so that what a runtime refuses stays refused.
			if r.U32() != 0 {
				return nil, false
			}
		default:
			return nil, false
		}
		if s.kind != segPassive {
			off, lone, ok := offsetExpr(r)
			if !ok {
				return nil, false
			}
			if flag == 0 && lone {
				s.kind, s.off = segConst, uint32(off)
			}
		}
		size := r.U32()
		s.init = uint32(base + r.Offset())
		r.Bytes(size)
		if r.Err() != nil {
			return nil, false
		}
		s.start, s.end = uint32(base+start), uint32(base+r.Offset())
		segs = append(segs, s)
	}
	return segs, r.Done()
}

// offsetExpr steps over an offset expression: i32.const, global.get, or
// extended constant arithmetic; anything else is refused. lone reports an
// expression of one i32.const, whose operand is off.
func offsetExpr(r *wasmbin.Reader) (off int32, lone, ok bool) {
	var first byte
	for n := 0; r.Err() == nil; n++ {
		op := r.Byte()
		if n == 0 {
			first = op
		}
		switch op {
		case 0x41: // i32.const
			off = r.S32()
		case 0x23: // global.get
			r.U32()
		case 0x6a, 0x6b, 0x6c: // i32.add, i32.sub, i32.mul
		case 0x0b: // end
			return off, n == 1 && first == 0x41, r.Err() == nil
		default:
			return 0, false, false
		}
	}
	return 0, false, false
}

// coalesce rewrites the data section with gaps of up to gap zeros filled.
// With keepOutOfBounds, a module whose constant segments do not all fit the
// memory's initial size is not rewritten.
func coalesce(module []byte, gap uint64, keepOutOfBounds bool) ([]byte, bool) {
	md, ok := parseDataSection(module)
	if !ok || !md.hasData || md.indexed {
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
	size := uint64(wasmbin.ULEBLen(uint64(len(pieces))))
	for i := range pieces {
		size += pieces[i].encodedLen()
	}
	if size > math.MaxUint32 {
		return nil, false
	}
	rest := len(module) - md.end
	out := make([]byte, md.sectionStart+1+wasmbin.ULEBLen(size)+int(size)+rest)
	w := copy(out, module[:md.sectionStart])
	out[w] = wasmbin.SectionData
	w = len(wasmbin.AppendULEB(out[:w+1], size))
	w = len(wasmbin.AppendULEB(out[:w], uint64(len(pieces))))
	for i := range pieces {
		p := &pieces[i]
		if !p.merged {
			w += copy(out[w:], module[p.start:p.end])
			continue
		}
		b := append(out[:w], 0x00, 0x41)
		b = wasmbin.AppendSLEB(b, p.offset())
		b = append(b, 0x0b)
		b = wasmbin.AppendULEB(b, p.hi-p.lo)
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
	return uint64(3+wasmbin.SLEBLen(p.offset())+wasmbin.ULEBLen(n)) + n
}

// offset is the operand of the i32.const placing a merged piece. The operand
// is signed: offsets from 2 GiB up are negative.
func (p *dataPiece) offset() int64 { return int64(int32(uint32(p.lo))) }

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
