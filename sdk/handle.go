package berm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Handle runs one tool call through fn: it decodes the arguments into an A,
// and gives fn's result, or fails with its error's message. A string or
// []byte result goes out as it is (text); any other is encoded as JSON, as
// json.Marshal does but for its HTML escaping: "Fish & Chips" reaches the
// model as it is, not as "Fish \u0026 Chips".
//
// Call it from the tool's exported function, and Warm it from package
// initialization:
//
//	func init() { berm.Warm(greetTool) }
//
//	//go:wasmexport berm_tool_greet
//	func greet() { berm.Handle(greetTool) }
func Handle[A, R any](fn func(A) (R, error)) {
	var args A
	if err := json.Unmarshal(Args(), &args); err != nil {
		Fail("arguments: " + err.Error())
		return
	}
	r, err := fn(args)
	if err != nil {
		Fail(failure(err))
		return
	}
	switch r := any(r).(type) {
	case string:
		hostcall(sysResult, text(r), uint32(len(r)))
	case []byte:
		Result(r)
	default:
		b, err := marshal(r)
		if err != nil {
			Fail("result: " + err.Error())
			return
		}
		Result(b)
	}
}

// failure is the message of a tool's error. A path outside every granted
// directory fails in Go's os with EBADF ("stat /etc: Bad file number"), as
// WASI has it: no descriptor to resolve it against. The model reads the
// message, so it says what happened instead. Only for an operation that
// resolves a path: a read or write of an open file says EBADF of the file
// (a write to one opened read-only), which is inside a grant.
func failure(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, syscall.EBADF) && pathOps[pe.Op] {
		return strings.Replace(err.Error(), pe.Err.Error(), notGranted, 1)
	}
	var le *os.LinkError
	if errors.As(err, &le) && errors.Is(le.Err, syscall.EBADF) {
		return strings.Replace(err.Error(), le.Err.Error(), notGranted, 1)
	}
	return err.Error()
}

// pathOps are the operations of Go's os on wasip1 that resolve a path
// against a granted directory, as their PathError names them.
var pathOps = map[string]bool{
	"open": true, "stat": true, "lstat": true, "mkdir": true, "remove": true,
	"unlinkat": true, "readlink": true, "chmod": true, "chown": true,
	"lchown": true, "chtimes": true, "truncate": true, "chdir": true,
}

const notGranted = "not granted (outside the directories this deployment grants)"

// marshal is json.Marshal without the escaping of &, < and > that makes
// JSON safe inside HTML: a result is read by a model, which would see the
// escapes, not the characters.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Warm does ahead what Handle(fn) otherwise does at the start of every call:
// encoding/json's first look at A (and at R, unless a result of that type
// goes out as text), which it keeps for the life of the program. Call it
// from package initialization; Tool does, for the tools it registers.
//
// A host that snapshots _initialize, as berm does, starts each call from
// the state initialization left, and each call's state is thrown away after
// it: without Warm, every call pays for that first look again. In the Go
// example it was three quarters of a call.
//
// Warm encodes a zero A and R and decodes the A back, so any MarshalJSON or
// UnmarshalJSON of theirs runs on a zero value, during initialization. If
// one fails or panics there, Warm ignores it and the call meets it. A
// syscall other than Log made from one of them panics while Warm runs
// (Warm recovers it) rather than trap the instance: a host links only Log
// during _initialize. A result of an interface type is readied only as
// nil; the type it holds is learnt at each call.
func Warm[A, R any](func(A) (R, error)) {
	warming.Add(1)
	defer func() {
		warming.Add(-1)
		_ = recover()
	}()
	var args A
	if b, err := json.Marshal(args); err == nil {
		_ = json.Unmarshal(b, &args)
	}
	var r R
	switch any(r).(type) {
	case string, []byte:
	default:
		_, _ = marshal(r)
	}
}

// warming is how many Warms are running; hostcall refuses syscalls then,
// from any goroutine: Warm belongs in package initialization, which runs on
// one.
var warming atomic.Int32

// errWarming is what a syscall panics with while Warm runs.
const errWarming = "berm: a syscall from a tool type's JSON method while Warm runs: only Log reaches the host during initialization"

// hostcall makes a syscall through the host (hostSyscall), unless Warm is
// running and it is not Log: then it panics, which Warm recovers, where a
// host would trap the instance, which nothing recovers.
func hostcall(number uint64, ptr unsafe.Pointer, n uint32) uint64 {
	if number != sysLog && warming.Load() > 0 {
		panic(errWarming)
	}
	return hostSyscall(number, ptr, n)
}
