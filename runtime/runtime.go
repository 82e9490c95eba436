package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/internal/transform"
)

// Defaults of the limits; each can be changed in Config.
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

// Bounds on what a module makes each instance build, beside its memory and
// its tables' entries: wazero builds every table, global, element entry and
// segment anew in each instance, and looks at no context meanwhile. The
// image's size does not bound them: 4 MB holds an element segment of 4
// million entries, which cost every instance 0.5 s and 360 MB. At each
// bound a new instance costs a few milliseconds and MiB (wazero 1.12: about
// 96 bytes and 0.15 µs an element entry, 120 bytes and 0.3 µs a global, 32
// bytes and 0.04 µs a data segment), counted against Limits.TotalMemory
// (instanceHeld). Each is many times what real programs declare: a Go
// program of 9 MB has 4,769 functions and as many element entries, 8
// globals, 84,512 data segments (which berm merges into a few before it
// compiles), 21 imports and one table; Rust and C ones have fewer.
const (
	// DefaultMaxFunctions bounds the functions a module defines, which
	// cost no instance but take compiling: 262,144 empty functions (1.3 MB
	// of image) take 1.5 s and 130 MB to deploy, where a million took 18 s
	// and 500 MB.
	DefaultMaxFunctions = 1 << 18
	// DefaultMaxImports bounds the functions a module imports: berm links
	// one for each that no host table provides, at deploy.
	DefaultMaxImports = 1 << 10
	// DefaultMaxTables bounds the tables a module defines (wasm-ld, Go,
	// Rust declare one).
	DefaultMaxTables = 1 << 10
	// DefaultMaxGlobals bounds the globals a module defines.
	DefaultMaxGlobals = 1 << 14
	// DefaultMaxElements bounds the entries of a module's element segments
	// and the segments themselves, together: wazero evaluates each entry,
	// active, passive or declared, in every instance.
	DefaultMaxElements = 1 << 16
	// DefaultMaxDataSegments bounds a module's data segments, and
	// DefaultMaxApartData those left after berm merges them (coalesce.go,
	// snapshot.go), which each instance holds: Go's linker writes tens of
	// thousands, merged into a few; a module may keep them apart (a data
	// count section), and wazero applies each in every instance.
	DefaultMaxDataSegments = 1 << 20
	DefaultMaxApartData    = 1 << 16
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

// Config configures a Runtime: its one configuration value, as wazero's
// RuntimeConfig is. The zero value is a runtime with the core syscalls only,
// the ABI's call depth, default limits and compiled code kept in memory.
type Config struct {
	// MaxCallDepth bounds how deep programs may nest berm.call:
	// DefaultCallDepth (the ABI's) when 0, and none at all (every nested
	// call refused) with NoNestedCalls.
	MaxCallDepth int
	// Syscalls are the host's syscalls, which programs may declare on top
	// of the core ones.
	Syscalls []Syscall
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
	// and never runs _start, whatever it says; and its WASI sleep real and
	// its randomness crypto/rand's, both ended when the call's context is
	// done (one random_get may ask for all of memory). An instance may serve
	// several calls (pool.go), so its clocks must hold no state of their
	// own: wazero's default, a fake clock, would carry on from one call to
	// the next. Give real ones, as host.ModuleConfig and the nil default do.
	ModuleConfig wazero.ModuleConfig
	// Log receives each berm.log line, and the line that says how many were
	// dropped past Limits.MaxLogLines or MaxLogBytes.
	Log func(ctx context.Context, program, tool string, line []byte)
	// SnapshotRefused receives why a program's _initialize is not
	// snapshotted (Program.Warm's answer), once, at its first call: for the
	// operator, not for the program's callers, who see only its own lines.
	SnapshotRefused func(ctx context.Context, program, why string)
	// HostError receives the error of a host syscall's Func (or its panic)
	// for the host's log. The program and its callers see only that the
	// syscall met a host error: the error may name the host's files.
	HostError func(ctx context.Context, program, tool string, err error)
	// Observer receives compile and instantiate times, for metrics.
	Observer Observer
	// Plain runs every program as it came, on wazero alone: wazero's own
	// check of the deadline at every loop header (several times slower in a
	// compute loop) rather than transform.Deadline's count, _initialize at
	// every call, memory filled by instantiation. It is the reference the
	// fast paths are tested against (BERM_PLAIN=1 in berm and in the
	// runtime's tests), and the way round a fault of theirs.
	Plain bool
}

// Runtime deploys programs and calls their tools. One wazero runtime
// compiles every program once; each call instantiates it anew.
type Runtime struct {
	// wz compiles what transform.Deadline rewrote, whose ticks stop it at
	// its deadline; plain compiles modules as they are, and closes them when
	// their context is done. They are one and the same with Config.Plain;
	// otherwise plain is made when a module the transform does not rewrite
	// first needs it.
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
	refused      func(ctx context.Context, program, why string)
	observer     Observer
	budget       memoryBudget
	regions      regionPool
	plainOnly    bool // Config.Plain

	mu       sync.RWMutex
	programs map[string]*Program
	closed   bool
	// closing is set by Close before it closes wazero: the calls still
	// running trap at their next tick or host call (checkRunning), and
	// return ErrClosed.
	closing atomic.Bool
	// running counts the calls in r.call, nested ones included, for Close
	// to wait on.
	running atomic.Int64
	// compiling counts the compiles under way, some perhaps abandoned by
	// a caller whose context ended (compileUnder); closeLater is Close's
	// closing of wazero, left to the last of them.
	compileMu     sync.Mutex
	compiling     int
	compileClosed bool // by Close
	closeLater    func()
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

// NoNestedCalls is the MaxCallDepth that refuses every nested berm.call: a
// depth of 0 is Config's zero value, which takes the ABI's default.
const NoNestedCalls = -1

// New returns a runtime configured by cfg.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	opts := &cfg
	maxCallDepth, syscalls := cfg.MaxCallDepth, cfg.Syscalls
	switch {
	case maxCallDepth == 0:
		maxCallDepth = DefaultCallDepth
	case maxCallDepth == NoNestedCalls:
		maxCallDepth = 0
	case maxCallDepth < 0:
		return nil, fmt.Errorf("call depth %d: want 0 or more, or NoNestedCalls", maxCallDepth)
	}
	r := &Runtime{
		cacheDir:     opts.CacheDir,
		limits:       opts.Limits.withDefaults(),
		maxDepth:     maxCallDepth,
		hostSyscalls: append([]Syscall(nil), syscalls...),
		hostModules:  map[string]*hostModule{},
		log:          opts.Log,
		hostErr:      opts.HostError,
		refused:      opts.SnapshotRefused,
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
		// wazero seeds a deterministic random source, and makes fake
		// clocks, for every instance unless given real ones, which costs
		// more than the rest of a small call.
		base = wazero.NewModuleConfig().WithRandSource(rand.Reader).WithSysWalltime().WithSysNanotime()
	}
	r.modConfig = base.WithName("").WithStartFunctions()
	r.plainOnly = opts.Plain
	fast := !opts.Plain
	wz, err := r.newWazero(ctx, !fast)
	if err != nil {
		return nil, err
	}
	r.wz = wz
	if !fast {
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
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(r.tick), nil, nil).
		Export(transform.TickName).
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
	compiled, err := b.Compile(r.listen(ctx, hm.Name))
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

// tick is the function transform.Deadline has a rewritten program call every
// transform.Period turns. ctx is the call's: once it is done, or the runtime
// is closing, the program traps (hostError tells the deadline from a cancel
// by ctx). Otherwise the goroutine yields, so that a program in a loop,
// which compiled code cannot preempt, holds up neither the scheduler nor a
// collection's stop of the world for more than a tick's period.
func (r *Runtime) tick(ctx context.Context, _ []uint64) {
	r.checkRunning(ctx)
	goruntime.Gosched()
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

// Close closes every program and the wazero runtime; calls in flight end,
// with ErrClosed.
func (r *Runtime) Close(ctx context.Context) error {
	r.closing.Store(true)
	r.mu.Lock()
	r.closed = true
	programs := r.programs
	r.programs = map[string]*Program{}
	r.mu.Unlock()
	// Each closes when its last call ends: its memory image, pool and
	// granted directories are the process's, not wazero's.
	for _, p := range programs {
		p.retire()
	}
	// The calls still running end at their next tick, syscall or host
	// function, seeing closing: wazero's Close under one inside a WASI
	// function would free what that function reads. Only a plain-path
	// guest spinning without host calls needs wazero's Close to end, after
	// the wait.
	for wait := time.Now().Add(closeWait); r.running.Load() > 0 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	r.compileMu.Lock()
	r.compileClosed = true
	if r.compiling > 0 {
		// A compile its caller abandoned (a deploy at a SIGTERM) runs on:
		// wazero's Close under it would crash it, and waiting for it
		// would hold up the exit. The last to end closes wazero.
		r.closeLater = func() { r.closeWazero(context.WithoutCancel(ctx)) }
		r.compileMu.Unlock()
		return nil
	}
	r.compileMu.Unlock()
	return r.closeWazero(ctx)
}

// closeWazero closes the runtime's wazero runtimes, and then the memory
// their instances had.
func (r *Runtime) closeWazero(ctx context.Context) error {
	err := r.wz.Close(ctx)
	r.plainMu.Lock()
	if r.plain != nil && r.plain != r.wz {
		err = errors.Join(err, r.plain.Close(ctx))
	}
	r.plainMu.Unlock()
	r.regions.close()
	return err
}

// closeWait bounds how long Close waits for the calls still running.
const closeWait = 500 * time.Millisecond

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

// Check refuses what this host will not run under name: served tool names over
// 64 characters, a minimum memory over the limit, tables whose minimum or
// maximum is over DefaultMaxTableEntries (or whose bounds are, together),
// more functions, imports, tables, globals, element entries or data segments
// than their bounds (DefaultMaxFunctions and the others), and imports of
// memories, tables or globals, which no host table provides.
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
	var entries uint64
	for i, t := range m.Tables {
		bound, what := tableBound(t)
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
	return checkCounts(m)
}

// checkCounts holds a module to the bounds on what each instance builds.
// Each refusal names the part, its count, the bound and why it is one.
func checkCounts(m *manifest.Manifest) error {
	const anew = "every instance makes each anew"
	c := m.Counts
	imports := funcImports(m)
	switch elements := c.ElementEntries + c.ElementSegments; {
	case c.Functions > DefaultMaxFunctions:
		return fmt.Errorf("functions: the module defines %d, over the limit of %d (each takes compiling at deploy): %w",
			c.Functions, DefaultMaxFunctions, ErrRefused)
	case imports > DefaultMaxImports:
		return fmt.Errorf("imports: the module imports %d functions, over the limit of %d (each is linked at deploy and resolved in every instance): %w",
			imports, DefaultMaxImports, ErrRefused)
	case uint64(len(m.Tables)) > DefaultMaxTables:
		return fmt.Errorf("tables: the module defines %d, over the limit of %d (%s): %w", len(m.Tables), DefaultMaxTables, anew, ErrRefused)
	case c.Globals > DefaultMaxGlobals:
		return fmt.Errorf("globals: the module defines %d, over the limit of %d (%s): %w", c.Globals, DefaultMaxGlobals, anew, ErrRefused)
	case elements > DefaultMaxElements:
		segments := fmt.Sprintf("%d segments", c.ElementSegments)
		if c.ElementSegments == 1 {
			segments = "one segment"
		}
		return fmt.Errorf("element segments: %d entries in %s, over the limit of %d entries and segments together (%s): %w",
			c.ElementEntries, segments, DefaultMaxElements, anew, ErrRefused)
	case c.DataSegments > DefaultMaxDataSegments:
		return fmt.Errorf("data segments: the module has %d, over the limit of %d (every instance applies each that berm cannot merge): %w",
			c.DataSegments, DefaultMaxDataSegments, ErrRefused)
	}
	return nil
}

// checkApart holds the data segments of module, m's image as berm compiles
// it, to DefaultMaxApartData: those it could not merge, each of which
// every instance applies anew.
func checkApart(m *manifest.Manifest, module []byte) error {
	if n := dataSegments(module, m.Counts.DataSegments); n > DefaultMaxApartData {
		return fmt.Errorf("data segments: %d left apart after berm merged what it could (a data count section, data segments named in a name section or offsets from globals keep them apart), over the limit of %d (every instance applies each anew): %w",
			n, DefaultMaxApartData, ErrRefused)
	}
	return nil
}

// tableBound is what a table counts for: its maximum, or its minimum
// without one (a maximum under the minimum is wazero's to refuse).
func tableBound(t manifest.Table) (uint64, string) {
	if t.Max != nil && *t.Max > t.Min {
		return *t.Max, "maximum"
	}
	return t.Min, "minimum"
}

// funcImports counts the functions m imports.
func funcImports(m *manifest.Manifest) uint64 {
	var n uint64
	for _, imp := range m.Imports {
		if imp.Kind == manifest.KindFunc {
			n++
		}
	}
	return n
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
