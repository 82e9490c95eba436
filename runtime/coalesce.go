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
// 37,000 of them cost a Go program about 7 ms per call, many times the call
// itself. coalesceData rewrites the data section into a handful of segments
// that leave memory exactly as the originals do. berm compiles the rewritten
// bytes; the program's identity stays the digest of the image as deployed.

// coalesceGap is the longest run of zeros written out to join two segments
// into one. Go's gaps are mostly under 64 bytes, with a few of kilobytes and
// one of megabytes between its read-only and writable data.
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
//     segment ends where one of its originals ends, and the last of them
//     where the last of them does, so it falls out of bounds exactly when one
//     of its originals would, whatever the memory's size.
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
	segConst   = iota // active, memory 0, offset i32.const
	segPassive        // applied by memory.init only
	segOther          // active with any other offset: global.get, extended const
)

type dataSegment struct {
	kind int
	raw  []byte // the whole encoding, for the segments kept as they are
	off  uint32 // segConst only
	init []byte
}

type moduleData struct {
	segments           []dataSegment
	sectionStart, end  int    // of the data section, header included
	memoryBytes        uint64 // the memory's initial size
	hasMemory, hasData bool
}

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// parseData finds and decodes the data section. It is false for anything it
// does not fully understand or that makes the rewrite unsafe.
func parseData(module []byte) (*moduleData, bool) {
	if !bytes.HasPrefix(module, wasmHeader) {
		return nil, false
	}
	md := &moduleData{}
	var seen uint32
	r := &reader{b: module, i: len(wasmHeader)}
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
			if !customSectionOK(payload) {
				return nil, false
			}
		case 2:
			if !importsOK(payload) {
				return nil, false
			}
		case 5:
			n, ok := memorySize(payload)
			if !ok {
				return nil, false
			}
			md.memoryBytes, md.hasMemory = n, true
		case 11:
			segs, ok := parseSegments(payload)
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

func customSectionOK(payload []byte) bool {
	r := &reader{b: payload}
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

// importsOK is true when the module imports no memory and every import is
// one this parser knows how to step over.
func importsOK(payload []byte) bool {
	r := &reader{b: payload}
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

// memorySize is the initial size in bytes of the one memory the section
// defines; only unshared 32-bit memories qualify.
func memorySize(payload []byte) (uint64, bool) {
	r := &reader{b: payload}
	if r.u32() != 1 {
		return 0, false
	}
	flag := r.byte()
	min := r.u32()
	switch flag {
	case 0x00:
	case 0x01:
		r.u32()
	default:
		return 0, false
	}
	if !r.done() || min > 1<<16 {
		return 0, false
	}
	return uint64(min) * PageSize, true
}

func parseSegments(payload []byte) ([]dataSegment, bool) {
	r := &reader{b: payload}
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
		s.init = r.bytes(r.u32())
		if r.bad {
			return nil, false
		}
		s.raw = payload[start:r.i]
		segs = append(segs, s)
	}
	return segs, r.done()
}

// coalesce rewrites the data section with gaps of up to gap zeros filled.
// With keepOutOfBounds, a module whose constant segments do not all fit the
// memory's initial size is not rewritten.
func coalesce(module []byte, gap uint64, keepOutOfBounds bool) ([]byte, bool) {
	md, ok := parseData(module)
	if !ok {
		return nil, false
	}
	var constBytes uint64
	for _, s := range md.segments {
		if s.kind != segConst {
			continue
		}
		if keepOutOfBounds && uint64(s.off)+uint64(len(s.init)) > md.memoryBytes {
			return nil, false
		}
		constBytes += uint64(len(s.init))
	}
	// However far apart the segments lie, the zeros written out stay within
	// this; past it only touching or overlapping segments merge.
	fillBudget := max(constBytes, 1<<20)

	body := make([]byte, 0, len(module)-md.sectionStart)
	count := 0
	var run []int
	var passive [][]byte
	first := true // no segment with an unknown offset applied yet
	flush := func() {
		g := uint64(0)
		if first {
			g = gap
		}
		var n int
		body, n = appendRun(body, md.segments, run, g, fillBudget)
		count += n
		for _, p := range passive {
			body = append(body, p...)
		}
		count += len(passive)
		run, passive = run[:0], passive[:0]
	}
	for i, s := range md.segments {
		switch s.kind {
		case segConst:
			run = append(run, i)
		case segPassive:
			// Without memory.init nothing but its index tells it from
			// another, and nothing can name an index.
			passive = append(passive, s.raw)
		default:
			flush()
			first = false
			body = append(body, s.raw...)
			count++
		}
	}
	flush()
	if count >= len(md.segments) {
		return nil, false
	}

	content := appendU32(nil, uint32(count))
	size := uint64(len(content)) + uint64(len(body))
	if size > math.MaxUint32 {
		return nil, false
	}
	out := make([]byte, 0, len(module)-(md.end-md.sectionStart)+len(body)+16)
	out = append(out, module[:md.sectionStart]...)
	out = append(out, 11)
	out = appendU32(out, uint32(size))
	out = append(out, content...)
	out = append(out, body...)
	out = append(out, module[md.end:]...)
	return out, true
}

// appendRun appends the segments that leave memory as the constant segments
// run (indices into segs, in order) do, and returns how many it appended.
func appendRun(body []byte, segs []dataSegment, run []int, gap, fillBudget uint64) ([]byte, int) {
	if len(run) == 0 {
		return body, 0
	}
	byOffset := make([]int, len(run)) // positions in run
	for p := range byOffset {
		byOffset[p] = p
	}
	slices.SortStableFunc(byOffset, func(a, b int) int {
		oa, ob := segs[run[a]].off, segs[run[b]].off
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return 0
	})
	type group struct {
		lo, hi uint64
		at     int // where its bytes start in body
	}
	groupOf := make([]int, len(run))
	var groups []group
	plan := func(gap uint64) (filled uint64) {
		groups = groups[:0]
		for _, p := range byOffset {
			s := &segs[run[p]]
			lo := uint64(s.off)
			hi := lo + uint64(len(s.init))
			if n := len(groups); n > 0 && lo <= groups[n-1].hi+gap {
				g := &groups[n-1]
				if lo > g.hi {
					filled += lo - g.hi
				}
				g.hi = max(g.hi, hi)
			} else {
				groups = append(groups, group{lo: lo, hi: hi})
			}
			groupOf[p] = len(groups) - 1
		}
		return filled
	}
	if plan(gap) > fillBudget {
		plan(0)
	}
	for i := range groups {
		g := &groups[i]
		body = append(body, 0x00, 0x41)
		body = appendS32(body, int32(uint32(g.lo)))
		body = append(body, 0x0b)
		body = appendU32(body, uint32(g.hi-g.lo))
		g.at = len(body)
		body = append(body, make([]byte, g.hi-g.lo)...)
	}
	for p, i := range run {
		s := &segs[i]
		g := &groups[groupOf[p]]
		copy(body[g.at+int(uint64(s.off)-g.lo):], s.init)
	}
	return body, len(groups)
}

// reader decodes the binary format as strictly as wazero does or more: what
// it accepts, wazero accepts. After a failure every read is a no-op and bad
// is set.
type reader struct {
	b   []byte
	i   int
	bad bool
}

func (r *reader) done() bool { return !r.bad && r.i == len(r.b) }

func (r *reader) byte() byte {
	if r.bad || r.i >= len(r.b) {
		r.bad = true
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) bytes(n uint32) []byte {
	if r.bad || uint64(n) > uint64(len(r.b)-r.i) {
		r.bad = true
		return nil
	}
	r.i += int(n)
	return r.b[r.i-int(n) : r.i]
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose unused bits are zero.
func (r *reader) u32() uint32 {
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
func (r *reader) s32() int32 {
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

func (r *reader) limits() bool {
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
func (r *reader) offsetExpr() bool {
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

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
