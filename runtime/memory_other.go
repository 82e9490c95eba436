//go:build !((linux || darwin) && (amd64 || arm64))

package runtime

// Elsewhere (Windows, 32-bit systems) no region is reserved: instance memory
// is a Go slice that grows by copying, as in wazero's default.

func reserveRegion(uint64) *region { return nil }

func protect([]byte) bool { return false }

func remap([]byte) bool { return false }

func freshPages([]byte) bool { return false }

func unmap([]byte) {}
