package commands

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeRootFile replaces name in root with b, as the store writes its
// files: a temporary file, synced, renamed into place, so that a reader
// sees the old file or the new one and a kill mid-write leaves the old. It
// is 0600 whatever the umask: contexts.toml holds tokens.
func writeRootFile(root, name string, b []byte) error {
	f, err := os.CreateTemp(root, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(root, name))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// readSmallFile reads the settings file at path (berm.toml, config.toml,
// contexts.toml), refusing one over max bytes as not a what: the file is
// whatever the directory holds, /dev/zero included. A missing file is
// fs.ErrNotExist, for the caller to decide what that means.
func readSmallFile(path string, max int, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: over %d bytes, not a %s", path, max, what)
	}
	return b, nil
}
