//go:build linux && (amd64 || arm64)

package runtime

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// imageFile puts b in a sealed memory file, written only where b is not zero
// (the holes read as zeros and hold no memory), and returns the file and a
// read-only view of it; ok is false when the system refuses any of it.
func imageFile(b []byte) (fd int, view []byte, ok bool) {
	fd, err := unix.MemfdCreate("berm-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, false
	}
	fail := func() (int, []byte, bool) {
		unix.Close(fd)
		return -1, nil, false
	}
	if err := unix.Ftruncate(fd, int64(len(b))); err != nil {
		return fail()
	}
	const page = 4 << 10
	for at := 0; at < len(b); {
		// Each run of pages that are not all zeros, in one write.
		for at < len(b) && allZero(b[at:min(at+page, len(b))]) {
			at += page
		}
		end := at
		for end < len(b) && !allZero(b[end:min(end+page, len(b))]) {
			end += page
		}
		end = min(end, len(b))
		for at < end {
			n, err := unix.Pwrite(fd, b[at:end], int64(at))
			if err != nil || n == 0 {
				return fail()
			}
			at += n
		}
	}
	// Sealed, the file can no longer change under the instances that map
	// it, whatever else holds it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail()
	}
	if len(b) == 0 {
		return fd, nil, true
	}
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(len(b)), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fail()
	}
	return fd, unsafe.Slice((*byte)(p), len(b)), true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// mapImage maps the image file over dst, whose length is the file's,
// private, with every page present and still the file's: what an instance
// writes is its own copy of the page, made at its first write. An instance
// thus starts with all its image in place whatever others did, and a reset
// brings back the same (resetPages).
func mapImage(dst []byte, fd int) bool {
	_, err := unix.MmapPtr(fd, 0, unsafe.Pointer(unsafe.SliceData(dst)), uintptr(len(dst)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	noHugePages(dst)
	return err == nil && populate(dst)
}

// noHugePages keeps b in pages of 4 KiB. With transparent huge pages
// "always" (the default of some distributions), one fault would make 2 MiB
// present at once: which pages are present would then depend on what
// earlier instances touched, which the resets make a new instance's page by
// page (a later call could time it), and their drops of a few pages would
// split huge ones.
func noHugePages(b []byte) { _ = unix.Madvise(b, unix.MADV_NOHUGEPAGE) }

// populate maps b's pages, a private mapping of a file, as the file's,
// read-only: without copying them, as MAP_POPULATE would on a writable
// mapping. Before Linux 5.14 it reads a byte of each page instead.
func populate(b []byte) bool {
	return populateBy(b, unix.MADV_POPULATE_READ, func(b []byte) {
		page := unix.Getpagesize()
		var sum byte
		for at := 0; at < len(b); at += page {
			sum += b[at]
		}
		populated.Store(uint32(sum))
	})
}

// populateOwn makes b's pages, anonymous and writable, present and the
// process's own, as a write to each makes them, in one system call where it
// can (Linux 5.14); a read would map the shared zero page instead, which a
// later write still faults to replace.
func populateOwn(b []byte) bool {
	return populateBy(b, unix.MADV_POPULATE_WRITE, touchPages)
}

// populateBy gives b the advice MADV_POPULATE_READ or _WRITE, or, on a
// system that does not know it (before Linux 5.14), touches b's pages with
// fallback as the advice would.
func populateBy(b []byte, advice int, fallback func([]byte)) bool {
	if len(b) == 0 {
		return true
	}
	if err := unix.Madvise(b, advice); err == nil {
		return true
	} else if err != unix.EINVAL {
		return false
	}
	fallback(b)
	return true
}

// populated keeps populate's reads from being optimised away.
var populated atomic.Uint32

func closeImageFile(fd int, view []byte) {
	unmap(view)
	unix.Close(fd)
}

// openPagemap opens the process's page map, or returns -1.
func openPagemap() int {
	fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func closePagemap(fd int) { unix.Close(fd) }

// mergeGap is the most pages in place between two runs that resetPages
// puts back in one, with them.
const mergeGap = 16

// resetPages brings dst, an instance's memory, back to where a new
// instance's starts, page for page, reading from the page map (fd) which
// pages the call changed; the first n bytes are the image, mapped from its
// file when mapped, else copied in (by the caller). Not only the bytes: what
// is resident and what is the instance's own must be as in a new instance
// too, or a later call could time its reads and writes page by page and
// learn which pages earlier calls touched; and an idle instance must hold
// no memory of its own but a copied image. So, as in a new instance:
//   - a mapped image's pages are all present and the file's, read-only (a
//     write copies the page): each run of pages a call wrote (anonymous, its
//     own) or that went missing is dropped and mapped from the file again;
//   - past the image no page is present: each run the call touched is
//     dropped, and reads as zeros when touched again.
//
// False when the page map cannot be read or the system refuses.
func resetPages(fd int, dst []byte, n int, mapped bool) bool {
	const (
		present = 1 << 63
		swapped = 1 << 62
		file    = 1 << 61
	)
	page := unix.Getpagesize()
	if len(dst)%page != 0 || n%page != 0 || n > len(dst) {
		return false
	}
	var entries [512]uint64
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), len(entries)*8)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
	pages := len(dst) / page
	imagePages := n / page
	// The runs to drop, and of them those to map from the file again, are
	// advised all at once at the end: two system calls, not two a run.
	var dropsAt, fillsAt [64]unix.Iovec
	drops, fills := dropsAt[:0], fillsAt[:0]
	// run is the run of pages to put back not yet noted: [from, to).
	from, to := 0, 0
	flush := func() bool {
		if from == to {
			return true
		}
		v := unix.Iovec{Base: &dst[from*page]}
		v.SetLen((to - from) * page)
		drops = append(drops, v)
		if mapped && from < imagePages {
			fills = append(fills, v)
		}
		from, to = 0, 0
		return true
	}
	for first, count := 0, 0; first < pages; first += count {
		count = min(len(entries), pages-first)
		// A run never crosses the image's end: one side is mapped again,
		// the other only dropped.
		if imagePages > first && imagePages < first+count {
			count = imagePages - first
		}
		off := int64(base/uintptr(page)+uintptr(first)) * 8
		if got, err := unix.Pread(fd, buf[:count*8], off); err != nil || got != count*8 {
			return false
		}
		for i, e := range entries[:count] {
			at := first + i
			var stale bool
			switch {
			case at >= imagePages:
				stale = e&(present|swapped) != 0
			case mapped:
				stale = e&(present|file) != present|file
			}
			if !stale {
				continue
			}
			// A short gap of pages in place joins two runs: putting back a
			// page already as it should be costs less than a system call.
			if to == from || at-to > mergeGap {
				if !flush() {
					return false
				}
				from = at
			}
			to = at + 1
		}
		if first+count == imagePages && !flush() {
			return false
		}
	}
	flush()
	// Dropped, a page of the image's mapping that the instance wrote is the
	// file's again, and an anonymous one is absent until touched, then zero.
	return advise(drops, unix.MADV_DONTNEED) && advise(fills, unix.MADV_POPULATE_READ)
}

// advise gives advice on the ranges runs in one system call where it can
// (process_madvise on the process itself, Linux 6.13), one a range where
// not.
func advise(runs []unix.Iovec, advice int) bool {
	if len(runs) == 0 {
		return true
	}
	want := 0
	for _, v := range runs {
		want += int(v.Len)
	}
	if fd := selfPidfd(); fd >= 0 && len(runs) <= 1024 { // UIO_MAXIOV
		got, _, errno := unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(fd),
			uintptr(unsafe.Pointer(&runs[0])), uintptr(len(runs)), uintptr(advice), 0, 0)
		if errno == 0 && int(got) == want {
			return true
		}
	}
	for _, v := range runs {
		b := unsafe.Slice(v.Base, v.Len)
		ok := false
		switch advice {
		case unix.MADV_POPULATE_READ:
			ok = populate(b)
		default:
			ok = unix.Madvise(b, advice) == nil
		}
		if !ok {
			return false
		}
	}
	return true
}

// selfPidfd is a descriptor of the process itself, for process_madvise,
// opened once; -1 where there is none.
var selfPidfd = sync.OnceValue(func() int {
	fd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		return -1
	}
	return fd
})
