package transform

import "github.com/berm-dev/berm/internal/wasmbin"

// The transform reads instructions with wasmbin.SkipInstruction, as
// manifest does: an instruction it does not know (wasmbin.ErrOpcode), which
// wazero (with the features berm enables) refuses too, leaves the module
// compiled as it is, so that wazero's error names it.

// Opcodes the transform looks at, those a walk of code looks at as wasmbin
// names them.
const (
	opBlock              = wasmbin.OpBlock
	opLoop               = wasmbin.OpLoop
	opIf                 = wasmbin.OpIf
	opElse               = wasmbin.OpElse
	opEnd                = 0x0b
	opBr                 = 0x0c
	opBrIf               = wasmbin.OpBrIf
	opBrTable            = wasmbin.OpBrTable
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
	opMemoryGrow         = 0x40
	opI32Const           = 0x41
	opI32LtU             = 0x49
	opI32GtU             = 0x4b
	opI32LeS             = 0x4c
	opI32LeU             = 0x4d
	opI32Add             = 0x6a
	opI32Sub             = 0x6b
	opI32Or              = 0x72
	opI32ShrU            = 0x76
	opRefFunc            = 0xd2
	opPrefixFC           = 0xfc
	blockEmpty           = 0x40
)
