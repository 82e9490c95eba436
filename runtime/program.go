package runtime

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/internal/transform"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Program is a deployed program: a compiled module under a name.
type Program struct {
	Name     string
	Digest   string // sha256:<64 hex> of the image
	Size     int    // of the image, in bytes
	Manifest *manifest.Manifest
	// Grants are what the deployment lets it reach beyond the ABI.
	Grants sandbox.Grants

	compiled wazero.CompiledModule
	exports  []string // of the tools, in the manifest's order
	// minMemory is what a call takes of Limits.TotalMemory for its
	// instance before it is made (call.go): the bytes of memory it starts
	// with, and held, what it holds beside (instanceHeld).
	minMemory uint64
	held      uint64
	table     map[uint64]handler
	resolver  experimental.ImportResolver
	linked    []api.Module // per-program import modules, closed with it
	// config is every instance's configuration: the grants' arguments,
	// mounts and environment (but what is read from the host per call).
	config  wazero.ModuleConfig
	mounts  []io.Closer // the granted directories, closed with it
	hostEnv bool        // an environment variable is read at each call
	wasi    bool        // it imports WASI: its stdout and stderr are logged

	rt *Runtime
	wz *wazeroRuntime // the one that compiled it

	// image is what every instance's memory starts as (snapshot.go), or
	// nil: instantiation fills it.
	image *memoryImage
	// globals are the mutable globals, exported for the host.
	globals []transform.Global
	// snapshotted: image is memory after _initialize, and the instances
	// skip it; they are grown to memBytes and given the mutable globals'
	// values of then.
	snapshotted bool
	memBytes    uint64
	values      []uint64
	// pool holds idle instances to reset rather than make anew, or is nil
	// when an instance's state cannot all be put back (pool.go) or before
	// the snapshot its instances start from.
	pool *instancePool

	// pending is what Warm snapshots _initialize with, nil when there is
	// nothing to snapshot; pooled is whether the snapshot gets a pool.
	pending *warmStart
	pooled  bool

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
// cache). It does not run _initialize: the program's first call does, or
// Warm. Close the program when done with it.
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
	module, warm := r.derive(image)
	var (
		compiled wazero.CompiledModule
		wz       *wazeroRuntime
	)
	if err = checkApart(m, module); err == nil {
		compiled, wz, err = r.compile(ctx, module)
	}
	if err != nil {
		if warm != nil {
			warm.image.close()
		}
		return nil, err
	}
	held := instanceHeld(m, module)
	p := &Program{
		Name:      name,
		Digest:    manifest.Digest(image),
		Size:      len(image),
		Manifest:  m,
		compiled:  compiled,
		rt:        r,
		wz:        wz,
		minMemory: m.MemoryPages*PageSize + held,
		held:      held,
		table:     r.table(m),
	}
	if warm != nil {
		p.image = warm.image // closed with p from here on
	}
	for _, t := range m.Tools {
		p.exports = append(p.exports, manifest.ToolExportPrefix+t.Name)
	}
	if err := r.sandbox(p, grants); err != nil {
		p.close()
		return nil, err
	}
	if err := r.link(ctx, p); err != nil {
		p.close()
		return nil, err
	}
	if warm != nil {
		p.globals = warm.Globals
		pooled := !warm.Start && warm.Blocker == "" && !p.hostEnv && !p.Grants.InitEachCall && held <= maxIdleHeld
		switch {
		case !m.Initialize:
			if pooled {
				p.pool = &instancePool{regions: &r.regions}
				r.regions.hold(p.pool)
			}
		case !p.hostEnv && !p.Grants.InitEachCall:
			// The snapshot waits for the first call (Warm), so that no
			// program's _initialize holds up another's deploy or start.
			p.pending, p.pooled = warm, pooled
		}
	}
	return p, nil
}

// What wazero 1.12 allocates in each instance for each part of a module
// beside its memory, rounded up from what 100,000 of each allocated per
// instantiation, on both paths (the measure, in bytes, after each).
const (
	tableEntryBytes = 8   // a reference: 8
	tableBytes      = 128 // a table instance: 112
	elementBytes    = 96  // an entry: its reference and the function instance made for it: 93
	segmentBytes    = 32  // an element or data segment's place, its offset's evaluation: 24 to 32
	globalBytes     = 128 // a global instance, the engine's copy, the pool's record: 96 to 120
	importBytes     = 64  // an imported function's entries in the engine: 48
)

// instanceHeld is what an instance of m holds of the host's memory beside
// its linear memory, from what module (the one compiled) makes it build:
// each table at the bound Check counts it at (its maximum, or its minimum
// without one: table.grow takes no budget, so a table grown past its
// minimum holds up to the 8 MiB of the tables' bound uncounted),
// its element entries, globals (the deadline's counter among them), data
// segments left after berm's merge, and imported functions. It is counted
// in whole pages, rounded down, as memory is: under a page it is in the
// noise of what every instance holds anyway and no limit counts (wazero's
// module and engine instances, WASI's context: about 15 KiB). The Go
// examples' instances hold 250 to 280 KiB, counted as 3 or 4 pages; at the
// bounds Check sets an instance could hold about 18 MiB (8 of table
// entries, 6 of element entries, 2 of globals, 2 of data segments).
func instanceHeld(m *manifest.Manifest, module []byte) uint64 {
	var entries uint64
	for _, t := range m.Tables {
		n, _ := tableBound(t)
		entries += n
	}
	c := m.Counts
	segments := c.ElementSegments + dataSegments(module, c.DataSegments)
	n := entries*tableEntryBytes + uint64(len(m.Tables))*tableBytes +
		c.ElementEntries*elementBytes + segments*segmentBytes +
		(c.Globals+1)*globalBytes + funcImports(m)*importBytes
	return n &^ (PageSize - 1)
}

// dataSegments counts the data segments of module, or is otherwise when
// its data section does not read.
func dataSegments(module []byte, otherwise uint64) uint64 {
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return otherwise
		}
		if s.ID == wasmbin.SectionData {
			r := wasmbin.NewReader(s.Payload)
			if n := r.Count(); r.Err() == nil {
				return uint64(n)
			}
			return otherwise
		}
	}
	return 0
}

// tool returns the tool called name and its index in the manifest, or nil.
func (p *Program) tool(name string) (int, *manifest.Tool) {
	for i, t := range p.Manifest.Tools {
		if t.Name == name {
			return i, t
		}
	}
	return -1, nil
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
	if p.pool != nil {
		p.pool.close()
	}
	for _, m := range p.linked {
		m.Close(ctx)
	}
	for _, m := range p.mounts {
		m.Close()
	}
	p.compiled.Close(ctx)
	p.image.close()
}
