package transform

import (
	"errors"
	"fmt"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// errOpcode is an instruction the walker does not know, which wazero (with
// the features berm enables) refuses too; a module holding one is compiled as
// it is, so that wazero's error names it.
var errOpcode = errors.New("unknown instruction")

// Opcodes the transform looks at.
const (
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opEnd                = 0x0b
	opBr                 = 0x0c
	opBrIf               = 0x0d
	opBrTable            = 0x0e
	opReturn             = 0x0f
	opCall               = 0x10
	opCallIndirect       = 0x11
	opReturnCall         = 0x12
	opReturnCallIndirect = 0x13
	opLocalGet           = 0x20
	opLocalSet           = 0x21
	opLocalTee           = 0x22
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opI32Const           = 0x41
	opI32LeS             = 0x4c
	opI32Add             = 0x6a
	opI32Sub             = 0x6b
	opI32ShrU            = 0x76
	opRefFunc            = 0xd2
	opPrefixFC           = 0xfc
	blockEmpty           = 0x40
)

// skipInstruction reads past one instruction of a function body, immediates
// included, and returns its first byte. It finds where instructions begin
// and end and no more: what they mean (types, indices, nesting) is wazero's
// to check when it compiles the result. It knows WebAssembly 2.0 (MVP,
// sign extension, saturating conversions, bulk memory, reference types,
// multi-value, SIMD) and, to be ready when berm enables them, threads and
// tail calls.
func skipInstruction(r *wasmbin.Reader) (byte, error) {
	op := r.Byte()
	switch {
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
		// No immediates: unreachable, nop, else, end, return, drop, select,
		// the numeric instructions, ref.is_null.
	case op >= 0x02 && op <= 0x04: // block, loop, if: a block type
		r.SkipLEB() // 0x40, a value type (one byte each) or an s33 type index
	case op == 0x0c, op == 0x0d, op == opCall, op == opReturnCall, // br, br_if, call, return_call
		op >= 0x20 && op <= 0x26, // local.get/set/tee, global.get/set, table.get/set
		op == 0xd2:               // ref.func
		r.U32()
	case op == 0x0e: // br_table: the labels, then the default
		for range r.Count() {
			r.U32()
		}
		r.U32()
	case op == opCallIndirect, op == opReturnCallIndirect: // type, table
		r.U32()
		r.U32()
	case op == 0x1c: // select with its value types
		for range r.Count() {
			skipValueType(r)
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
			return op, fmt.Errorf("0x%02x %d: %w", op, sub, errOpcode)
		}
	default:
		if r.Err() == nil {
			return op, fmt.Errorf("0x%02x: %w", op, errOpcode)
		}
	}
	return op, r.Err()
}

func skipPrefixFC(r *wasmbin.Reader, sub uint32) bool {
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
func skipPrefixFD(r *wasmbin.Reader, sub uint32) bool {
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
func skipPrefixFE(r *wasmbin.Reader, sub uint32) bool {
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
func skipMemarg(r *wasmbin.Reader) {
	if r.U32()&0x40 != 0 {
		r.U32()
	}
	r.U64()
}

func skipValueType(r *wasmbin.Reader) {
	if t := r.Byte(); t == 0x63 || t == 0x64 { // (ref null? heaptype)
		r.SkipLEB()
	}
}
