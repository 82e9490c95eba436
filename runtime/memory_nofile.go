//go:build !(linux && (amd64 || arm64))

package runtime

// Without memory files (macOS, Windows, 32-bit systems) an image is a Go
// slice, copied into each instance's memory.

func imageFile([]byte) (int, []byte, bool) { return -1, nil, false }

func mapImage([]byte, int) bool { return false }

func closeImageFile(int, []byte) {}

func openPagemap() int { return -1 }

func closePagemap(int) {}

func resetPages(int, []byte, int, bool) bool { return false }

func populateOwn(b []byte) bool {
	touchPages(b)
	return true
}

func noHugePages([]byte) {}
