package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berm-dev/berm/manifest"
)

// CollectTemp removes the temporary files (.tmp-*) that writes of killed
// processes left in images/sha256, deployments and each program's data, and
// returns how many it removed and their bytes. Only files older than
// olderThan go: a younger one may be another process's write in progress, so
// olderThan must be longer than any write takes (an image of 64 MiB on a slow
// disk: minutes). Errors do not stop it; the first is returned.
func (s *Store) CollectTemp(olderThan time.Duration) (files int, bytes int64, err error) {
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	add := func(n int, b int64, err error) {
		files += n
		bytes += b
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(collectDir(filepath.Join(s.root, imagesDir), cutoff, isTemp))
	add(collectDir(filepath.Join(s.root, deploymentsDir), cutoff, isTemp))
	add(s.collectCache(cutoff))
	entries, err := os.ReadDir(filepath.Join(s.root, dataDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		// IsDir is false for a symbolic link: none is followed out of the
		// root, and only directories a program could have are looked in.
		switch {
		case e.IsDir() && isTemp(e.Name()):
			// A program's data that a killed Remove renamed away.
			add(collectRemoved(filepath.Join(s.root, dataDir, e.Name()), cutoff))
		case e.IsDir() && manifest.CheckProgramName(e.Name()) == nil:
			add(s.collectData(e.Name(), cutoff))
		}
	}
	if len(errs) > 0 {
		return files, bytes, fmt.Errorf("collect temporary files: %w", errs[0])
	}
	return files, bytes, nil
}

// collectData collects in a program's data in turn with its writers, since
// its temporary files are charged to it: the counts of every process are
// redone after.
func (s *Store) collectData(program string, cutoff time.Time) (int, int64, error) {
	u := s.usage(program)
	u.hold()
	defer u.unlock()
	dir := s.dataPath(program)
	l, err := lockData(context.Background(), dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer l.unlock()
	n, b, err := collectDir(dir, cutoff, isTemp)
	if n > 0 {
		u.valid = false
		if _, terr := l.setToken(); err == nil {
			err = terr
		}
	}
	return n, b, err
}

// collectCache collects what killed compiles leave in the compiled-code
// cache: wazero's KEY.*.tmp beside its entries, and the runtime's repair-*
// scratch directories (runtime/cache.go, repairCache).
func (s *Store) collectCache(cutoff time.Time) (files int, bytes int64, err error) {
	dir := filepath.Join(s.root, cacheDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var first error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "repair-") {
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				if err := os.RemoveAll(path); err == nil {
					files++
				} else if first == nil {
					first = err
				}
			}
			continue
		}
		n, b, err := collectDir(path, cutoff, isWazeroTemp)
		files += n
		bytes += b
		if err != nil && first == nil {
			first = err
		}
	}
	return files, bytes, first
}

func isTemp(name string) bool { return strings.HasPrefix(name, tmpPrefix) }

// isWazeroTemp matches the temporary files of wazero's file cache
// (internal/filecache: os.CreateTemp(dir, KEY+".*.tmp")).
func isWazeroTemp(name string) bool { return strings.HasSuffix(name, ".tmp") }

// collectDir removes the regular files of dir that match and were last
// written before cutoff.
func collectDir(dir string, cutoff time.Time, match func(name string) bool) (files int, bytes int64, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var first error
	for _, e := range entries {
		if !match(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue // gone already (renamed into place), or too young
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && first == nil {
				first = err
			}
			continue
		}
		files++
		bytes += info.Size()
	}
	return files, bytes, first
}

// collectRemoved removes a directory that a Remove renamed away and did not
// finish removing, once it is older than cutoff (a Remove in progress is
// younger), counting its files.
func collectRemoved(dir string, cutoff time.Time) (files int, bytes int64, err error) {
	info, err := os.Lstat(dir)
	if err != nil || !info.IsDir() || info.ModTime().After(cutoff) {
		return 0, 0, nil
	}
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				files++
				bytes += fi.Size()
			}
		}
		return nil
	})
	return files, bytes, os.RemoveAll(dir)
}
