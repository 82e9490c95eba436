package berm

import (
	"encoding/binary"
	"time"
	"unsafe"
)

// Numbers of the syscalls: the 64-bit FNV-1a hash of each name (ABI.md,
// Syscalls).
const (
	sysArgsLen    = 0x6ee73f4eae1c1535 // berm.args.len
	sysArgsRead   = 0x4d9b428e492faf86 // berm.args.read
	sysResult     = 0x83ad05f161e950ac // berm.result
	sysFail       = 0x71ea7deedc66e725 // berm.fail
	sysLog        = 0x718e2c830194e059 // berm.log
	sysCall       = 0x6410f207e9992ec1 // berm.call
	sysResultRead = 0x6c92a7d946a830be // berm.result.read

	// The berm binary's host syscalls; a program declares those it calls in
	// its manifest's "syscalls".
	sysNow    = 0x83918e830bfa80df // berm.now
	sysGet    = 0xbda7ac832c28873f // berm.get
	sysSet    = 0x585dd082f38a6e6b // berm.set
	sysDelete = 0x84a8776bcc70bc72 // berm.delete
)

// The functions that make a host syscall (Get, Set, Delete, Now, Call) are
// //go:noinline: berm build finds in the image's name section which of them a
// program links, and refuses one that links a syscall it does not declare.

// Bits of a staging syscall's return value: errorBit marks the staged bytes as
// an error message, errorBit|hostBit as the host's refusal. The other bits
// are the length of the staged bytes.
const (
	errorBit   = 1 << 63
	hostBit    = 1 << 62
	lengthMask = hostBit - 1
)

// CalleeError is the failure of a tool reached with Call: the message it gave
// berm.fail.
type CalleeError struct {
	Target  string // "program.tool"
	Message string
}

func (e *CalleeError) Error() string { return e.Target + ": " + e.Message }

// RefusedError is the host's refusal of a syscall: for Call, the target does
// not exist or is not declared, the call depth or the deadline ran out, the
// arguments were refused, or the callee trapped (it may have run in part); for
// Set, a quota.
type RefusedError struct {
	Syscall string // "berm.call", "berm.set"
	// Message is the host's own, and names what was refused and why.
	Message string
}

func (e *RefusedError) Error() string {
	if e.Message == "" {
		return e.Syscall + ": refused by the host"
	}
	return e.Message
}

// Args returns the call's arguments: a JSON object, byte for byte as the host
// received it and checked against the tool's parameters.
func Args() []byte {
	n := hostcall(sysArgsLen, nil, 0)
	b := make([]byte, n)
	hostcall(sysArgsRead, data(b), uint32(len(b)))
	return b
}

// Result sets the call's result; a later Result replaces it. A Fail in the
// same call wins over it.
func Result(b []byte) { hostcall(sysResult, data(b), uint32(len(b))) }

// Fail marks the call as the program's own failure with message, which the
// caller sees (on MCP, the model). It does not stop the tool: return after it.
// The last Fail of a call wins.
func Fail(message string) { hostcall(sysFail, text(message), uint32(len(message))) }

// Log writes one line to the host's log of the program.
func Log(line string) { hostcall(sysLog, text(line), uint32(len(line))) }

// Call runs the tool of another program, named "program.tool" in the
// manifest's "calls", with args (a JSON object), and returns its result. The
// error is a *CalleeError when the callee failed, or a *RefusedError when the
// host refused.
//
//go:noinline
func Call(program, tool string, args []byte) ([]byte, error) {
	in := frame([]byte(program), []byte(tool), args)
	v := hostcall(sysCall, data(in), uint32(len(in)))
	out := staged(v)
	switch {
	case v&(errorBit|hostBit) == errorBit|hostBit:
		return nil, &RefusedError{Syscall: "berm.call", Message: string(out)}
	case v&errorBit != 0:
		return nil, &CalleeError{Target: program + "." + tool, Message: string(out)}
	}
	return out, nil
}

// Get returns the value under key in the program's key-value store, and
// whether there is one. The manifest must declare berm.get.
//
//go:noinline
func Get(key string) ([]byte, bool) {
	v := hostcall(sysGet, text(key), uint32(len(key)))
	if v&errorBit != 0 {
		return nil, false
	}
	return staged(v), true
}

// Set puts value under key in the program's key-value store. The error is a
// *RefusedError, when the host refuses (a quota). The manifest must declare
// berm.set.
//
//go:noinline
func Set(key string, value []byte) error {
	in := frame([]byte(key), value)
	v := hostcall(sysSet, data(in), uint32(len(in)))
	if v&errorBit != 0 {
		return &RefusedError{Syscall: "berm.set", Message: string(staged(v))}
	}
	return nil
}

// Delete removes key from the program's key-value store; an absent key is
// not an error. The manifest must declare berm.delete.
//
//go:noinline
func Delete(key string) { hostcall(sysDelete, text(key), uint32(len(key))) }

// Now returns the host's clock, to the millisecond. The manifest must declare
// berm.now.
//
//go:noinline
func Now() time.Time { return time.UnixMilli(int64(hostcall(sysNow, nil, 0))) }

// staged copies out the bytes a staging syscall left on the host.
func staged(v uint64) []byte {
	n := v & lengthMask
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	hostcall(sysResultRead, data(b), uint32(len(b)))
	return b
}

// frame encodes fields as ABI.md's Framing says: each a little-endian u32
// length, then its bytes.
func frame(fields ...[]byte) []byte {
	n := 0
	for _, f := range fields {
		n += 4 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// data and text give the address of bytes the host reads or writes during a
// syscall. The host keeps none of them past it, and Go's collector does not
// move memory, so no copy is needed.
func data(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
func text(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }
