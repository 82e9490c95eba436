package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Limits of a program's key-value data.
const (
	MaxKey       = 1 << 10  // bytes in a key
	MaxValue     = 1 << 20  // bytes in a value
	MaxDataBytes = 64 << 20 // bytes of keys and values in all of one program's data
)

// ErrQuota: a write would pass one of the data limits.
var ErrQuota = errors.New("over the data quota")

func (s *Store) dataPath(program string) string {
	return filepath.Join(s.root, dataDir, program)
}

// keyPath names a key's file by the key's hash, so that any bytes make a
// valid file name of bounded length.
func (s *Store) keyPath(program string, key []byte) string {
	sum := sha256.Sum256(key)
	return filepath.Join(s.dataPath(program), hex.EncodeToString(sum[:]))
}

// A key's file holds the key's length, the key (so that a hash collision
// can never return another key's value), then the value.
func encodeEntry(key, value []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// Get returns the value of key in program's data.
func (s *Store) Get(program string, key []byte) ([]byte, bool, error) {
	b, err := os.ReadFile(s.keyPath(program, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
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

// Set stores value under key in program's data, refusing with ErrQuota what
// passes the limits.
func (s *Store) Set(program string, key, value []byte) error {
	if len(key) > MaxKey {
		return fmt.Errorf("key of %d bytes is over the limit of %d bytes: %w", len(key), MaxKey, ErrQuota)
	}
	if len(value) > MaxValue {
		return fmt.Errorf("value of %d bytes is over the limit of %d bytes: %w", len(value), MaxValue, ErrQuota)
	}
	path := s.keyPath(program, key)
	entry := encodeEntry(key, value)
	used, err := s.dataUsed(program, path)
	if err != nil {
		return err
	}
	if used+int64(len(entry)) > MaxDataBytes {
		return fmt.Errorf("data of %s would be %d bytes, over the limit of %d bytes: %w", program, used+int64(len(entry)), MaxDataBytes, ErrQuota)
	}
	if err := os.MkdirAll(s.dataPath(program), 0o755); err != nil {
		return err
	}
	return writeAtomic(path, entry)
}

// dataUsed sums the sizes of a program's entries but the one at except,
// which a write replaces.
func (s *Store) dataUsed(program, except string) (int64, error) {
	entries, err := os.ReadDir(s.dataPath(program))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var used int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) || filepath.Join(s.dataPath(program), e.Name()) == except {
			continue
		}
		if info, err := e.Info(); err == nil {
			used += info.Size()
		}
	}
	return used, nil
}

// Delete removes key from program's data; an absent key is no error.
func (s *Store) Delete(program string, key []byte) error {
	err := os.Remove(s.keyPath(program, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
