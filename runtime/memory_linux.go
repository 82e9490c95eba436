//go:build linux && (amd64 || arm64)

package runtime

import (
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
// private: what an instance writes is its own copy of the page.
func mapImage(dst []byte, fd int) bool {
	_, err := unix.MmapPtr(fd, 0, unsafe.Pointer(unsafe.SliceData(dst)), uintptr(len(dst)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	return err == nil
}

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

// restorePages puts dst back to img (its first bytes) and zeros (the rest)
// where a call changed it, reading which pages it changed from the page map
// (fd): over a private mapping of the image, a page written is anonymous,
// its own copy, where one only read is still the file's; past the image,
// a page never touched is not there at all. Those pages are copied back in
// place: cheaper than mapping the image again, which costs its unmapping
// and then a fault at every page the next call touches. False when the page
// map cannot be read.
func restorePages(fd int, dst, img []byte) bool {
	const (
		present = 1 << 63
		swapped = 1 << 62
		file    = 1 << 61
	)
	page := unix.Getpagesize()
	if len(dst)%page != 0 || len(img)%page != 0 {
		return false
	}
	var entries [512]uint64
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), len(entries)*8)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(dst)))
	pages := len(dst) / page
	for first := 0; first < pages; first += len(entries) {
		n := min(len(entries), pages-first)
		off := int64(base/uintptr(page)+uintptr(first)) * 8
		if got, err := unix.Pread(fd, buf[:n*8], off); err != nil || got != n*8 {
			return false
		}
		for i, e := range entries[:n] {
			at := (first + i) * page
			p := dst[at : at+page]
			switch {
			case at < len(img):
				if e&swapped != 0 || e&(present|file) == present {
					copy(p, img[at:at+page])
				}
			case e&(present|swapped) != 0 && !allZero(p):
				clear(p)
			}
		}
	}
	return true
}
