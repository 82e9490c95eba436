package wasmbin

import (
	"errors"
	"fmt"
	"math"
)

// ErrOpcode is an instruction SkipInstruction does not know, which wazero
// (with the features berm enables) refuses too.
var ErrOpcode = errors.New("unknown instruction")

// Opcodes a walk of a function body looks at.
const (
	OpBlock   = 0x02
	OpLoop    = 0x03
	OpIf      = 0x04
	OpElse    = 0x05
	OpBrIf    = 0x0d
	OpBrTable = 0x0e
)

// SkipInstruction reads past one instruction of a function body, immediates
// included, and returns its first byte. It finds where instructions begin
// and end and no more: what they mean (types, indices, nesting) is wazero's
// to check when it compiles them. It knows WebAssembly 2.0 (MVP, sign
// extension, saturating conversions, bulk memory, reference types,
// multi-value, SIMD) and, to be ready when berm enables them, threads and
// tail calls.
func SkipInstruction(r *Reader) (byte, error) {
	op := r.Byte()
	switch {
	case immediates[op] == immNone:
	case op >= 0x02 && op <= 0x04: // block, loop, if: a block type
		r.SkipLEB() // 0x40, a value type (one byte each) or an s33 type index
	case op == 0x0c, op == 0x0d, op == 0x10, op == 0x12, // br, br_if, call, return_call
		op >= 0x20 && op <= 0x26, // local.get/set/tee, global.get/set, table.get/set
		op == 0xd2:               // ref.func
		r.U32()
	case op == 0x0e: // br_table: the labels, then the default
		for range r.Count() {
			r.U32()
		}
		r.U32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect: type, table
		r.U32()
		r.U32()
	case op == 0x1c: // select with its value types
		for range r.Count() {
			SkipValueType(r)
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores
		skipMemarg(r)
	case op == 0x3f, op == 0x40: // memory.size, memory.grow: a memory index
		r.U32()
	case op == 0x41, op == 0x42: // i32.const, i64.const
		r.SkipLEB()
	case op == 0x43: // f32.const
		r.Bytes(4)
	case op == 0x44: // f64.const
		r.Bytes(8)
	case op == 0xd0: // ref.null: a heap type
		r.SkipLEB()
	case op >= 0xfc && op <= 0xfe:
		sub := r.U32()
		skip := skipPrefixFE
		switch op {
		case 0xfc:
			skip = skipPrefixFC
		case 0xfd:
			skip = skipPrefixFD
		}
		if !skip(r, sub) && r.Err() == nil {
			return op, fmt.Errorf("0x%02x %d: %w", op, sub, ErrOpcode)
		}
	default:
		if r.Err() == nil {
			return op, fmt.Errorf("0x%02x: %w", op, ErrOpcode)
		}
	}
	return op, r.Err()
}

func skipPrefixFC(r *Reader, sub uint32) bool {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init: a data segment, a memory
		r.U32()
		r.U32()
	case sub == 9, sub == 13, sub >= 15 && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		r.U32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy: two indices
		r.U32()
		r.U32()
	case sub == 11: // memory.fill: a memory
		r.U32()
	default:
		return false
	}
	return true
}

// skipPrefixFD reads SIMD's immediates; every instruction not named here has
// none, up to the last of 2.0 (0xff f64x2.convert_low_i32x4_u).
func skipPrefixFD(r *Reader, sub uint32) bool {
	switch {
	case sub <= 11, sub == 92, sub == 93: // v128 loads and stores, load32/64_zero
		skipMemarg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.Bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.Byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		skipMemarg(r)
		r.Byte()
	case sub <= 0xff:
	default:
		return false
	}
	return true
}

// skipPrefixFE reads the threads proposal's immediates.
func skipPrefixFE(r *Reader, sub uint32) bool {
	switch {
	case sub == 3: // atomic.fence
		r.Byte()
	case sub <= 2, sub >= 0x10 && sub <= 0x4e: // notify, wait, atomic loads, stores, rmw
		skipMemarg(r)
	default:
		return false
	}
	return true
}

// skipMemarg reads an alignment (with a memory index when its bit 6 says so,
// as multi-memory writes it) and an offset (up to 64 bits for memory64).
func skipMemarg(r *Reader) {
	if r.U32()&0x40 != 0 {
		r.U32()
	}
	r.U64()
}

// SkipValueType reads past a value type: one byte, or a reference type
// with its heap type.
func SkipValueType(r *Reader) {
	if t := r.Byte(); t == 0x63 || t == 0x64 { // (ref null? heaptype)
		r.SkipLEB()
	}
}

// Shape is what a function body holds that the time and memory of its
// compile grow with faster than its size. wazero's optimizing compiler
// (1.12) walks the dominator tree up from every basic block, and compares
// every value a block takes as a parameter (each local it reads, and its
// block type's values) with each of its predecessors' arguments, all of
// them: its time grows with the square of a function's blocks, and with
// its blocks times the square of the values they carry.
type Shape struct {
	// Locals the body declares (its parameters are its type's).
	Locals uint64
	// Blocks counts what starts a basic block: block, loop, if, else and
	// br_if, and each label of a br_table, its default included, which
	// wazero gives a block of its own; and two for each bulk memory
	// operation, as berm's deadline rewrite makes of it.
	Blocks uint64
	// Arity is the most values a block, loop or if of the body takes and
	// returns together, by its block type.
	Arity uint64
}

// ReadShape reads a function body (its locals, then its code, up to the
// final end) and returns its shape. arity gives the parameters and results
// of a type, by its index, together: 0 for an index out of range, which
// wazero refuses. ReadShape reads the body as SkipInstruction does, and
// refuses what it refuses; what the code means is wazero's to check.
func ReadShape(body []byte, arity func(typeIndex uint32) uint64) (Shape, error) {
	return readShape(body, arity, true)
}

// readShape is ReadShape, reading the common instructions with skipCommon
// when fast (a walk of Go's code took 60 times its sections' alone without
// it), or every one with SkipInstruction, which the fuzz holds it to.
func readShape(body []byte, arity func(typeIndex uint32) uint64, fast bool) (Shape, error) {
	var s Shape
	r := NewReader(body)
	for range r.Count() {
		s.Locals += uint64(r.U32())
		SkipValueType(r)
	}
	if r.Err() != nil {
		return s, fmt.Errorf("locals: %w", r.Err())
	}
	for r.Len() > 0 {
		at := r.Offset()
		op := body[at]
		if end, ok := skipCommon(body, at); ok && fast {
			r.off = end
		} else if _, err := SkipInstruction(r); err != nil {
			return s, err
		}
		switch op {
		case OpBlock, OpLoop, OpIf:
			s.Blocks++
			// A block type is 0x40, a value type (one result, negative as
			// an s33) or a type index.
			bt := NewReader(body[at+1:])
			if t := bt.S33(); bt.Err() == nil && t >= 0 && t <= math.MaxUint32 {
				s.Arity = max(s.Arity, arity(uint32(t)))
			} else if bt.Err() == nil && t != -64 {
				s.Arity = max(s.Arity, 1)
			}
		case OpElse, OpBrIf:
			s.Blocks++
		case 0xfc:
			// berm's deadline rewrite cuts memory.init, memory.copy and
			// memory.fill into pieces behind an if and an else, which
			// carry every local: 16 fills in a function of 32,000 locals
			// compiled for minutes.
			switch NewReader(body[at+1:]).U32() {
			case 8, 10, 11:
				s.Blocks += 2
			}
		case OpBrTable:
			s.Blocks += uint64(NewReader(body[at+1:]).U32()) + 1
		}
	}
	return s, nil
}

// The immediates of an instruction, as SkipInstruction's first case and
// skipCommon read them: none, one LEB128, or a memarg (immOther: any
// other, or an unknown instruction).
const (
	immOther = iota
	immNone
	immLEB
	immMemarg
)

var immediates = func() (t [256]uint8) {
	for op := range 256 {
		switch {
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1:
			// No immediates: unreachable, nop, else, end, return, drop,
			// select, the numeric instructions, ref.is_null.
			t[op] = immNone
		case op == 0x0c, op == 0x0d, op == 0x10, op == 0x12, op >= 0x20 && op <= 0x26, op == 0xd2,
			op == 0x3f, op == 0x40, op == 0x41, op == 0x42:
			t[op] = immLEB
		case op >= 0x28 && op <= 0x3e:
			t[op] = immMemarg
		}
	}
	return t
}()

// skipCommon returns the end of the instruction at body[at] when it is a
// common one whose immediates SkipInstruction would read as it does here:
// none, or LEB128s of at most 4 bytes, in range for any immediate. It
// reports false for the rest, for SkipInstruction to read.
func skipCommon(body []byte, at int) (int, bool) {
	i := at + 1
	switch immediates[body[at]] {
	case immNone:
		return i, true
	case immLEB:
		return shortLEB(body, i)
	case immMemarg:
		// An alignment of one byte that names no memory (bit 6), then
		// the offset.
		if i < len(body) && body[i] < 0x40 {
			return shortLEB(body, i+1)
		}
	}
	return 0, false
}

// shortLEB is the end of the LEB128 at body[i] if it takes at most 4 bytes.
func shortLEB(body []byte, i int) (int, bool) {
	for n := i; n < i+4 && n < len(body); n++ {
		if body[n] < 0x80 {
			return n + 1, true
		}
	}
	return 0, false
}
