package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/berm-dev/berm/manifest"
)

// Limits of a program's data. The quota counts what the disk pays, not the
// bytes a program asked for: each entry is one file, which takes one inode
// and whole blocks, so 13-byte entries would otherwise fit 5 million in
// 64 MiB, some 20 GiB of blocks.
const (
	MaxKey   = 1 << 10 // bytes in a key
	MaxValue = 1 << 20 // bytes in a value
	// MaxDataBytes bounds the charged bytes of all of one program's data:
	// its entries, and the temporary files of its writes while they last.
	MaxDataBytes = 64 << 20
	// BlockSize is what an entry is charged in multiples of, one block at
	// least: the block of common file systems (ext4, XFS, APFS, NTFS),
	// which a file of one byte takes in full.
	BlockSize = 4096
	// MaxKeys bounds the entries (files, inodes) of one program. 16384 is
	// MaxDataBytes/BlockSize, as many entries as the byte quota allows of
	// the smallest, so it refuses nothing that the bytes allow; it keeps the
	// directory that small (a scan of it takes milliseconds) should either
	// constant change.
	MaxKeys = 16384
)

// ErrQuota: a write would pass one of the data limits. Its messages name the
// program and the numbers, never a path: the program reads them.
var ErrQuota = errors.New("over the data quota")

// lockName is the file that a program's writers lock across processes. It
// also holds a token of the last write, so that each process knows when its
// count of the program's usage went stale. It is neither an entry (hex) nor
// temporary (.tmp-), and is not charged.
const lockName = ".lock"

func (s *Store) dataPath(program string) string {
	return filepath.Join(s.root, dataDir, program)
}

// keyPath names a key's file by the key's hash, so that any bytes make a
// valid file name of bounded length.
func (s *Store) keyPath(program string, key []byte) string {
	sum := sha256.Sum256(key)
	return filepath.Join(s.dataPath(program), hex.EncodeToString(sum[:]))
}

// isKeyName reports whether a file of a data directory is an entry.
func isKeyName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

// charge is what a file of n bytes costs against the quota.
func charge(n int64) int64 {
	if n <= 0 {
		return BlockSize
	}
	return (n + BlockSize - 1) / BlockSize * BlockSize
}

// A key's file holds the key's length, the key (so that a hash collision
// can never return another key's value), then the value.
func encodeEntry(key, value []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// Get returns the value of key in program's data. It waits for nothing (a
// write renames its file into place), so ctx is only checked first.
func (s *Store) Get(ctx context.Context, program string, key []byte) ([]byte, bool, error) {
	if err := manifest.CheckProgramName(program); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("data of %s: %w", program, err)
	}
	b, err := readBounded(s.keyPath(program, key), maxEntry)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("data of %s: %w", program, err)
	}
	if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
		return nil, false, fmt.Errorf("data of %s: %w", program, ErrDamaged)
	}
	n := int(binary.LittleEndian.Uint32(b))
	if string(b[4:4+n]) != string(key) {
		return nil, false, nil
	}
	return b[4+n:], true, nil
}

// usage is one program's data as this process last counted it.
type usage struct {
	// turn makes this process's writers of the program take turns (a
	// channel of one, not a mutex, so that a call's writer stops waiting at
	// the call's deadline); the lock file makes processes take turns.
	turn chan struct{}

	valid bool
	// What the count was made under: the lock file (a removed directory
	// gets a new one), the token in it, and the directory's mtime (a
	// best-effort sign of changes made by hand).
	lockFile os.FileInfo
	token    uint64
	dirMod   time.Time

	bytes int64 // charged
	keys  int
}

func (s *Store) usage(program string) *usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = map[string]*usage{}
	}
	u := s.data[program]
	if u == nil {
		u = &usage{turn: make(chan struct{}, 1)}
		s.data[program] = u
	}
	return u
}

// lock waits for this process's turn at the program's data, or for ctx.
func (u *usage) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case u.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for another writer: %w", ctx.Err())
	}
}

// hold waits for this process's turn for as long as it takes: for what no
// call waits on (a Remove, DataUsage, CollectTemp).
func (u *usage) hold() { u.turn <- struct{}{} }

func (u *usage) unlock() { <-u.turn }

// fresh reports whether the count still holds: no process has written since.
func (u *usage) fresh(l *dataLock, dir string) bool {
	if !u.valid || !os.SameFile(u.lockFile, l.info) {
		return false
	}
	if token, err := l.token(); err != nil || token != u.token {
		return false
	}
	info, err := os.Stat(dir)
	return err == nil && info.ModTime().Equal(u.dirMod)
}

// count scans the directory unless the count still holds.
func (u *usage) count(l *dataLock, dir string) error {
	if u.fresh(l, dir) {
		return nil
	}
	u.valid = false
	token, err := l.token()
	if err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var bytes int64
	var keys int
	for _, e := range entries {
		if e.Name() == lockName || e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		// Temporary files are charged too: a killed writer's stay until
		// CollectTemp, and they take the disk meanwhile.
		bytes += charge(fi.Size())
		if isKeyName(e.Name()) {
			keys++
		}
	}
	u.valid, u.lockFile, u.token, u.dirMod = true, l.info, token, info.ModTime()
	u.bytes, u.keys = bytes, keys
	return nil
}

// wrote marks the count as current after this process wrote under token.
func (u *usage) wrote(token uint64, dir string) {
	info, err := os.Stat(dir)
	if err != nil {
		u.valid = false
		return
	}
	u.token, u.dirMod = token, info.ModTime()
}

// Set stores value under key in program's data, refusing with ErrQuota what
// passes the limits. ctx ends its waits for other writers, never the write.
func (s *Store) Set(ctx context.Context, program string, key, value []byte) error {
	if err := manifest.CheckProgramName(program); err != nil {
		return err
	}
	if len(key) > MaxKey {
		return fmt.Errorf("key of %d bytes is over the limit of %d bytes: %w", len(key), MaxKey, ErrQuota)
	}
	if len(value) > MaxValue {
		return fmt.Errorf("value of %d bytes is over the limit of %d bytes: %w", len(value), MaxValue, ErrQuota)
	}
	u := s.usage(program)
	if err := u.lock(ctx); err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	defer u.unlock()
	dir := s.dataPath(program)
	l, err := lockData(ctx, dir, true)
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	defer l.unlock()
	if err := u.count(l, dir); err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}

	path := s.keyPath(program, key)
	entry := encodeEntry(key, value)
	var old int64 // charged to the entry this write replaces
	info, err := os.Lstat(path)
	isNew := errors.Is(err, fs.ErrNotExist)
	switch {
	case err == nil:
		old = charge(info.Size())
	case !isNew:
		return fmt.Errorf("data of %s: %w", program, err)
	case u.keys >= MaxKeys:
		return fmt.Errorf("data of %s holds %d keys, the limit: %w", program, u.keys, ErrQuota)
	}
	after := u.bytes - old + charge(int64(len(entry)))
	// A write that takes no more than it frees passes even over the
	// quota, so that a program over it (since quotas count blocks) can
	// shrink its data in place.
	if after > MaxDataBytes && after > u.bytes {
		return fmt.Errorf("data of %s would be %d bytes on disk, over the limit of %d bytes: %w", program, after, MaxDataBytes, ErrQuota)
	}

	// The token changes before the write, so that a kill mid-write still
	// sends every process back to the directory, where the temporary
	// file left is charged.
	token, err := l.setToken()
	if err != nil {
		u.valid = false
		return fmt.Errorf("data of %s: %w", program, err)
	}
	if err := writeAtomic(path, entry); err != nil {
		u.valid = false
		return fmt.Errorf("data of %s: %w", program, err)
	}
	u.bytes = after
	if isNew {
		u.keys++
	}
	u.wrote(token, dir)
	return nil
}

// Delete removes key from program's data; an absent key is no error. ctx
// ends its waits for other writers.
func (s *Store) Delete(ctx context.Context, program string, key []byte) error {
	if err := manifest.CheckProgramName(program); err != nil {
		return err
	}
	u := s.usage(program)
	if err := u.lock(ctx); err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	defer u.unlock()
	dir := s.dataPath(program)
	l, err := lockData(ctx, dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no data at all
	}
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	defer l.unlock()

	path := s.keyPath(program, key)
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	// A count that holds is kept up to date; a stale one is left for the
	// next Set to redo, so that a delete never scans.
	fresh := u.fresh(l, dir)
	u.valid = false
	token, err := l.setToken()
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by hand meanwhile: the count is redone
		}
		return fmt.Errorf("data of %s: %w", program, err)
	}
	if fresh {
		u.valid = true
		u.bytes -= charge(info.Size())
		u.keys--
		u.wrote(token, dir)
	}
	return nil
}

// removeData removes all of program's data, in turn with its writers.
func (s *Store) removeData(program string) error {
	u := s.usage(program)
	u.hold()
	defer u.unlock()
	u.valid = false
	dir := s.dataPath(program)
	l, err := lockData(context.Background(), dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	// The directory is renamed out of the way while locked, then removed. A
	// writer waiting on the lock file finds, once it has it, that it is no
	// longer the one at its path, and starts over on a new directory; one
	// that opens the path after the rename makes that new directory. Removed
	// in place instead, a writer could create a lock file in the directory
	// while it is being emptied, and write into it as it goes. A kill
	// between the two leaves a .tmp- directory for CollectTemp.
	gone := filepath.Join(s.root, dataDir, fmt.Sprintf("%sremoved-%s-%x", tmpPrefix, program, rand.Uint64()))
	if err = os.Rename(dir, gone); err == nil {
		l.unlock()
		// A writer whose path walk passed the directory just before the
		// rename may still create a lock file in it, and then starts over
		// on the new one: the removal is tried again once that is gone.
		for range 3 {
			if err = os.RemoveAll(gone); err == nil {
				break
			}
		}
	} else {
		// Where a directory with an open file cannot be renamed
		// (Windows): removed in place, then once more now that the lock
		// file is closed.
		err = os.RemoveAll(dir)
		l.unlock()
		if err != nil {
			err = os.RemoveAll(dir)
		}
	}
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	return nil
}

// dataLock is a program's lock file, locked.
type dataLock struct {
	f    *os.File
	info os.FileInfo
}

// lockData locks the lock file of a data directory, creating the directory
// first when create; without it, a missing directory is fs.ErrNotExist. It
// waits for another process's lock until ctx is done.
func lockData(ctx context.Context, dir string, create bool) (*dataLock, error) {
	path := filepath.Join(dir, lockName)
	for {
		if create {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if create && errors.Is(err, fs.ErrNotExist) {
			continue // a Remove took the directory since MkdirAll: make it again
		}
		if err != nil {
			return nil, err
		}
		if err := lockFile(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		// The lock counts only if the file is still the one at path: the
		// directory may have been removed while this process waited.
		held, err := f.Stat()
		if err == nil {
			var now os.FileInfo
			now, err = os.Stat(path)
			if err == nil && os.SameFile(held, now) {
				return &dataLock{f: f, info: held}, nil
			}
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
		unlockFile(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
}

func (l *dataLock) unlock() {
	unlockFile(l.f)
	l.f.Close()
}

// token is the last writer's token, 0 for none.
func (l *dataLock) token() (uint64, error) {
	var b [8]byte
	if _, err := l.f.ReadAt(b[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// setToken writes a new token. It is random rather than counted, so that a
// lock file made anew after a remove cannot repeat one that a process holds.
func (l *dataLock) setToken() (uint64, error) {
	t := rand.Uint64() | 1 // never 0, the token of none
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], t)
	if _, err := l.f.WriteAt(b[:], 0); err != nil {
		return 0, err
	}
	return t, nil
}
