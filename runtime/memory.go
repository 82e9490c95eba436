package runtime

import (
	"os"
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
	// held is the budget taken for what the instance holds beside its
	// memory (Program.held), given back with the memory's.
	held uint64
}

// charge splits the budget a call took for its instance between the first
// memory and held, the part of it that is the instance's beside.
func (m *callMemory) charge(charge, held uint64) {
	m.held = min(charge, held)
	m.first.charged = charge - m.held
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
	m.rt.budget.give(m.held)
	m.held = 0
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
		// The first allocation cannot fail (wazero indexes what it gets):
		// the call took the instance's minimum before it began (call.go),
		// so this is only a safeguard.
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
// the file's, a copied one copied again; past the image, the region's kept
// prefix (keptPrefix) present and cleared in place, and past that nothing,
// or all of it present, cleared in place, where settle made it so.
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
	// keep is where the pages cleared in place end: past it, resetPages
	// drops every page the call touched. A mapped image covers the whole
	// kept prefix (mapImageFrom), so keep is then n, or size when settled.
	keep := max(n, min(keptPrefix, size))
	if l.settled {
		keep = size
	}
	clear(l.buf[n:keep])
	if !l.region.mapped {
		copy(l.buf, data)
		if keep == size || rt.regions.resetPages(l.buf[keep:], 0, false) {
			return true
		}
		return freshPages(l.buf[keep:]) // without the page map
	}
	end := size // of what resetPages puts back
	if l.settled {
		end = n
	}
	if rt.regions.resetPages(l.buf[:end], int(n), true) {
		return true
	}
	// Without the page map: the whole image mapped again, fresh pages past it.
	if !mapImage(l.region.mem[:n], img.fd) {
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
		// What the instance could have written: its memory, and a copied
		// image, which an instantiation that failed before the instance
		// was grown to it leaves past its length.
		used := uint64(len(l.buf))
		if l.image != nil && !l.region.mapped {
			used = max(used, uint64(len(l.image.data)))
		}
		rt.regions.put(l.region, used)
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
// released ones. Every region it hands out is in the one state a new one is
// made in (region.prime), whatever instances had it before: its kept prefix
// present, the process's own and zero, and nothing past it present or
// accessible. Otherwise the next instance could tell, by the time a read or
// a grow takes, which pages an earlier one touched; and a page cleared in
// place past the prefix would stay resident, outside Limits.TotalMemory.
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
	r := reserveRegion(p.size)
	if r != nil && !r.prime() {
		r.free()
		return nil
	}
	return r
}

// put takes back a region whose first used bytes an instance could write.
func (p *regionPool) put(r *region, used uint64) {
	p.mu.Lock()
	full := p.closed || len(p.free) >= maxFreeRegions
	p.mu.Unlock()
	if full || !r.reset(used) {
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

// mapImageFrom is the size from which an image is mapped rather than copied:
// below it, a copy costs less than the faults of a mapping. A mapped image
// covers the whole kept prefix, which linearMemory.reset relies on.
const mapImageFrom = 256 << 10

// A mapped image must cover the kept prefix.
var _ = [mapImageFrom - keptPrefix]struct{}{}

// keptPrefix is the most of a region's start kept present, accessible and
// the process's own between the instances that have it (region.prime): all
// of a small memory (echo's 64 KiB) and the start of any other, where a new
// instance's data and stack are. A new instance then starts with no system
// call and no fault there, and a released region is cleared in place, only
// as far as its instance reached. Every region kept holds it, outside
// Limits.TotalMemory: at most maxFreeRegions of them, 1 MiB. So does every
// region in use, which is why it is no larger: 1,000 calls in flight held
// 280 MB with a prefix of 256 KiB.
const keptPrefix = 64 << 10

// prefix is the region's kept prefix: keptPrefix or, in a smaller region,
// all of it.
func (r *region) prefix() uint64 { return min(keptPrefix, uint64(len(r.mem))) }

// prime brings a region just reserved to the state every region is handed
// out in: its prefix accessible, present, its own and zero, the rest
// inaccessible with no page present.
func (r *region) prime() bool {
	p := r.prefix()
	return r.commit(p) != nil && populateOwn(r.mem[:p])
}

// reset brings a region back to the state prime made it in, its first used
// bytes (at most) written by the instance that had it: they are cleared in
// place as far as the prefix reaches, and everything past the prefix made
// inaccessible again with fresh pages, none present. The prefix under a
// mapped image is the file's: it is replaced with fresh pages of its own,
// populated again. Which pages are present, whose, and how far the region is
// accessible thus never depend on what the instance did.
func (r *region) reset(used uint64) bool {
	p := r.prefix()
	if r.mapped {
		if !freshPages(r.mem[:p]) || !populateOwn(r.mem[:p]) {
			return false
		}
		r.mapped = false
	} else {
		clear(r.mem[:min(used, p)])
	}
	if r.rw > p {
		if !remap(r.mem[p:r.rw]) {
			return false
		}
		r.rw = p
	}
	return true
}

func (r *region) free() {
	unmap(r.mem)
	r.mem, r.rw = nil, 0
}

// touchPages writes a zero to each page of b, zeros already, which makes
// them present and the process's own.
func touchPages(b []byte) {
	page := os.Getpagesize()
	for at := 0; at < len(b); at += page {
		b[at] = 0
	}
}
