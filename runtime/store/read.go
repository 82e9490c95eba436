package store

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Bounds of what the store reads back: a file in the root that is larger,
// or not a regular file at all (a FIFO, a device, a symbolic link to
// /dev/zero), is damaged, not read. Without them one planted file could
// exhaust memory or block every listing forever.
const (
	maxRecord = 64 << 10
	maxEntry  = 4 + MaxKey + MaxValue
)

// errNotRegular: the path names something other than a regular file.
var errNotRegular = errors.New("not a regular file")

// readBounded reads the regular file at path, refusing (ErrDamaged) one over
// max bytes or of another kind. A missing file is fs.ErrNotExist as usual.
func readBounded(path string, max int64) ([]byte, error) {
	// Stat first so that a FIFO is never opened: opening one blocks until a
	// writer comes.
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %w", errNotRegular, ErrDamaged)
	}
	if info.Size() > max {
		return nil, fmt.Errorf("%d bytes, over the %d this file may hold: %w", info.Size(), max, ErrDamaged)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Checked again on what was opened: the path may have changed since.
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %w", errNotRegular, ErrDamaged)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("over the %d bytes this file may hold: %w", max, ErrDamaged)
	}
	return b, nil
}
