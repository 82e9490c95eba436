package transform

import "github.com/berm-dev/berm/internal/wasmbin"

// The bulk memory operations that may be cut, as 0xfc's sub-opcodes
// (snapshot.go names the table's).
const (
	subMemoryInit = 8
	subMemoryCopy = 10
	subMemoryFill = 11
)

// cut returns the helper that does the 0xfc instruction ins BulkChunk bytes
// at a time: a memory.fill or memory.copy of memory 0, or a memory.init of
// a segment longer than BulkChunk (of any other segment, a length over
// BulkChunk traps, as it is).
func (m *rewriter) cut(ins []byte) (helper, bool) {
	r := wasmbin.NewReader(ins[1:])
	switch r.U32() {
	case subMemoryFill:
		if r.U32() == 0 && r.Done() {
			return helper{kind: helperFill}, true
		}
	case subMemoryCopy:
		if r.U32() == 0 && r.U32() == 0 && r.Done() {
			return helper{kind: helperCopy}, true
		}
	case subMemoryInit:
		segment := r.U32()
		if r.U32() == 0 && r.Done() && m.long[segment] {
			return helper{kind: helperInit, segment: segment}, true
		}
	}
	return helper{}, false
}

// isTableGrow reports whether the 0xfc instruction ins is table.grow.
func isTableGrow(ins []byte) bool {
	return wasmbin.NewReader(ins[1:]).U32() == subTableGrow
}

// chunkSite appends what replaces the bulk operation op, its operands on the
// stack: when its length is BulkChunk or less, the count of it and op, as
// at any bulk operation; else a call of h, which cuts it.
//
//	if length > BulkChunk { h(operands) } else { count; op(operands) }
func (m *rewriter) chunkSite(b []byte, c counter, local uint32, h helper, op []byte) []byte {
	b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(local))
	b = wasmbin.AppendULEB(append(b, opLocalGet), uint64(local))
	b = wasmbin.AppendSLEB(append(b, opI32Const), BulkChunk)
	b = append(b, opI32GtU, opIf)
	// The if takes the three operands, as h does.
	b = wasmbin.AppendSLEB(b, int64(m.types.index(sigBulk)))
	if c.local >= 0 {
		b = c.global().set(c.get(b))
	}
	b = wasmbin.AppendULEB(append(b, opCall), uint64(m.helper(h)))
	if c.local >= 0 {
		b = c.set(c.global().get(b))
	}
	b = append(b, opElse)
	b = m.countLength(b, c, local)
	b = append(b, op...)
	return append(b, opEnd)
}

// helperBody appends the body of the function h, which counts in the
// global.
func (m *rewriter) helperBody(b []byte, h helper) []byte {
	global := counter{globalIndex: m.counter, local: -1}
	b = append(b, 0) // no locals but the parameters
	if h.kind == helperCount {
		// (param $weight i32): counter -= weight, and tick when it is spent.
		b = global.get(b)
		b = append(b, opLocalGet, 0, opI32Sub)
		b = m.spent(b, global)
		return append(b, opEnd)
	}
	// (param i32 i32 i32): a destination, a value or a source, a length
	// ($n, 2), as the instruction takes them; the instruction, of lengths
	// given.
	var op func(b []byte, n ...byte) []byte
	switch h.kind {
	case helperFill:
		op = func(b []byte, n ...byte) []byte { return append(append(b, n...), opPrefixFC, subMemoryFill, 0) }
	case helperCopy:
		op = func(b []byte, n ...byte) []byte { return append(append(b, n...), opPrefixFC, subMemoryCopy, 0, 0) }
	case helperInit:
		op = func(b []byte, n ...byte) []byte {
			b = append(append(b, n...), opPrefixFC, subMemoryInit)
			return append(wasmbin.AppendULEB(b, uint64(h.segment)), 0)
		}
	}
	get := func(b []byte, locals ...byte) []byte {
		for _, l := range locals {
			b = append(b, opLocalGet, l)
		}
		return b
	}
	chunk := wasmbin.AppendSLEB([]byte{opI32Const}, BulkChunk)
	// end returns the instructions that push local l plus $n.
	end := func(l byte) []byte { return []byte{opLocalGet, l, opLocalGet, 2, opI32Add} }
	// wraps returns the instructions that push whether local l plus $n
	// passes 2^32.
	wraps := func(l byte) []byte { return append(end(l), opLocalGet, 2, opI32LtU) }
	// advance returns the instructions that add BulkChunk to local l.
	advance := func(l byte) []byte {
		return append(append([]byte{opLocalGet, l}, chunk...), opI32Add, opLocalSet, l)
	}

	b = append(b, opBlock, blockEmpty)
	b = append(append(get(b, 2), chunk...), opI32LeU, opBrIf, 0)
	// Past 2^32 the operation is out of bounds of any memory but one of
	// 4 GiB, and whole it traps or is right: it is done as it was.
	b = append(b, wraps(0)...)
	if h.kind != helperFill {
		b = append(append(b, wraps(1)...), opI32Or)
	}
	b = append(b, opIf, blockEmpty)
	b = append(op(get(b, 0, 1, 2)), opReturn, opEnd)
	// An operation of no bytes at its end traps when any of its bytes is
	// out of bounds (of memory, and of the source or the segment), as
	// the whole one would, and writes none.
	b = append(b, end(0)...)
	if h.kind == helperFill {
		b = append(b, opLocalGet, 1)
	} else {
		b = append(b, end(1)...)
	}
	b = op(b, opI32Const, 0)
	next := append(append([]byte{opLocalGet, 2}, chunk...), opI32GtU, opBrIf, 0, opEnd)
	if h.kind == helperCopy {
		// A copy onto a later place reads from the end down, so that
		// no byte is written before it is read.
		b = append(get(b, 0, 1), opI32GtU, opIf, blockEmpty, opLoop, blockEmpty)
		b = m.count(b, global, global, 1+BulkChunk>>BulkShift)
		b = append(append(get(b, 2), chunk...), opI32Sub, opLocalSet, 2)
		b = op(b, append(append(end(0), end(1)...), chunk...)...)
		b = append(append(b, next...), opElse)
	}
	b = append(b, opLoop, blockEmpty)
	b = m.count(b, global, global, 1+BulkChunk>>BulkShift)
	if h.kind == helperFill {
		b = op(b, append([]byte{opLocalGet, 0, opLocalGet, 1}, chunk...)...)
		b = append(b, advance(0)...)
	} else {
		b = op(b, append([]byte{opLocalGet, 0, opLocalGet, 1}, chunk...)...)
		b = append(append(b, advance(0)...), advance(1)...)
	}
	b = append(append(get(b, 2), chunk...), opI32Sub, opLocalSet, 2)
	b = append(b, next...)
	if h.kind == helperCopy {
		b = append(b, opEnd) // the if
	}
	b = append(b, opEnd) // the block
	// The rest, or all of a short one.
	b = m.countLength(b, global, 2)
	b = op(get(b, 0, 1, 2))
	return append(b, opEnd)
}

// isSlow reports whether the instruction b is one that takes as long as
// tens of bytes of other code, or more: a division or remainder, a square
// root, a float division or rounding, a conversion between floats and
// integers that checks or corrects its value; the vector ones of these, and
// the vector instructions that wazero does in a sequence of many.
func isSlow(b []byte) bool {
	switch op := b[0]; {
	case op >= 0x6d && op <= 0x70, op >= 0x7f && op <= 0x82: // i32, i64 div_s, div_u, rem_s, rem_u
		return true
	case op >= 0x8d && op <= 0x91, op == 0x95: // f32 ceil, floor, trunc, nearest, sqrt; div
		return true
	case op >= 0x9b && op <= 0x9f, op == 0xa3: // f64 likewise
		return true
	case op >= 0xa8 && op <= 0xb1: // i32, i64 trunc_f32/f64_s/u: they trap
		return true
	case op == 0xb5, op == 0xba: // f32, f64 convert_i64_u
		return true
	case op == opPrefixFC: // the saturating truncations
		return wasmbin.NewReader(b[1:]).U32() <= 7
	case op == 0xfd:
		switch sub := wasmbin.NewReader(b[1:]).U32(); {
		case sub == 0x62: // i8x16.popcnt
			return true
		case sub >= 0x67 && sub <= 0x6a, sub == 0x74, sub == 0x75, sub == 0x7a, sub == 0x94: // ceil, floor, trunc, nearest
			return true
		case sub == 0xd5: // i64x2.mul
			return true
		case sub == 0xe3, sub == 0xe7, sub == 0xef, sub == 0xf3: // f32x4, f64x2 sqrt, div
			return true
		case sub >= 0xf8: // trunc_sat, convert
			return true
		}
	}
	return false
}
