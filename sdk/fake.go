//go:build !wasip1 && !bermdescribe

package berm

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// FakeHost stands in for a berm host off WebAssembly, so that a program's
// tools run under plain go test. Set the fields that are the call's input,
// Run the tool, then read the fields that are its outcome:
//
//	h := &berm.FakeHost{Args: []byte(`{"name":"Ada"}`)}
//	h.Run(greet)
//	// h.Result is "Hello, Ada!"
//
// It links every syscall, declared or not, and checks no schema.
type FakeHost struct {
	// Args are the call's arguments; nil stands for {}.
	Args []byte
	// Store is the program's key-value store, which outlives the call; Set
	// makes it when it is nil.
	Store map[string][]byte
	// StoreLimit, when positive, bounds the bytes of keys and values in Store:
	// a Set past it is refused.
	StoreLimit int
	// Time is what Now returns; the zero Time stands for the real clock.
	Time time.Time
	// Callees are the tools Call can reach, by "program.tool". A callee's
	// error is its failure, unless it is a *RefusedError, which is the
	// host's. Call refuses a target that is not here.
	Callees map[string]func(args []byte) ([]byte, error)
	// HTTP makes the requests of berm.http, redirects followed as a host
	// does: a test server's Client().Transport, say. Its error is the
	// host's refusal, with its text as the message. Nil refuses every
	// request, as a deployment that grants no host does.
	HTTP http.RoundTripper

	// The outcome of the last Run: Result is what the tool last gave Result;
	// Failed is set when it called Fail, and Failure is the last message.
	Result  []byte
	Failed  bool
	Failure string
	// Logs are the lines the tool logged, in order.
	Logs []string

	staged []byte
}

// The host that hostSyscall reaches: there is one per process, as there is one
// per instance on WebAssembly.
var (
	runMu   sync.Mutex
	current *FakeHost
)

// Run runs tool, a tool's exported function, as one call to h. It clears the
// outcome of the previous Run and keeps Store. Runs are serialized, process
// wide; a callee must not Run.
func (h *FakeHost) Run(tool func()) {
	runMu.Lock()
	defer runMu.Unlock()
	h.Result, h.Failed, h.Failure, h.Logs, h.staged = nil, false, "", nil, nil
	current = h
	defer func() { current = nil }()
	tool()
}

// RunTool runs the tool registered (with Tool) under name as one call to h,
// as Run does.
func (h *FakeHost) RunTool(name string) { h.Run(func() { Run(name) }) }

func hostSyscall(number uint64, ptr unsafe.Pointer, n uint32) uint64 {
	h := current
	if h == nil {
		panic("berm: no host: off WebAssembly, call tools inside FakeHost.Run")
	}
	var mem []byte
	if n > 0 {
		mem = unsafe.Slice((*byte)(ptr), n)
	}
	return h.syscall(number, mem)
}

func (h *FakeHost) syscall(number uint64, mem []byte) uint64 {
	switch number {
	case sysArgsLen:
		return uint64(len(h.args()))
	case sysArgsRead:
		copy(mem, h.args())
		return uint64(len(h.args()))
	case sysResult:
		h.Result = append([]byte{}, mem...)
	case sysFail:
		h.Failed, h.Failure = true, string(mem)
	case sysLog:
		h.Logs = append(h.Logs, string(mem))
	case sysCall:
		f := unframe(mem, 3)
		return h.call(string(f[0])+"."+string(f[1]), f[2])
	case sysResultRead:
		copy(mem, h.staged)
		return uint64(len(h.staged))
	case sysNow:
		if h.Time.IsZero() {
			return uint64(time.Now().UnixMilli())
		}
		return uint64(h.Time.UnixMilli())
	case sysGet:
		v, ok := h.Store[string(mem)]
		if !ok {
			return h.stage(nil) | errorBit
		}
		return h.stage(v)
	case sysSet:
		f := unframe(mem, 2)
		return h.set(string(f[0]), f[1])
	case sysDelete:
		delete(h.Store, string(mem))
	case sysHTTP:
		f := unframe(mem, 4)
		return h.http(string(f[0]), string(f[1]), string(f[2]), f[3])
	default:
		panic("berm: syscall 0x" + strconv.FormatUint(number, 16) + ": nothing is registered for it")
	}
	return 0
}

func (h *FakeHost) args() []byte {
	if h.Args == nil {
		return []byte("{}")
	}
	return h.Args
}

func (h *FakeHost) stage(b []byte) uint64 {
	h.staged = append(h.staged[:0], b...)
	return uint64(len(h.staged))
}

func (h *FakeHost) call(target string, args []byte) uint64 {
	fn := h.Callees[target]
	if fn == nil {
		return h.stage([]byte("berm.call "+target+": refused: no such program or tool")) | errorBit | hostBit
	}
	out, err := fn(append([]byte{}, args...))
	if r := (*RefusedError)(nil); errors.As(err, &r) {
		return h.stage([]byte(r.Error())) | errorBit | hostBit
	}
	if err != nil {
		return h.stage([]byte(err.Error())) | errorBit
	}
	return h.stage(out)
}

func (h *FakeHost) set(key string, value []byte) uint64 {
	if h.StoreLimit > 0 {
		size := len(key) + len(value)
		for k, v := range h.Store {
			if k != key {
				size += len(k) + len(v)
			}
		}
		if size > h.StoreLimit {
			return h.stage([]byte("berm.set: refused: the store would exceed its quota")) | errorBit | hostBit
		}
	}
	if h.Store == nil {
		h.Store = map[string][]byte{}
	}
	h.Store[key] = append([]byte{}, value...)
	return 0
}

// unframe splits a frame into n fields, panicking as a host traps.
func unframe(b []byte, n int) [][]byte {
	var fields [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			panic("berm: malformed frame")
		}
		size := binary.LittleEndian.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			panic("berm: malformed frame")
		}
		fields = append(fields, b[4:4+size])
		b = b[4+size:]
	}
	if len(fields) != n {
		panic("berm: malformed frame")
	}
	return fields
}
