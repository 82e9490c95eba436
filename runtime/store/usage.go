package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/berm-dev/berm/manifest"
)

// DataUsage is what program's data is charged against MaxDataBytes, in bytes,
// as Set counts it: each file in whole blocks, temporary files included; 0
// when it has none. It reads the count this process keeps, and scans the
// directory only when that count no longer holds (another process wrote
// since, or this one never counted): otherwise it costs the lock file's lock,
// a read of its token and a stat, and a writer of the program waits that
// long.
func (s *Store) DataUsage(program string) (int64, error) {
	if err := manifest.CheckProgramName(program); err != nil {
		return 0, err
	}
	u := s.usage(program)
	u.hold()
	defer u.unlock()
	dir := s.dataPath(program)
	l, err := lockData(context.Background(), dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("data of %s: %w", program, err)
	}
	defer l.unlock()
	if err := u.count(l, dir); err != nil {
		return 0, fmt.Errorf("data of %s: %w", program, err)
	}
	return u.bytes, nil
}
