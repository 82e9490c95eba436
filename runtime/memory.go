package runtime

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// An instance's memory lives in a region reserved at the memory limit and
// made accessible as it grows (memory_mmap.go), so growing never copies and
// the process holds only the pages a program touched. wazero's default
// appends to a Go slice: each grow past its capacity copies the whole memory,
// and the old copies wait for the collector (a program growing a page at a
// time to 128 MiB peaked at over 500 MiB). Where regions cannot be reserved,
// memory is a Go slice as in wazero's default, still counted against
// Limits.TotalMemory.

// memoryBudget counts the memory of a runtime's live instances against
// Limits.TotalMemory.
type memoryBudget struct {
	limit uint64 // 0: unbounded, and nothing is counted
	used  atomic.Uint64
}

func (b *memoryBudget) take(n uint64) bool {
	if b.limit == 0 || n == 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.limit || used+n < used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *memoryBudget) give(n uint64) {
	if b.limit != 0 && n != 0 {
		b.used.Add(-n)
	}
}

// callMemory is the allocator of one call's instance. Its memory is released
// by the call once the instance has stopped, not by wazero's Free: wazero
// frees on Close, which a Runtime.Close or a deadline can do from another
// goroutine while the program still runs on this one, and unmapping memory
// under running code would crash the process. Releasing at the end of the
// call also covers an instantiation that fails after allocating.
type callMemory struct {
	rt    *Runtime
	image *memoryImage // what the first memory starts as, or nil: zeros
	first linearMemory
	more  []*linearMemory // a second memory, which wazero 1.x never makes
}

// prepay takes the instance's minimum from the budget before instantiating:
// wazero cannot fail the first allocation (it indexes what it gets), so a
// full budget must be found before it starts.
func (m *callMemory) prepay(rt *Runtime, n uint64) bool {
	m.rt = rt
	if !rt.budget.take(n) {
		return false
	}
	m.first.charged = n
	return true
}

// Allocate implements experimental.MemoryAllocator.
func (m *callMemory) Allocate(_, _ uint64) experimental.LinearMemory {
	l := &m.first
	if l.budget != nil {
		l = &linearMemory{}
		m.more = append(m.more, l)
	}
	l.budget = &m.rt.budget
	l.region = m.rt.regions.get()
	if l == &m.first {
		l.image = m.image
	}
	return l
}

// release gives back what the call's instance held; the instance has stopped.
func (m *callMemory) release() {
	if m.rt == nil {
		return
	}
	m.first.release(m.rt)
	for _, l := range m.more {
		l.release(m.rt)
	}
}

// linearMemory implements experimental.LinearMemory over a region, or over a
// Go slice where no region could be had.
type linearMemory struct {
	budget  *memoryBudget
	charged uint64 // bytes taken from budget
	region  *region
	buf     []byte
	image   *memoryImage // laid over the first allocation
	settled bool         // its pages past the image present and its own (settle)
}

// Reallocate implements experimental.LinearMemory. nil fails the grow, which
// the program sees as memory.grow returning -1.
func (l *linearMemory) Reallocate(size uint64) []byte {
	first := l.buf == nil
	if size > l.charged {
		// The first allocation cannot fail (see prepay); it is prepaid, so
		// this is only a safeguard.
		if !l.budget.take(size-l.charged) && !first {
			return nil
		}
		l.charged = size
	}
	if l.region != nil {
		var b []byte
		if first && l.image != nil {
			b = l.region.start(l.image, size)
		} else {
			b = l.region.commit(size)
		}
		if b != nil {
			l.buf = b
			return b
		}
		if !first {
			return nil
		}
		// The system refused to commit the first pages: fall back to the heap.
		l.region.free()
		l.region = nil
	}
	if first && l.image != nil {
		// The image may reach past the first size, up to the memory the
		// instance is grown to before it runs: it is held in the capacity.
		l.buf = make([]byte, size, max(size, uint64(len(l.image.data))))
		copy(l.buf[:cap(l.buf)], l.image.data)
		return l.buf
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
	} else {
		l.buf = append(l.buf, make([]byte, size-uint64(len(l.buf)))...)
	}
	if l.buf == nil {
		l.buf = []byte{}
	}
	return l.buf
}

// reset puts the memory back as it was allocated: img (nil: nothing) over
// its first bytes and zeros after, its length unchanged; false when it
// cannot. In a region, not only the bytes but which pages are present and
// which are the instance's own are put back as a new instance has them,
// whatever the call touched (resetPages): a mapped image all present and
// the file's, a copied one copied again; past the image, nothing, or all
// of it present, cleared in place, where settle made it so.
func (l *linearMemory) reset(rt *Runtime, img *memoryImage) bool {
	var data []byte
	if img != nil {
		data = img.data
	}
	n := uint64(len(data))
	size := uint64(len(l.buf))
	if n > size {
		return false
	}
	if l.region == nil {
		copy(l.buf, data)
		clear(l.buf[n:])
		return true
	}
	mapped := l.region.mapped
	if !mapped {
		copy(l.buf, data)
	}
	end := size // of what resetPages puts back
	if l.settled {
		clear(l.buf[n:])
		end = n
	}
	if (!mapped && end == n) || rt.regions.resetPages(l.buf[:end], int(n), mapped) {
		return true
	}
	// Without the page map: the whole image mapped again, fresh pages past it.
	if mapped && !mapImage(l.region.mem[:n], img.fd) {
		return false
	}
	return end == n || freshPages(l.buf[n:end])
}

// settle readies a pooled instance's memory, as new, for its resets: when
// what is past the image is at most settleTail bytes, it is made present
// and the instance's own, zeros written, and each reset clears it in place,
// which costs less than the system calls that drop its pages and the faults
// that bring them back (a Go program's stack and heap past its image, or
// all of a small memory). A new instance is then as a reset one, every page
// past the image present and written. A larger tail is left absent, and so
// is it put back (resetPages): it would stay resident in idle instances.
func (l *linearMemory) settle(img *memoryImage) {
	n := 0
	if img != nil {
		n = len(img.data)
	}
	if l.region == nil || n > len(l.buf) || len(l.buf)-n > settleTail {
		return
	}
	clear(l.buf[n:]) // zeros already, as the image ends: the pages are touched
	l.settled = true
}

// settleTail is the most memory past its image a pooled instance keeps
// present (settle).
const settleTail = 256 << 10

// Free implements experimental.LinearMemory: nothing, see callMemory.
func (l *linearMemory) Free() {}

func (l *linearMemory) release(rt *Runtime) {
	rt.budget.give(l.charged)
	if l.region != nil {
		rt.regions.put(l.region)
	}
	*l = linearMemory{}
}

// Regions are kept for reuse: reserving, committing and unmapping cost
// system calls, and fresh pages cost faults, on every call; without reuse a
// tiny call took three times as long.
const (
	// maxFreeRegions bounds the regions kept, beyond which a released one is
	// unmapped.
	maxFreeRegions = 16
)

// regionPool reserves regions of one size, the memory limit, and keeps a few
// released ones. A region comes back with no page present, as a new one: a
// page cleared in place would stay resident, outside Limits.TotalMemory, and
// tell the next instance, by the time a read of it takes, that an earlier
// one touched it.
type regionPool struct {
	size   uint64
	mu     sync.Mutex
	free   []*region
	closed bool
	// holders are the pools of idle instances (pool.go), whose regions
	// are closed with the runtime's even where their programs are not.
	holders map[*instancePool]struct{}
	// pagemap tells a reset which pages a call touched and wrote
	// (resetPages): the process's page map, opened at the first reset; -1
	// where it cannot be.
	// close does not close it under a reset that reads it (pagemapMu).
	pagemapOnce sync.Once
	pagemapMu   sync.RWMutex
	pagemap     int
}

// resetPages is resetPages with the page map; false without one.
func (p *regionPool) resetPages(dst []byte, n int, mapped bool) bool {
	p.pagemapOnce.Do(func() {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		p.pagemap = -1
		if !closed {
			p.pagemap = openPagemap()
		}
	})
	p.pagemapMu.RLock()
	defer p.pagemapMu.RUnlock()
	return p.pagemap >= 0 && resetPages(p.pagemap, dst, n, mapped)
}

// hold notes that ip keeps regions in its idle instances.
func (p *regionPool) hold(ip *instancePool) {
	p.mu.Lock()
	closed := p.closed
	if !closed {
		if p.holders == nil {
			p.holders = map[*instancePool]struct{}{}
		}
		p.holders[ip] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		ip.close()
	}
}

// release forgets ip, closed.
func (p *regionPool) release(ip *instancePool) {
	p.mu.Lock()
	delete(p.holders, ip)
	p.mu.Unlock()
}

// get returns a region, or nil where none can be reserved.
func (p *regionPool) get() *region {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		r := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return r
	}
	p.mu.Unlock()
	return reserveRegion(p.size)
}

// put takes back a region an instance had.
func (p *regionPool) put(r *region) {
	p.mu.Lock()
	full := p.closed || len(p.free) >= maxFreeRegions
	p.mu.Unlock()
	if full || !r.reset() {
		r.free()
		return
	}
	p.mu.Lock()
	if p.closed || len(p.free) >= maxFreeRegions {
		p.mu.Unlock()
		r.free()
		return
	}
	p.free = append(p.free, r)
	p.mu.Unlock()
}

// close unmaps the kept regions; those still in use are unmapped when put.
func (p *regionPool) close() {
	p.mu.Lock()
	free := p.free
	holders := p.holders
	p.free, p.closed, p.holders = nil, true, nil
	p.mu.Unlock()
	for _, r := range free {
		r.free()
	}
	for ip := range holders {
		ip.close()
	}
	p.pagemapOnce.Do(func() { p.pagemap = -1 })
	p.pagemapMu.Lock()
	if p.pagemap >= 0 {
		closePagemap(p.pagemap)
		p.pagemap = -1
	}
	p.pagemapMu.Unlock()
}

// region is an address range reserved at the memory limit, whose first rw
// bytes are readable and writable and the rest inaccessible. The program
// reaches only its memory's length; the rest is never touched.
type region struct {
	mem    []byte
	rw     uint64
	mapped bool // an image file is mapped over its start, copy-on-write
}

// commit makes the first size bytes accessible and returns them, or nil.
func (r *region) commit(size uint64) []byte {
	if size > uint64(len(r.mem)) {
		return nil
	}
	if size > r.rw {
		if !protect(r.mem[r.rw:size]) {
			return nil
		}
		r.rw = size
	}
	return r.mem[:size:size]
}

// start makes the first size bytes accessible, holding img, and returns
// them, or nil. A large image with a file is mapped copy-on-write, every
// page present from the start and the file's, shared by the program's
// instances: the instance costs only a copy of each page it writes. A small
// one is copied, cheaper than the system calls of a mapping; so is any
// image where files cannot be mapped.
func (r *region) start(img *memoryImage, size uint64) []byte {
	n := uint64(len(img.data))
	if n > uint64(len(r.mem)) {
		return nil
	}
	if img.fd >= 0 && n >= mapImageFrom {
		if !mapImage(r.mem[:n], img.fd) {
			return nil
		}
		r.mapped, r.rw = true, max(r.rw, n)
		return r.commit(size)
	}
	if r.commit(max(size, n)) == nil {
		return nil
	}
	copy(r.mem, img.data)
	return r.mem[:size:size]
}

// mapImageFrom is the size from which an image is mapped rather than copied.
const mapImageFrom = 256 << 10

// reset replaces what was committed with fresh, inaccessible pages, which
// read as zeros once committed again.
func (r *region) reset() bool {
	if r.rw == 0 {
		return true
	}
	if !remap(r.mem[:r.rw]) {
		return false
	}
	r.rw, r.mapped = 0, false
	return true
}

func (r *region) free() {
	unmap(r.mem)
	r.mem, r.rw = nil, 0
}
