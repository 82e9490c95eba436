//go:build (linux || darwin) && (amd64 || arm64)

package runtime

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserveRegion reserves size bytes of address space, inaccessible: no
// memory is committed until protect makes pages accessible, and none is
// resident until touched.
func reserveRegion(size uint64) *region {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	mem := unsafe.Slice((*byte)(p), size)
	noHugePages(mem)
	return &region{mem: mem}
}

func protect(b []byte) bool {
	return unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE) == nil
}

// remap replaces b's pages with fresh anonymous ones in one call: zero and
// inaccessible on Linux and macOS alike (macOS's MADV_DONTNEED does not
// promise zeros).
func remap(b []byte) bool {
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)),
		unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
	noHugePages(b) // a new mapping has the default again
	return err == nil
}

// freshPages replaces b's pages with fresh anonymous ones, zero and
// accessible, in one call.
func freshPages(b []byte) bool {
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
	noHugePages(b)
	return err == nil
}

func unmap(b []byte) {
	if len(b) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	}
}
