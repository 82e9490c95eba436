package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/runtime/sandbox"
)

// Bits of a staging syscall's return value (ABI.md, Syscalls): ErrorBit marks
// the staged bytes as an error message, ErrorBit|HostBit as the host's refusal.
const (
	ErrorBit uint64 = 1 << 63
	HostBit  uint64 = 1 << 62
)

// Number is the number a program calls a syscall by: the 64-bit FNV-1a hash
// of its name.
func Number(name string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 0x100000001b3
	}
	return h
}

// Input says how a syscall reads its ptr and len arguments.
type Input int

const (
	// Unused: ptr and len are ignored, and never trap.
	Unused Input = 0
	// Raw: the len bytes at ptr, unframed.
	Raw Input = -1
)

// Framed is an input of n fields, framed as ABI.md defines: each a
// little-endian u32 length and that many bytes, filling len exactly.
func Framed(n int) Input { return Input(n) }

// A Syscall is one entry of a host's syscall table. A program reaches it only
// when its manifest declares the name; the number it calls is Number(Name).
type Syscall struct {
	Name  string
	Input Input
	// Func handles one invocation. in holds the input as Input says (nil for
	// Unused); its bytes alias the program's memory, so copy what you keep.
	// The returned value goes back to the program; stage bytes with the
	// Call's methods. An error, the host's failure, traps the instance: the
	// program sees only "syscall NAME: host error", and the error itself goes
	// to Config.HostError. A panic is taken for an error.
	Func func(ctx context.Context, c *Call, in [][]byte) (uint64, error)
}

// SyscallInfo describes one entry of the table a program is linked against.
type SyscallInfo struct {
	Name   string `json:"name"`
	Number uint64 `json:"number"`
	// Core is set for the syscalls of ABI.md that every host has and every
	// program is linked with; the others are linked only when declared.
	Core bool `json:"core"`
}

// Call is one running call of a program's tool, as its syscalls see it.
type Call struct {
	rt      *Runtime
	program *Program
	tool    string
	args    []byte
	depth   int

	initializing bool
	result       outcomeBytes
	failure      outcomeBytes
	failed       bool
	staged       []byte
	syscall      string // the host syscall running, for RefuseHost
	// wasiChanged is set when a WASI function may have changed what the
	// instance holds outside its memory and globals (listen.go) in the call
	// or its _initialize: the instance cannot be reset, only discarded, and
	// such an _initialize cannot be snapshotted. wasiDescriptor is set while
	// a WASI function runs on a descriptor past the standard streams.
	wasiChanged, wasiDescriptor bool

	logs *logBudget // the top-level call's, shared by nested calls
	// stdout and stderr of a WASI program, into the log.
	stdout, stderr *logWriter
	ownLogs        logBudget
	// fatal is the first line of this call's stdout or stderr that said
	// the program was dying (FatalLine), cut to maxFatalLine: a trap's
	// message quotes it.
	fatal string
}

// Program is the deployed name of the program making the syscall.
func (c *Call) Program() string { return c.program.Name }

// Tool is the tool being called.
func (c *Call) Tool() string { return c.tool }

// Grants are what the program's deployment grants it (never nil).
func (c *Call) Grants() *sandbox.Grants { return &c.program.Grants }

// Depth is the call's depth: 0 at the top level, d+1 inside a berm.call made at d.
func (c *Call) Depth() int { return c.depth }

// Stage leaves b on the host for berm.result.read and returns its length:
// a staging syscall's plain return.
func (c *Call) Stage(b []byte) uint64 {
	c.staged = append(c.staged[:0], b...)
	return uint64(len(c.staged))
}

// StageError stages msg as an error message (bit 63).
func (c *Call) StageError(msg []byte) uint64 { return c.Stage(msg) | ErrorBit }

// Refuse stages msg as the host's refusal (bits 63 and 62).
func (c *Call) Refuse(msg string) uint64 {
	c.staged = append(c.staged[:0], msg...)
	return uint64(len(c.staged)) | ErrorBit | HostBit
}

// RefuseHost is Refuse for the host's own failure (a full disk, say): err
// goes to Config.HostError, and the program gets only "NAME: host error",
// NAME the syscall running. Use it rather than putting err's text in a
// refusal, which may name the host's files.
func (c *Call) RefuseHost(ctx context.Context, err error) uint64 {
	c.rt.hostFailed(ctx, c, fmt.Errorf("syscall %s: %w", c.syscall, err))
	return c.Refuse(fmt.Sprintf("%s: %v", c.syscall, ErrHost))
}

// HostFailed hands err, a host failure the program is not shown (it names
// the host's files, say), to Config.HostError, within the call's bound of
// MaxHostErrors.
func (c *Call) HostFailed(ctx context.Context, err error) { c.rt.hostFailed(ctx, c, err) }

// MaxLogLine bounds one berm.log line; longer lines are cut to it.
const MaxLogLine = 64 << 10

// MaxOutput bounds what a top-level call's WASI stdout and stderr are read
// for its log, nested calls included (twice Limits.MaxLogBytes when that
// is more): the log keeps at most that much, and what comes past it is
// counted and dropped without being looked at, so that no write, however
// many iovecs over however much memory, costs the host more than that.
const MaxOutput = 4 << 20

// maxOutput is the bound of MaxOutput under r's limits.
func (r *Runtime) maxOutput() int64 {
	return max(MaxOutput, 2*int64(r.limits.MaxLogBytes))
}

// logBudget is what berm.log may still write in a top-level call.
type logBudget struct {
	lines, bytes int
	dropped      int
	// output is what stdout and stderr were read of, unread what they
	// wrote past maxOutput, unreadNoted what outputNotes said of it.
	output, unread, unreadNoted int64
	// notGranted counts the lines that said a path was not granted,
	// notGrantedDropped those past MaxNotGranted, and notGrantedNoted what
	// outputNotes said of them.
	notGranted, notGrantedDropped, notGrantedNoted int
	// Host errors handed to Config.HostError, and those past MaxHostErrors.
	hostErrors, hostDropped int
}

// take reports whether a line of n bytes is written. Once one is dropped,
// every later one is too, so that the log is a prefix of what was written.
func (b *logBudget) take(n int) bool {
	if b.dropped > 0 || b.lines == 0 || n > b.bytes {
		b.dropped++
		return false
	}
	b.lines--
	b.bytes -= n
	return true
}

// spent reports whether every later line is dropped.
func (b *logBudget) spent() bool { return b.dropped > 0 || b.lines == 0 || b.bytes == 0 }

// admit returns what of p, written to stdout or stderr, is read for the log
// within bound, and counts the rest unread.
func (b *logBudget) admit(p []byte, bound int64) []byte {
	room := max(bound-b.output, 0)
	if int64(len(p)) > room {
		b.unread += int64(len(p)) - room
		p = p[:room]
	}
	b.output += int64(len(p))
	return p
}

// takeNotGranted reports whether a line saying a path was not granted is
// written, within MaxNotGranted.
func (b *logBudget) takeNotGranted() bool {
	if b.notGranted >= MaxNotGranted {
		b.notGrantedDropped++
		return false
	}
	b.notGranted++
	return true
}

// outputNotes are the lines that say what a WASI program's output and
// refusals dropped since the last notes: what its stdout and stderr wrote
// past bound, unread, and the paths not granted past MaxNotGranted. Each
// call that wrote them says so as it ends (Call.flushOutput), beside what
// the top-level call says of the lines dropped.
func (b *logBudget) outputNotes(bound int64) [][]byte {
	var notes [][]byte
	if n := b.unread - b.unreadNoted; n > 0 {
		notes = append(notes, fmt.Appendf(nil, "berm: %d bytes of stdout and stderr dropped unread (limit %d bytes per call)", n, bound))
	}
	if n := b.notGrantedDropped - b.notGrantedNoted; n > 0 {
		notes = append(notes, fmt.Appendf(nil, "berm: %d more paths not granted (limit %d lines per call)", n, MaxNotGranted))
	}
	b.unreadNoted, b.notGrantedNoted = b.unread, b.notGrantedDropped
	return notes
}

// logLine writes one line of the program's log (berm.log, or a WASI
// program's stdout and stderr), cut to MaxLogLine, within the call's budget.
func (c *Call) logLine(ctx context.Context, line []byte) {
	if len(line) > MaxLogLine {
		line = line[:MaxLogLine]
	}
	if c.rt.log != nil && c.logs.take(len(line)) {
		c.rt.log(ctx, c.program.Name, c.tool, append([]byte(nil), line...))
	}
}

// handler is a linked syscall: it reads its own input from memory.
type handler struct {
	name string
	core bool
	fn   func(ctx context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64
}

// Core syscall names (ABI.md, Core syscalls).
const (
	SysArgsLen    = "berm.args.len"
	SysArgsRead   = "berm.args.read"
	SysResult     = "berm.result"
	SysFail       = "berm.fail"
	SysLog        = "berm.log"
	SysCall       = "berm.call"
	SysResultRead = "berm.result.read"
)

func coreHandlers() []handler {
	return []handler{
		{name: SysArgsLen, core: true, fn: func(_ context.Context, c *Call, _ api.Memory, _, _ uint32) uint64 {
			return uint64(len(c.args))
		}},
		{name: SysArgsRead, core: true, fn: func(_ context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			write(mem, SysArgsRead, ptr, n, c.args)
			return uint64(len(c.args))
		}},
		{name: SysResult, core: true, fn: func(_ context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			c.result.set(read(mem, SysResult, ptr, n), c.rt.limits.MaxResult)
			return 0
		}},
		{name: SysFail, core: true, fn: func(_ context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			c.failure.set(read(mem, SysFail, ptr, n), c.rt.limits.MaxResult)
			c.failed = true
			return 0
		}},
		{name: SysLog, core: true, fn: func(ctx context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			c.logLine(ctx, read(mem, SysLog, ptr, n))
			return 0
		}},
		{name: SysCall, core: true, fn: func(ctx context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			f := frame(SysCall, read(mem, SysCall, ptr, n), 3)
			return c.rt.nested(ctx, c, f[0], f[1], f[2])
		}},
		{name: SysResultRead, core: true, fn: func(_ context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
			write(mem, SysResultRead, ptr, n, c.staged)
			return uint64(len(c.staged))
		}},
	}
}

// hostHandler adapts an embedder's Syscall to a handler.
func hostHandler(s Syscall) handler {
	return handler{name: s.Name, fn: func(ctx context.Context, c *Call, mem api.Memory, ptr, n uint32) uint64 {
		var in [][]byte
		switch {
		case s.Input == Raw:
			in = [][]byte{read(mem, s.Name, ptr, n)}
		case s.Input > 0:
			in = frame(s.Name, read(mem, s.Name, ptr, n), int(s.Input))
		}
		c.syscall = s.Name
		v, err := callHost(ctx, c, s, in)
		c.syscall = ""
		if err != nil {
			c.rt.hostFailed(ctx, c, fmt.Errorf("syscall %s: %w", s.Name, err))
			// The error's own words may name anything of the host's; only
			// an error that wraps ErrHost was worded for the program.
			shown := ErrHost
			if errors.Is(err, ErrHost) {
				shown = err
			}
			panic(&trap{msg: fmt.Sprintf("syscall %s: %v", s.Name, shown), err: ErrHost})
		}
		return v
	}}
}

// callHost runs an embedder's Func, taking a panic for its error: wazero
// would report the panic's text, which may name anything of the host's.
func callHost(ctx context.Context, c *Call, s Syscall, in [][]byte) (v uint64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			if perr, ok := p.(error); ok {
				err = fmt.Errorf("panic: %w", perr)
			}
		}
	}()
	return s.Func(ctx, c, in)
}

// read returns the n bytes at ptr, trapping when any is outside memory. Zero
// bytes never trap.
func read(mem api.Memory, name string, ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		panic(trapf("syscall %s: %d bytes at 0x%x are outside memory (%d bytes)", name, n, ptr, mem.Size()))
	}
	return b
}

// write copies min(capacity, len(src)) bytes to ptr, trapping when any is
// outside memory.
func write(mem api.Memory, name string, ptr, capacity uint32, src []byte) {
	if uint64(capacity) > uint64(len(src)) {
		capacity = uint32(len(src))
	}
	if capacity == 0 {
		return
	}
	if !mem.Write(ptr, src[:capacity]) {
		panic(trapf("syscall %s: %d bytes at 0x%x are outside memory (%d bytes)", name, capacity, ptr, mem.Size()))
	}
}

// Frame encodes fields as ABI.md's Framing says, each a little-endian u32
// length then its bytes: what a host syscall stages when it answers with
// several fields (berm.http's response). frame is its inverse.
func Frame(fields ...[]byte) []byte {
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

// frame splits b into exactly n framed fields, trapping on anything else.
func frame(name string, b []byte, n int) [][]byte {
	fields := make([][]byte, 0, n)
	for len(b) > 0 {
		if len(b) < 4 {
			panic(trapf("syscall %s: malformed frame: %d stray bytes after field %d", name, len(b), len(fields)))
		}
		size := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(size) > uint64(len(b)) {
			panic(trapf("syscall %s: malformed frame: field %d claims %d bytes, %d left", name, len(fields), size, len(b)))
		}
		fields = append(fields, b[:size])
		b = b[size:]
	}
	if len(fields) != n {
		panic(trapf("syscall %s: malformed frame: %d fields, want %d", name, len(fields), n))
	}
	return fields
}

// dispatch is the one function a program imports from module berm.
func (r *Runtime) dispatch(ctx context.Context, mod api.Module, stack []uint64) {
	c, _ := ctx.Value(callKey{}).(*Call)
	if c == nil {
		panic(trapf("berm.syscall called outside a call"))
	}
	// A syscall is where a program may loop without a loop header the
	// deadline's rewrite counts (berm.call after berm.call, each nested call
	// starting its own count): once the call's context is done, every one
	// traps, and so the loop ends.
	r.checkRunning(ctx)
	number := stack[0]
	h, ok := c.program.table[number]
	if !ok {
		panic(r.unlinked(number))
	}
	if c.initializing && h.name != SysLog {
		panic(trapf("syscall %s called during _initialize: only berm.log is linked there", h.name))
	}
	stack[0] = h.fn(ctx, c, mod.Memory(), uint32(stack[1]), uint32(stack[2]))
}

// unlinked names a number the program's table does not hold.
func (r *Runtime) unlinked(number uint64) *trap {
	for _, s := range r.hostSyscalls {
		if Number(s.Name) == number {
			return trapf("syscall %s (0x%x) is not linked: the program's manifest does not declare it in syscalls", s.Name, number)
		}
	}
	return trapf("syscall 0x%x: nothing is registered for it", number)
}

// outcomeBytes holds a result or failure message. One over the limit is not
// copied, only its size kept: whether it is the host's error depends on the
// outcome (a failure wins over a result), known when the call ends.
type outcomeBytes struct {
	b    []byte
	over int
}

func (o *outcomeBytes) set(b []byte, limit int) {
	if len(b) > limit {
		o.b, o.over = nil, len(b)
		return
	}
	o.b, o.over = append(o.b[:0], b...), 0
}
