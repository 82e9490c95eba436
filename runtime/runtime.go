package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Defaults of the limits; each can be changed in Options.
const (
	DefaultCallDepth   = 4
	DefaultDeadline    = 30 * time.Second
	DefaultMemoryLimit = 128 << 20
	DefaultMaxArgs     = 1 << 20
	DefaultMaxResult   = 16 << 20
	// DefaultMaxLogLines and DefaultMaxLogBytes bound what berm.log writes in
	// one call: enough to debug by, little enough that a program logging in
	// a loop cannot flood the host's log.
	DefaultMaxLogLines = 1000
	DefaultMaxLogBytes = 1 << 20
	// DefaultMaxImage bounds an image's size wherever one arrives: a file, a
	// registry, a request body.
	DefaultMaxImage = 64 << 20
	// DefaultMaxTableEntries bounds the tables a module defines, together:
	// 8 MiB of 8-byte entries. Go's linker declares one table of a few
	// thousand entries; wasm-ld and AssemblyScript declare tables as small.
	DefaultMaxTableEntries = 1 << 20
)

// PageSize is the size of a WebAssembly memory page.
const PageSize = 64 << 10

// Limits bound every call. A zero field takes its default.
type Limits struct {
	// Deadline bounds a top-level call, nested calls included (they share it).
	Deadline time.Duration
	// Memory bounds each instance's memory, in bytes (rounded down to 64 KiB
	// pages). memory.grow past it returns -1. Each running call, and each
	// call nested in it, has an instance: without TotalMemory, what instances
	// hold together is bounded only by the calls in flight (a server's
	// MaxConcurrent) × (call depth+1) × Memory.
	Memory uint64
	// TotalMemory bounds the memory of all live instances of the runtime
	// together, in bytes; 0 leaves it unbounded. A memory.grow that would pass
	// it returns -1; a call whose instance would pass it is refused with
	// ErrHost before anything runs (its callers may try again later).
	TotalMemory uint64
	// MaxArgs bounds a call's arguments, in bytes.
	MaxArgs int
	// MaxResult bounds a result or failure message, in bytes.
	MaxResult int
	// MaxImage bounds an image at deploy, in bytes.
	MaxImage int
	// MaxLogLines and MaxLogBytes bound the berm.log lines of a top-level
	// call, nested calls included (they share it, as they share the deadline).
	// Lines past either are dropped, and one last line says how many.
	//
	// The bound is per call, not per second: a rate would need a clock on
	// every line and still let a long call write deadline × rate, where a
	// budget per call is the same whatever the program's speed.
	MaxLogLines int
	MaxLogBytes int
}

func (l Limits) withDefaults() Limits {
	if l.Deadline <= 0 {
		l.Deadline = DefaultDeadline
	}
	if l.Memory == 0 {
		l.Memory = DefaultMemoryLimit
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxResult <= 0 {
		l.MaxResult = DefaultMaxResult
	}
	if l.MaxImage <= 0 {
		l.MaxImage = DefaultMaxImage
	}
	if l.MaxLogLines <= 0 {
		l.MaxLogLines = DefaultMaxLogLines
	}
	if l.MaxLogBytes <= 0 {
		l.MaxLogBytes = DefaultMaxLogBytes
	}
	return l
}

// HostModule is a table of functions a program may import from a module other
// than berm (WASI, say). Export adds the functions to the builder.
type HostModule struct {
	Name   string
	Export func(wazero.HostModuleBuilder)
}

// Options configure a Runtime. The zero value (or nil) is a runtime with the
// core syscalls only, default limits and compiled code kept in memory.
type Options struct {
	// CacheDir holds compiled code on disk, content-addressed and shared by
	// every process that names the same directory. Empty keeps it in memory.
	CacheDir string
	Limits   Limits
	// Imports are the host's tables for imports from modules other than berm.
	// Whatever a program imports that they do not provide still links, and
	// traps when called.
	Imports []HostModule
	// ModuleConfig is the base of every instance's configuration (clocks,
	// randomness, stdio for WASI). The runtime makes each instance anonymous
	// and never runs _start, whatever it says.
	ModuleConfig wazero.ModuleConfig
	// Log receives each berm.log line, and the line that says how many were
	// dropped past Limits.MaxLogLines or MaxLogBytes.
	Log func(ctx context.Context, program, tool string, line []byte)
	// HostError receives the error of a host syscall's Func (or its panic)
	// for the host's log. The program and its callers see only that the
	// syscall met a host error: the error may name the host's files.
	HostError func(ctx context.Context, program, tool string, err error)
	// Observer receives compile and instantiate times, for metrics.
	Observer Observer
	// FastDeadlines compiles programs rewritten by transform.Deadline, which
	// tests a stop flag every transform.Period loop headers and calls,
	// rather than wazero's check at every loop header (WithCloseOnContextDone,
	// the plain path, several times slower in a compute loop). Experimental:
	// work that no loop counts (bulk memory, syscalls, nested calls in a
	// loop) runs on past the deadline, and while it does the goroutine
	// cannot be preempted, which stops the process at its next collection.
	FastDeadlines bool
}

// Runtime deploys programs and calls their tools. One wazero runtime
// compiles every program once; each call instantiates it anew.
type Runtime struct {
	// wz compiles what transform.Deadline rewrote, and stops it by the
	// global the rewrite adds; plain compiles modules as they are, and
	// closes them when their context is done. They are one and the same
	// without Options.FastDeadlines; otherwise plain is made when a module
	// the transform does not rewrite first needs it.
	wz           *wazeroRuntime
	plain        *wazeroRuntime
	plainMu      sync.Mutex
	imports      []HostModule
	cacheDir     string
	modConfig    wazero.ModuleConfig
	limits       Limits
	maxDepth     int
	hostSyscalls []Syscall
	hostModules  map[string]*hostModule
	log          func(ctx context.Context, program, tool string, line []byte)
	hostErr      func(ctx context.Context, program, tool string, err error)
	observer     Observer
	budget       memoryBudget
	regions      regionPool

	mu       sync.RWMutex
	programs map[string]*Program
	closed   bool
}

type hostModule struct {
	HostModule
	funcs map[string]api.FunctionDefinition
}

// wazeroRuntime is a wazero runtime with the berm module and the host's
// tables instantiated in it.
type wazeroRuntime struct {
	wazero.Runtime
	config wazero.RuntimeConfig // without the compilation cache
}

// New returns a runtime whose programs may nest berm.call up to maxCallDepth
// (DefaultCallDepth is the ABI's default; 0 refuses every nested call) and may
// declare the given host syscalls on top of the core ones.
func New(ctx context.Context, maxCallDepth int, syscalls []Syscall, opts *Options) (*Runtime, error) {
	if opts == nil {
		opts = &Options{}
	}
	if maxCallDepth < 0 {
		return nil, fmt.Errorf("call depth %d: want 0 or more", maxCallDepth)
	}
	r := &Runtime{
		cacheDir:     opts.CacheDir,
		limits:       opts.Limits.withDefaults(),
		maxDepth:     maxCallDepth,
		hostSyscalls: append([]Syscall(nil), syscalls...),
		hostModules:  map[string]*hostModule{},
		log:          opts.Log,
		hostErr:      opts.HostError,
		observer:     opts.Observer,
		programs:     map[string]*Program{},
	}
	numbers := map[uint64]string{}
	for _, h := range coreHandlers() {
		numbers[Number(h.name)] = h.name
	}
	for _, s := range syscalls {
		if s.Func == nil {
			return nil, fmt.Errorf("syscall %s: no Func", s.Name)
		}
		if other, dup := numbers[Number(s.Name)]; dup {
			return nil, fmt.Errorf("syscall %s: number 0x%x is already %s", s.Name, Number(s.Name), other)
		}
		numbers[Number(s.Name)] = s.Name
	}
	pages := r.limits.Memory / PageSize
	if pages == 0 || pages > 65536 {
		return nil, fmt.Errorf("memory limit %d bytes: want 64 KiB to 4 GiB", r.limits.Memory)
	}
	r.budget.limit = r.limits.TotalMemory
	r.regions.size = pages * PageSize
	r.imports = opts.Imports
	base := opts.ModuleConfig
	if base == nil {
		// wazero seeds a deterministic random source for every instance
		// unless given one, which costs more than the rest of a small call.
		base = wazero.NewModuleConfig().WithRandSource(rand.Reader)
	}
	r.modConfig = base.WithName("").WithStartFunctions()
	wz, err := r.newWazero(ctx, !opts.FastDeadlines)
	if err != nil {
		return nil, err
	}
	r.wz = wz
	if !opts.FastDeadlines {
		r.plain = wz
	}
	return r, nil
}

// newWazero makes a wazero runtime and instantiates in it the berm module
// and the host's tables. closeOnDone is for modules compiled as they are.
func (r *Runtime) newWazero(ctx context.Context, closeOnDone bool) (*wazeroRuntime, error) {
	config := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(closeOnDone).
		WithMemoryLimitPages(uint32(r.limits.Memory / PageSize))
	cfg := config
	if r.cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(r.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	wz := &wazeroRuntime{Runtime: wazero.NewRuntimeWithConfig(ctx, cfg), config: config}
	_, err := wz.NewHostModuleBuilder("berm").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(r.dispatch),
			[]api.ValueType{api.ValueTypeI64, api.ValueTypeI32, api.ValueTypeI32},
			[]api.ValueType{api.ValueTypeI64}).
		WithParameterNames("number", "ptr", "len").
		Export("syscall").
		Instantiate(ctx)
	if err != nil {
		wz.Close(ctx)
		return nil, err
	}
	seen := map[string]bool{}
	for _, hm := range r.imports {
		if err := r.addHostModule(ctx, wz, hm, seen); err != nil {
			wz.Close(ctx)
			return nil, err
		}
	}
	return wz, nil
}

func (r *Runtime) addHostModule(ctx context.Context, wz *wazeroRuntime, hm HostModule, seen map[string]bool) error {
	if hm.Name == "berm" {
		return errors.New("host module berm: that name is the ABI's own")
	}
	if seen[hm.Name] {
		return fmt.Errorf("host module %s: given twice", hm.Name)
	}
	seen[hm.Name] = true
	b := wz.NewHostModuleBuilder(hm.Name)
	hm.Export(b)
	compiled, err := b.Compile(ctx)
	if err != nil {
		return fmt.Errorf("host module %s: %w", hm.Name, err)
	}
	if _, err := wz.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(hm.Name)); err != nil {
		return fmt.Errorf("host module %s: %w", hm.Name, err)
	}
	if r.hostModules[hm.Name] == nil {
		r.hostModules[hm.Name] = &hostModule{HostModule: hm, funcs: compiled.ExportedFunctions()}
	}
	return nil
}

// plainRuntime returns the runtime for modules compiled as they are,
// making it on first use.
func (r *Runtime) plainRuntime(ctx context.Context) (*wazeroRuntime, error) {
	r.plainMu.Lock()
	defer r.plainMu.Unlock()
	if r.plain != nil {
		return r.plain, nil
	}
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	wz, err := r.newWazero(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHost, err)
	}
	r.plain = wz
	return wz, nil
}

// Close closes every program and the wazero runtime; calls in flight end.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.programs = map[string]*Program{}
	r.mu.Unlock()
	err := r.wz.Close(ctx)
	r.plainMu.Lock()
	if r.plain != nil && r.plain != r.wz {
		err = errors.Join(err, r.plain.Close(ctx))
	}
	r.plainMu.Unlock()
	r.regions.close()
	return err
}

// CacheDir is the directory of compiled code, or "" when it is kept in memory.
func (r *Runtime) CacheDir() string { return r.cacheDir }

// Limits returns the limits in force.
func (r *Runtime) Limits() Limits { return r.limits }

// MaxCallDepth returns the call depth limit in force.
func (r *Runtime) MaxCallDepth() int { return r.maxDepth }

// Syscalls lists the syscall table programs are linked against: the core
// syscalls, then the host's, each with its number.
func (r *Runtime) Syscalls() []SyscallInfo {
	var out []SyscallInfo
	for _, h := range coreHandlers() {
		out = append(out, SyscallInfo{Name: h.name, Number: Number(h.name), Core: true})
	}
	for _, s := range r.hostSyscalls {
		out = append(out, SyscallInfo{Name: s.Name, Number: Number(s.Name)})
	}
	return out
}

// Program is a deployed program: a compiled module under a name.
type Program struct {
	Name     string
	Digest   string // sha256:<64 hex> of the image
	Size     int    // of the image, in bytes
	Manifest *manifest.Manifest
	// Grants are what the deployment lets it reach beyond the ABI.
	Grants sandbox.Grants

	compiled  wazero.CompiledModule
	minMemory uint64 // bytes of memory an instance starts with
	table     map[uint64]handler
	resolver  experimental.ImportResolver
	linked    []api.Module // per-program import modules, closed with it
	// config is every instance's configuration: the grants' arguments,
	// mounts and environment (but what is read from the host per call).
	config  wazero.ModuleConfig
	mounts  []io.Closer // the granted directories, closed with it
	hostEnv bool        // an environment variable is read at each call
	wasi    bool        // it imports WASI: its stdout and stderr are logged

	wz *wazeroRuntime // the one that compiled it
	// stop and start are the exports transform.Deadline added, when it
	// rewrote the module: the stop global, and the start function.
	stop, start string

	inflight  atomic.Int64
	retired   atomic.Bool
	closeOnce sync.Once
}

// Deploy checks an image, compiles it (from the cache when it is there) and
// makes it callable under name with grants (nil grants nothing), replacing
// what was there. A refused image or grant changes nothing.
func (r *Runtime) Deploy(ctx context.Context, name string, image []byte, grants *sandbox.Grants) (*Program, error) {
	p, err := r.Prepare(ctx, name, image, grants)
	if err != nil {
		return nil, err
	}
	if err := r.Install(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Install makes a program that Prepare returned callable under its name,
// replacing what was there; calls in flight on the old one finish first.
// Deploy is Prepare then Install; a caller that must decide between the two
// (whether the compiled program is still wanted) calls them apart.
func (r *Runtime) Install(p *Program) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		p.close()
		return ErrClosed
	}
	old := r.programs[p.Name]
	r.programs[p.Name] = p
	r.mu.Unlock()
	if old != nil && old != p {
		old.retire()
	}
	return nil
}

// Prepare does all of Deploy but making the program callable: it checks the
// image against the ABI and this host and the grants (opening the granted
// directories), and compiles it (so that the compiled code lands in the
// cache). Close the program when done with it.
func (r *Runtime) Prepare(ctx context.Context, name string, image []byte, grants *sandbox.Grants) (*Program, error) {
	if err := manifest.CheckProgramName(name); err != nil {
		return nil, err
	}
	if len(image) > r.limits.MaxImage {
		return nil, fmt.Errorf("image of %d bytes is over the limit of %d bytes: %w", len(image), r.limits.MaxImage, ErrRefused)
	}
	m, err := manifest.Read(image)
	if err != nil {
		return nil, err
	}
	if err := r.Check(name, m); err != nil {
		return nil, err
	}
	if err := grants.Check(); err != nil {
		return nil, err
	}
	compiled, wz, stoppable, err := r.compile(ctx, image)
	if err != nil {
		return nil, err
	}
	p := &Program{
		Name:      name,
		Digest:    manifest.Digest(image),
		Size:      len(image),
		Manifest:  m,
		compiled:  compiled,
		wz:        wz,
		stop:      stoppable.Stop,
		start:     stoppable.Start,
		minMemory: m.MemoryPages * PageSize,
		table:     r.table(m),
	}
	if err := r.link(ctx, p); err != nil {
		p.close()
		return nil, err
	}
	if err := r.sandbox(p, grants); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// Check refuses what this host will not run under name: served tool names over
// 64 characters, a minimum memory over the limit, tables whose minimum or
// maximum is over DefaultMaxTableEntries (or whose bounds are, together), and
// imports of memories, tables or globals, which no host table provides.
func (r *Runtime) Check(name string, m *manifest.Manifest) error {
	if err := manifest.CheckProgramName(name); err != nil {
		return err
	}
	if err := m.CheckServedNames(name); err != nil {
		return err
	}
	if limit := r.limits.Memory / PageSize; m.MemoryPages > limit {
		return fmt.Errorf("memory: the module needs at least %d pages (%d MiB), over the limit of %d pages (%d MiB): %w",
			m.MemoryPages, m.MemoryPages*PageSize>>20, limit, limit*PageSize>>20, ErrRefused)
	}
	// Each table is counted at its maximum, or its minimum without one.
	var entries uint64
	for i, t := range m.Tables {
		bound, what := t.Min, "minimum"
		if t.Max != nil && *t.Max > bound {
			bound, what = *t.Max, "maximum"
		}
		if bound > DefaultMaxTableEntries {
			return fmt.Errorf("table %d: a %s of %d entries, over the limit of %d: %w",
				i, what, bound, DefaultMaxTableEntries, ErrRefused)
		}
		if entries += bound; entries > DefaultMaxTableEntries {
			return fmt.Errorf("tables 0 to %d: %d entries together, over the limit of %d: %w",
				i, entries, DefaultMaxTableEntries, ErrRefused)
		}
	}
	for _, imp := range m.Imports {
		if imp.Module != "berm" && imp.Kind != manifest.KindFunc {
			return fmt.Errorf("import %s.%s: this host provides no %s to import: %w", imp.Module, imp.Name, imp.Kind, ErrRefused)
		}
	}
	return nil
}

// table links the core syscalls and the declared host syscalls.
func (r *Runtime) table(m *manifest.Manifest) map[uint64]handler {
	t := make(map[uint64]handler, 8+len(m.Syscalls))
	for _, h := range coreHandlers() {
		t[Number(h.name)] = h
	}
	for _, s := range r.hostSyscalls {
		if m.Declares(s.Name) {
			t[Number(s.Name)] = hostHandler(s)
		}
	}
	return t
}

// UnknownSyscalls lists the syscalls a manifest declares that this host does
// not have: calls to them will trap.
func (r *Runtime) UnknownSyscalls(m *manifest.Manifest) []string {
	known := map[string]bool{}
	for _, s := range r.Syscalls() {
		known[s.Name] = true
	}
	var out []string
	for _, s := range m.Syscalls {
		if !known[s] {
			out = append(out, s)
		}
	}
	return out
}

// Remove undeploys name; calls in flight finish first. It reports whether
// anything was deployed under name.
func (r *Runtime) Remove(name string) bool {
	r.mu.Lock()
	p := r.programs[name]
	delete(r.programs, name)
	r.mu.Unlock()
	if p != nil {
		p.retire()
	}
	return p != nil
}

// Program returns the program deployed under name, or nil.
func (r *Runtime) Program(name string) *Program {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.programs[name]
}

// Programs lists the deployed programs by name.
func (r *Runtime) Programs() []*Program {
	r.mu.RLock()
	out := make([]*Program, 0, len(r.programs))
	for _, p := range r.programs {
		out = append(out, p)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *Runtime) acquire(name string) (*Program, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, ErrClosed
	}
	p := r.programs[name]
	if p == nil {
		return nil, ErrNoProgram
	}
	p.inflight.Add(1)
	return p, nil
}

func (p *Program) release() {
	if p.inflight.Add(-1) == 0 && p.retired.Load() {
		p.closeOnce.Do(p.close)
	}
}

// retire closes the program once no call holds it.
func (p *Program) retire() {
	p.retired.Store(true)
	if p.inflight.Load() == 0 {
		p.closeOnce.Do(p.close)
	}
}

// Close releases a program that Prepare returned and that was never deployed.
func (p *Program) Close() { p.retire() }

func (p *Program) close() {
	ctx := context.Background()
	for _, m := range p.linked {
		m.Close(ctx)
	}
	for _, m := range p.mounts {
		m.Close()
	}
	p.compiled.Close(ctx)
}

// Outcome is the program's own outcome of a call (the inner level): its
// result, or its failure.
type Outcome struct {
	// Result is what the program last gave berm.result; empty when it never
	// called it, and when it failed.
	Result []byte
	// Failed is set when the program called berm.fail; a failure wins over a
	// result.
	Failed bool
	// Failure is the message of the program's last berm.fail.
	Failure []byte
}

type callKey struct{}

// Call runs a program's tool with args, a JSON object. The error is the
// host's (ErrNoProgram, ErrNoTool, ErrArguments, ErrTrap, ErrDeadline,
// ErrLimit); the Outcome is the program's result or failure.
func (r *Runtime) Call(ctx context.Context, program, tool string, args []byte) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, r.limits.Deadline)
	defer cancel()
	return r.call(ctx, program, tool, args, nil)
}

// call runs a top-level call (caller nil) or one nested in caller's.
func (r *Runtime) call(ctx context.Context, program, tool string, args []byte, caller *Call) (Outcome, error) {
	p, err := r.acquire(program)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), err)
	}
	defer p.release()
	t := p.Manifest.Tool(tool)
	if t == nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), ErrNoTool)
	}
	if len(args) > r.limits.MaxArgs {
		// The caller's error (ErrArguments), and a size limit (ErrLimit).
		return Outcome{}, fmt.Errorf("%s: %w: %w: %d bytes, limit %d bytes",
			manifest.FullName(program, tool), ErrArguments, ErrLimit, len(args), r.limits.MaxArgs)
	}
	if err := t.Validate(args); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", manifest.FullName(program, tool), err)
	}
	full := manifest.FullName(program, tool)
	c := &Call{rt: r, program: p, tool: tool, args: args}
	if caller != nil {
		c.depth, c.logs = caller.depth+1, caller.logs
	} else {
		c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
		c.logs = &c.ownLogs
		defer r.logDropped(ctx, c)
	}
	if !c.mem.prepay(r, p.minMemory) {
		return Outcome{}, fmt.Errorf("%s: %w: memory: %d KiB more would pass the limit of %d KiB on all instances together",
			full, ErrHost, p.minMemory>>10, r.limits.TotalMemory>>10)
	}
	err = r.run(ctx, c, t)
	c.mem.release()
	if err != nil {
		return Outcome{}, r.hostError(ctx, full, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A nested call ran out of the shared deadline and this one returned
		// before wazero noticed: it meets the same deadline.
		return Outcome{}, r.deadlineError(full)
	}
	final, what := c.result, "result"
	if c.failed {
		final, what = c.failure, "failure message"
	}
	if final.over > 0 {
		return Outcome{}, fmt.Errorf("%s: %w: %s of %d bytes, limit %d bytes",
			full, ErrLimit, what, final.over, r.limits.MaxResult)
	}
	if c.failed {
		return Outcome{Failed: true, Failure: final.b}, nil
	}
	return Outcome{Result: final.b}, nil
}

// run instantiates the program anew, runs _initialize when exported, then the
// tool, and closes the instance.
func (r *Runtime) run(ctx context.Context, c *Call, t *manifest.Tool) (err error) {
	ctx = context.WithValue(ctx, callKey{}, c)
	ctx = experimental.WithMemoryAllocator(ctx, &c.mem)
	if c.program.resolver != nil {
		ctx = experimental.WithImportResolver(ctx, c.program.resolver)
	}
	var start time.Time
	if r.observer.Instantiate != nil {
		start = time.Now()
	}
	mod, err := c.program.wz.InstantiateModule(ctx, c.program.compiled, c.program.instanceConfig(ctx, c))
	defer c.flushOutput()
	if err != nil {
		return err
	}
	defer mod.Close(context.Background())
	if c.program.stop != "" {
		// Stop the instance when the call's context is done. The nested
		// calls share the context: each of their instances is stopped too.
		//
		// Set writes the global from the timer's goroutine while compiled
		// code reads it in another: one aligned 8-byte store, seen at the
		// next test of it. The race detector cannot see the compiled
		// code's reads, and the global outlives the instance, so a Set
		// after the call ended writes to nothing anyone reads.
		stop := mod.ExportedGlobal(c.program.stop).(api.MutableGlobal)
		defer context.AfterFunc(ctx, func() { stop.Set(1) })()
		if c.program.start != "" {
			if _, err := mod.ExportedFunction(c.program.start).Call(ctx); err != nil {
				return fmt.Errorf("start function: %w", err)
			}
		}
	}
	if c.program.Manifest.Initialize {
		c.initializing = true
		if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
			return fmt.Errorf("_initialize: %w", err)
		}
		c.initializing = false
	}
	if r.observer.Instantiate != nil {
		r.observer.Instantiate(c.program.Name, time.Since(start))
	}
	_, err = mod.ExportedFunction(manifest.ToolExportPrefix + t.Name).Call(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		return nil // WASI proc_exit(0): the program ended, its outcome set
	}
	return err
}

// hostError turns what wazero returned into the host's error.
func (r *Runtime) hostError(ctx context.Context, full string, err error) error {
	var exit *sys.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return r.deadlineError(full)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		return r.deadlineError(full)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled,
		errors.Is(ctx.Err(), context.Canceled): // stopped by transform.Deadline's global
		return fmt.Errorf("%s: canceled: %w", full, context.Canceled)
	case errors.As(err, &exit):
		return fmt.Errorf("%s: %w: it exited with code %d", full, ErrTrap, exit.ExitCode())
	}
	// The message without wazero's stack trace, the chain as it was: a
	// syscall's host error stays ErrHost too.
	return fmt.Errorf("%s: %w: %w", full, ErrTrap, &trimmed{firstLine(err), err})
}

// logDropped ends a top-level call's log with the number of lines dropped
// past the limits, if any were.
func (r *Runtime) logDropped(ctx context.Context, c *Call) {
	if r.hostErr != nil && c.logs.hostDropped > 0 {
		r.hostErr(ctx, c.program.Name, c.tool, fmt.Errorf("%d more host errors in this call not reported (limit %d per call)",
			c.logs.hostDropped, MaxHostErrors))
	}
	if r.log == nil || c.logs.dropped == 0 {
		return
	}
	r.log(ctx, c.program.Name, c.tool, fmt.Appendf(nil, "berm: %d log lines dropped (limit %d lines, %d bytes per call)",
		c.logs.dropped, r.limits.MaxLogLines, r.limits.MaxLogBytes))
}

// MaxHostErrors bounds the host errors of one top-level call handed to
// Options.HostError: a program retrying a failing berm.set in a loop would
// otherwise write the operator's log as fast as it loops.
const MaxHostErrors = 10

// hostFailed hands a host syscall's error to the embedder's log, up to
// MaxHostErrors a call.
func (r *Runtime) hostFailed(ctx context.Context, c *Call, err error) {
	if r.hostErr == nil {
		return
	}
	if c.logs.hostErrors >= MaxHostErrors {
		c.logs.hostDropped++
		return
	}
	c.logs.hostErrors++
	r.hostErr(ctx, c.program.Name, c.tool, err)
}

func (r *Runtime) deadlineError(full string) error {
	return fmt.Errorf("%s: %w: the call and its nested calls ran past %s", full, ErrDeadline, r.limits.Deadline)
}

// nested runs berm.call for caller c. Every refusal (undeclared target, depth,
// no such program or tool, bad arguments, trap, deadline) is staged with bits
// 63 and 62; the callee's failure with bit 63.
func (r *Runtime) nested(ctx context.Context, c *Call, program, tool string, args []byte) uint64 {
	full := manifest.FullName(program, tool)
	if !c.program.Manifest.MayCall(program, tool) {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: not declared in the manifest's calls", full))
	}
	if c.depth+1 > r.maxDepth {
		return c.Refuse(fmt.Sprintf("berm.call %s: refused: call depth %d exceeds the limit of %d", full, c.depth+1, r.maxDepth))
	}
	out, err := r.call(ctx, program, tool, args, c)
	switch {
	case err != nil:
		return c.Refuse("berm.call " + err.Error())
	case out.Failed:
		return c.StageError(out.Failure)
	}
	return c.Stage(out.Result)
}
