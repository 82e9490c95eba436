//go:build !wasip1 && bermdescribe

package berm

import "unsafe"

// berm build's native build, which only describes the registrations, has no
// host, and leaves the FakeHost (and the net/http it needs) out: it links in
// a third of the time.
func hostSyscall(number uint64, ptr unsafe.Pointer, n uint32) uint64 {
	panic("berm: no host: berm build's native build runs no tool")
}
