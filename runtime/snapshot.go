package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/runtime/transform"
)

// Calls start warm. Each call still gets a new instance (so no WASI state,
// table or host state can pass from one call to the next), but its memory
// starts as a copy-on-write mapping of an image made once per program, so
// instantiation copies nothing; and for a reactor the image is a snapshot
// taken after _initialize ran once, at Prepare, so calls skip it, as ABI.md
// allows ("The image").
//
// The module compiled for this (transform.Snapshot) has its mutable globals
// exported, so that the host can read them after _initialize and set them in
// each new instance, and its active data segments taken out, so that
// instantiation leaves memory zero where the image goes. The program's
// identity stays the digest of the image as deployed.
//
// The snapshot is taken only when memory and the mutable globals are all an
// instance holds: not for a module with a start function (it runs inside each
// instantiation, before the host can set anything), nor one that writes its
// tables or drops segments, nor a deployment that reads an environment
// variable at each call or asks for _initialize at each call
// (sandbox.Grants.InitEachCall). Those start from the image of their data
// segments alone. Options.Plain turns all of it off.

// warmStart is what derive found a program's instances can start from.
type warmStart struct {
	data []byte // memory as the data segments leave it, trailing zero pages cut
	transform.Restorable
}

// derive returns the module to compile for image and, when its instances can
// start from an image, what they start from. It is the one place a module
// is rewritten for instantiation: a module that cannot start warm has its
// data segments merged instead (coalesce.go).
func (r *Runtime) derive(image []byte) ([]byte, *warmStart) {
	if r.plainOnly {
		return coalesceData(image), nil
	}
	data, ok := dataImage(image)
	if !ok {
		return coalesceData(image), nil
	}
	rs, err := transform.Snapshot(image)
	if err != nil {
		return coalesceData(image), nil
	}
	module := rs.Module
	rs.Module = nil
	return module, &warmStart{data: data, Restorable: rs}
}

// dataImage returns memory as a module's active data segments leave it,
// without its trailing zero pages, when every one of them has a constant
// offset and fits the memory's initial size; otherwise (an offset from a
// global, a segment that fails instantiation) false, and instantiation
// applies them as it always has.
func dataImage(module []byte) (_ []byte, ok bool) {
	// A bug here must cost a program its speed, not its deploy.
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	md, ok := parseDataSection(module)
	if !ok {
		return nil, false
	}
	var end uint64
	for i := range md.segments {
		s := &md.segments[i]
		switch s.kind {
		case segPassive:
			continue
		case segOther:
			return nil, false
		}
		top := uint64(s.off) + s.len()
		if top > md.memoryBytes {
			return nil, false
		}
		if s.len() > 0 {
			end = max(end, top)
		}
	}
	mem := make([]byte, end)
	for i := range md.segments {
		// In order: a later segment overwrites an earlier one, as
		// instantiation would.
		if s := &md.segments[i]; s.kind == segConst {
			copy(mem[s.off:], module[s.init:s.end])
		}
	}
	return trimImage(mem), true
}

// trimImage cuts b's trailing zero pages and rounds it up to whole pages.
func trimImage(b []byte) []byte {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	end = (end + PageSize - 1) / PageSize * PageSize
	if end <= len(b) {
		return b[:end]
	}
	return append(b, make([]byte, end-len(b))...)
}

// memoryImage is what an instance's memory starts as.
type memoryImage struct {
	data []byte // read-only: a view of the file fd, or a Go slice without one
	fd   int    // -1 without a file
}

// newMemoryImage puts b (whole pages) where instances can map it: a memory
// file where the system has them, b itself otherwise.
func newMemoryImage(b []byte) *memoryImage {
	if len(b) >= mapImageFrom {
		if fd, view, ok := imageFile(b); ok {
			return &memoryImage{data: view, fd: fd}
		}
	}
	return &memoryImage{data: b, fd: -1}
}

func (m *memoryImage) close() {
	if m != nil && m.fd >= 0 {
		closeImageFile(m.fd, m.data)
		m.fd, m.data = -1, nil
	}
}

// warm gives p's instances their image: the snapshot after _initialize
// when it can be taken (see above), else the data segments'.
func (r *Runtime) warm(ctx context.Context, p *Program, w *warmStart) {
	p.image = newMemoryImage(w.data)
	p.globals = w.Globals
	why := ""
	switch {
	case !p.Manifest.Initialize:
		return
	case w.Start:
		why = "the module has a start function"
	case w.Blocker != "":
		why = w.Blocker
	case p.hostEnv:
		why = "the deployment reads an environment variable at each call"
	case p.Grants.InitEachCall:
		why = "the deployment asks for it"
	}
	if why == "" {
		err := r.snapshot(ctx, p, w.Globals)
		if err == nil {
			return
		}
		r.logHost(ctx, p, fmt.Sprintf("berm: _initialize at deploy: %v; it runs at each call instead", err))
	}
}

// snapshot runs _initialize in an instance of p under its deployment's
// configuration and deadline, then makes what it left p's image: memory
// and the values of globals. On success calls skip _initialize.
func (r *Runtime) snapshot(ctx context.Context, p *Program, globals []transform.Global) error {
	ctx, cancel := context.WithTimeout(ctx, r.limits.Deadline)
	defer cancel()
	c := &Call{rt: r, program: p, tool: "_initialize"}
	c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
	c.logs = &c.ownLogs
	defer r.logDropped(ctx, c)
	if !r.budget.take(p.minMemory) {
		return fmt.Errorf("%w: memory: the limit on all instances together is reached", ErrHost)
	}
	var (
		image  []byte
		size   uint64
		values []uint64
	)
	ctx = context.WithValue(ctx, callKey{}, c)
	inst, err := r.newInstance(ctx, c, p.minMemory)
	if err == nil {
		err = func() error {
			mod := inst.mod
			mem := mod.Memory()
			b, ok := mem.Read(0, mem.Size())
			if !ok {
				return errors.New("memory: cannot be read whole")
			}
			// Pages past the image are zeros in the instances too, grown to
			// the same size.
			image = trimImage(append([]byte(nil), b...))
			size = uint64(mem.Size())
			values = make([]uint64, len(globals))
			for i, g := range globals {
				eg := mod.ExportedGlobal(g.Name)
				if eg == nil {
					return fmt.Errorf("global %s: not exported", g.Name)
				}
				values[i] = eg.Get()
			}
			return nil
		}()
		inst.unbind(c)
		inst.close()
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: it ran past %s", ErrDeadline, r.limits.Deadline)
		}
		return fmt.Errorf("%w: %w", ErrTrap, &trimmed{firstLine(err), err})
	}
	p.image.close()
	p.image = newMemoryImage(image)
	p.memBytes = size
	p.minMemory = max(p.minMemory, size)
	p.globals, p.values = globals, values
	p.snapshotted = true
	return nil
}

// restore makes a new instance of p what the snapshot was: its memory's
// size (the image is already in place) and its mutable globals.
func (p *Program) restore(mod api.Module) error {
	mem := mod.Memory()
	if have := uint64(mem.Size()); have < p.memBytes {
		if _, ok := mem.Grow(uint32((p.memBytes - have) / PageSize)); !ok {
			return fmt.Errorf("%w: memory: cannot grow to the snapshot's %d pages", ErrHost, p.memBytes/PageSize)
		}
	}
	for i, g := range p.globals {
		mod.ExportedGlobal(g.Name).(api.MutableGlobal).Set(p.values[i])
	}
	return nil
}

// logHost writes a line of the host's about p to the log.
func (r *Runtime) logHost(ctx context.Context, p *Program, line string) {
	if r.log != nil {
		r.log(ctx, p.Name, "_initialize", []byte(line))
	}
}
