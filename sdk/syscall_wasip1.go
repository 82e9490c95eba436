//go:build wasip1

package berm

import "unsafe"

// hostSyscall is the one function a program imports from the host:
// (import "berm" "syscall" (func (param i64 i32 i32) (result i64))).
//
//go:wasmimport berm syscall
//go:noescape
func hostSyscall(number uint64, ptr unsafe.Pointer, n uint32) uint64
