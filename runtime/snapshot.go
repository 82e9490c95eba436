package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/runtime/internal/transform"
)

// Calls start warm. Each call still gets a new instance (so no WASI state,
// table or host state can pass from one call to the next), but its memory
// starts as a copy-on-write mapping of an image made once per program, so
// instantiation copies nothing; and for a reactor the image is a snapshot
// taken after _initialize ran once, so calls skip it, as ABI.md allows ("The
// image"). The snapshot is taken in each process that serves the program, at
// its first call (Program.Warm), not at Prepare: berm serve prepares its
// programs one after another at start, and one whose _initialize is slow
// would hold up all the others; this way it delays only its own first call.
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
// segments alone. Config.Plain turns all of it off.

// Bounds on what a program's image may cost the host, which holds it for
// as long as the program lives, whatever its calls do.
const (
	// snapshotDeadline bounds the snapshot's run of _initialize, below the
	// call deadline when that is shorter. A Go program's runtime init takes
	// about 2 ms (the examples: 1.5 to 2.7 ms, instantiation included), so
	// a second is hundreds of times what a program needs; and the calls
	// that arrive while it runs wait for it, for this long at most, not a
	// whole call deadline (30 s). A program that takes longer runs
	// _initialize at each call instead, as it would with the opt-out.
	snapshotDeadline = time.Second
	// maxImageHeld bounds the bytes a program's memory image holds: all of
	// it, zero pages too, since every instance maps every page of it and a
	// memory file's holes fill as they are read. The Go examples' snapshots
	// are 3.4 to 3.8 MB, the C ones 4 to 8 KiB; 16 MiB is 4 times the
	// largest, room for a Go program several times their size, and keeps
	// what a tiny image can make the host hold (one that fills 128 MiB in
	// _initialize, or a segment at its top) to that. A program past it starts from
	// its data segments alone (and past it with those, from none), and its
	// _initialize runs at each call, where its memory counts against
	// Limits.TotalMemory like any instance's.
	maxImageHeld = 16 << 20
)

// warmStart is what derive found a program's instances can start from,
// and the run of its snapshot (Program.Warm).
type warmStart struct {
	image *memoryImage // memory as the data segments leave it, charged
	transform.Restorable

	// start starts the snapshot once; done is closed when it has ended,
	// refused then why it was refused.
	start   sync.Once
	done    chan struct{}
	refused string
}

// derive returns the module to compile for image and, when its instances can
// start from an image, what they start from, its image charged to the
// budget. It is the one place a module is rewritten for instantiation: a
// module that cannot start warm has its data segments merged instead
// (coalesce.go), and so does one whose segments make an image over
// maxImageHeld or past what the budget can take.
func (r *Runtime) derive(image []byte) ([]byte, *warmStart) {
	if r.plainOnly {
		return coalesceData(image), nil
	}
	data, ok := dataImage(image)
	if !ok || len(data) > maxImageHeld {
		return coalesceData(image), nil
	}
	rs, err := transform.Snapshot(image)
	if err != nil {
		return coalesceData(image), nil
	}
	img, err := r.newMemoryImage(data, true)
	if err != nil {
		return coalesceData(image), nil
	}
	module := rs.Module
	rs.Module = nil
	return module, &warmStart{image: img, Restorable: rs, done: make(chan struct{})}
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
	mem := make([]byte, (end+PageSize-1)/PageSize*PageSize)
	for i := range md.segments {
		// In order: a later segment overwrites an earlier one, as
		// instantiation would.
		if s := &md.segments[i]; s.kind == segConst {
			copy(mem[s.off:], module[s.init:s.end])
		}
	}
	return mem[:imageLength(mem)], true
}

// imageLength is the length of b without its trailing zero pages, rounded up
// to whole pages; b's length is whole pages, or b is zeros after it.
func imageLength(b []byte) int {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return (end + PageSize - 1) / PageSize * PageSize
}

// memoryImage is what an instance's memory starts as.
type memoryImage struct {
	data []byte // read-only: a view of the file fd, or a Go slice without one
	fd   int    // -1 without a file
	// held is what the image holds of the host's memory, taken from the
	// runtime's budget until it is closed.
	held   uint64
	budget *memoryBudget
}

// newMemoryImage puts b (whole pages) where instances can map it: a memory
// file where the system has them, else b itself when owned, a copy
// otherwise. What it holds is taken from the budget; an error when that, or
// maxImageHeld, cannot take it.
func (r *Runtime) newMemoryImage(b []byte, owned bool) (*memoryImage, error) {
	img := &memoryImage{fd: -1, budget: &r.budget}
	if len(b) >= mapImageFrom {
		if fd, view, ok := imageFile(b); ok {
			img.data, img.fd = view, fd
		}
	}
	img.held = uint64(len(b))
	if img.fd < 0 {
		if img.held <= maxImageHeld {
			img.data = b
			if !owned {
				img.data = append([]byte(nil), b...)
			}
		}
	}
	err := func() error {
		if img.held > maxImageHeld {
			return fmt.Errorf("the image would hold more than %d MiB, the most an image may", maxImageHeld>>20)
		}
		if !r.budget.take(img.held) {
			return fmt.Errorf("the limit on all instances' memory together (%d KiB) cannot also take the image's %d KiB",
				r.limits.TotalMemory>>10, img.held>>10)
		}
		return nil
	}()
	if err != nil {
		img.held = 0
		img.close()
		return nil, err
	}
	return img, nil
}

func (m *memoryImage) close() {
	if m == nil {
		return
	}
	if m.fd >= 0 {
		closeImageFile(m.fd, m.data)
	}
	m.budget.give(m.held)
	m.fd, m.data, m.held = -1, nil, 0
}

// Warm takes p's snapshot of _initialize, when p has one to take, and
// returns why it refused to, if it did: then _initialize runs at the start
// of each call instead, and the reason says so. The first call of p takes
// it (berm deploy calls Warm itself, to warn); it runs once, whatever the
// number of callers, and a later Warm returns the first's result. Warm
// waits for it to end, which is at most snapshotDeadline after it started
// (and the making of its instance); a call waits for it only within its
// own deadline (Program.warmed). The result is empty when calls start from
// the snapshot, when p has no _initialize, on the plain path
// (Config.Plain), and when the deployment asked for _initialize at each
// call (Grants.InitEachCall, an environment variable read at each call).
func (p *Program) Warm(ctx context.Context) (refused string) {
	w := p.pending
	if w == nil {
		return ""
	}
	w.begin(ctx, p)
	<-w.done
	return w.refused
}

// warmed waits for p's snapshot, starting it if no one has, until it has
// ended or ctx is done, and returns ctx's error then. The snapshot goes on
// without the caller, under its own bound: what one caller gives up on
// (its deadline, its cancel) must not refuse the snapshot for every call
// after, nor may a call wait for it past its own deadline (the first call
// of a program over serve answered 0.2 s past a deadline of 200 ms, berm
// run every time).
func (p *Program) warmed(ctx context.Context) error {
	w := p.pending
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
		return nil
	default:
	}
	w.begin(ctx, p)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin starts p's snapshot once, on a goroutine of its own, under ctx's
// values but not its deadline or cancel; Runtime.Close waits for it as for
// a call.
func (w *warmStart) begin(ctx context.Context, p *Program) {
	w.start.Do(func() {
		p.rt.running.Add(1)
		go func() {
			defer p.rt.running.Add(-1)
			defer close(w.done)
			w.refused = p.rt.warm(context.WithoutCancel(ctx), p)
		}()
	})
}

// warm makes p's image the snapshot after _initialize when it can be taken
// (see above), with a pool of instances; else p keeps its data segments'
// image and runs _initialize at each call, and warm says why.
func (r *Runtime) warm(ctx context.Context, p *Program) string {
	w := p.pending
	switch {
	case w.Start:
		return initEachCall("the module has a start function, which runs before the host could restore a snapshot")
	case w.Blocker != "":
		return initEachCall(w.Blocker)
	}
	// Held like a call, so that a program retired meanwhile closes after.
	p.inflight.Add(1)
	defer p.release()
	if p.retired.Load() {
		return ""
	}
	why := r.snapshot(ctx, p, w.Globals)
	if why != "" {
		// One that Close stopped (berm run's, once its call gave up on
		// it) is nothing the operator can act on: no call comes after.
		if r.refused != nil && !r.closing.Load() {
			r.refused(ctx, p.Name, why)
		}
		return why
	}
	if p.pooled {
		p.pool = &instancePool{regions: &r.regions}
		r.regions.hold(p.pool)
	}
	return ""
}

// initEachCall is why a snapshot was refused, and what follows.
func initEachCall(why string) string {
	return why + "; _initialize runs at each call instead (berm deploy --init-each-call chooses that without this warning)"
}

// snapshot runs _initialize in an instance of p under its deployment's
// configuration and a deadline (snapshotDeadline), then makes what it left
// p's image: memory and the values of globals. On success calls skip
// _initialize; otherwise it returns why not.
func (r *Runtime) snapshot(ctx context.Context, p *Program, globals []transform.Global) string {
	deadline := min(r.limits.Deadline, snapshotDeadline)
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	c := &Call{rt: r, program: p, tool: "_initialize"}
	c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
	c.logs = &c.ownLogs
	defer r.logDropped(ctx, c)
	if !r.budget.take(p.minMemory) {
		return initEachCall("_initialize could not run for a snapshot: memory: the limit on all instances together is reached")
	}
	var (
		image  *memoryImage
		size   uint64
		values []uint64
		why    string
	)
	ctx = context.WithValue(ctx, callKey{}, c)
	inst, err := r.newInstance(ctx, c, p.minMemory)
	if err == nil {
		why = func() string {
			if c.wasiChanged {
				return "_initialize changed what its instance holds outside its memory (a WASI descriptor opened, closed, read or moved), which a snapshot cannot hold: read files in the tool, or embed them in the program (Go's //go:embed)"
			}
			mod := inst.mod
			mem := mod.Memory()
			b, ok := mem.Read(0, mem.Size())
			if !ok {
				return "the snapshot of _initialize: memory cannot be read whole"
			}
			// Pages past the image are zeros in the instances too, grown to
			// the same size. Measured before anything is copied: what an
			// image over the bound would cost is not spent.
			b = b[:imageLength(b)]
			if len(b) > maxImageHeld {
				return fmt.Sprintf("_initialize left more than %d MiB of memory, the most a snapshot may hold (leave less, or build the rest in the tool)",
					maxImageHeld>>20)
			}
			size = uint64(mem.Size())
			values = make([]uint64, len(globals))
			for i, g := range globals {
				eg := mod.ExportedGlobal(g.Name)
				if eg == nil {
					return fmt.Sprintf("the snapshot of _initialize: global %s: not exported", g.Name)
				}
				values[i] = eg.Get()
			}
			img, err := r.newMemoryImage(b, false)
			if err != nil {
				return fmt.Sprintf("the snapshot of _initialize: %v", err)
			}
			image = img
			return ""
		}()
		inst.unbind(c)
		inst.close()
	}
	switch {
	case err == nil && why != "":
		return initEachCall(why)
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && deadline < snapshotDeadline:
		// The call's own deadline cut it (berm run --timeout 1ns), not the
		// snapshot's bound.
		return initEachCall(fmt.Sprintf("_initialize did not finish within %s, the call's deadline, shorter than the %s a snapshot waits at most (give the call more time)", deadline, snapshotDeadline))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return initEachCall(fmt.Sprintf("_initialize did not finish within %s, the most a snapshot waits (make it quicker, or do that work in the tool)", deadline))
	case errors.Is(ctx.Err(), context.Canceled) || r.closing.Load():
		return initEachCall(fmt.Sprintf("the snapshot of _initialize was stopped: %v", firstLine(err)))
	default:
		if msg, trapped := strings.CutPrefix(firstLine(err), "_initialize: "); trapped { // newInstance's
			return fmt.Sprintf("_initialize trapped: %s; _initialize runs at each call instead, where it will likely trap again", msg)
		}
		return initEachCall(fmt.Sprintf("_initialize could not run for a snapshot: %v", firstLine(err)))
	}
	p.image.close()
	p.image = image
	p.memBytes = size
	p.minMemory = max(p.minMemory-p.held, size) + p.held
	p.globals, p.values = globals, values
	p.snapshotted = true
	return ""
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
