package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

// Get returns the value of key in program's data, in one round trip. A value
// over store.MaxValue was not written by Set: it is damage, not read in full.
func (s *State) Get(ctx context.Context, program string, key []byte) ([]byte, bool, error) {
	if err := manifest.CheckProgramName(program); err != nil {
		return nil, false, err
	}
	key = notNull(key)
	var value []byte
	err := s.do(ctx, true, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT substr(value, 1, $3) FROM berm_data WHERE program = $1 AND key = $2`,
			program, key, store.MaxValue+1).Scan(&value)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("data of %s: %w", program, err)
	}
	if len(value) > store.MaxValue {
		return nil, false, fmt.Errorf("data of %s: a value over %d bytes: %w", program, store.MaxValue, store.ErrDamaged)
	}
	if value == nil {
		value = []byte{} // found, empty
	}
	return value, true, nil
}

// Set stores value under key in program's data, refusing with store.ErrQuota
// what passes the limits, in one round trip (berm_set): each entry is charged
// 4+len(key)+len(value) rounded up to store.BlockSize, as the directory
// backend charges its file, so that both refuse the same writes. It returns
// once the write is committed.
func (s *State) Set(ctx context.Context, program string, key, value []byte) error {
	if err := manifest.CheckProgramName(program); err != nil {
		return err
	}
	if len(key) > store.MaxKey {
		return fmt.Errorf("key of %d bytes is over the limit of %d bytes: %w", len(key), store.MaxKey, store.ErrQuota)
	}
	if len(value) > store.MaxValue {
		return fmt.Errorf("value of %d bytes is over the limit of %d bytes: %w", len(value), store.MaxValue, store.ErrQuota)
	}
	key, value = notNull(key), notNull(value)
	var outcome string
	var keys, bytes int64
	// Not run again once sent (see do): another replica may have written
	// the key since.
	err := s.do(ctx, false, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT outcome, held_keys, held_bytes FROM berm_set($1, $2, $3, $4, $5, $6)`,
			program, key, value, store.BlockSize, store.MaxDataBytes, store.MaxKeys).Scan(&outcome, &keys, &bytes)
	})
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	switch outcome {
	case "ok":
		return nil
	case "keys":
		return fmt.Errorf("data of %s holds %d keys, the limit: %w", program, keys, store.ErrQuota)
	case "bytes":
		return fmt.Errorf("data of %s would be %d bytes on disk, over the limit of %d bytes: %w", program, bytes, store.MaxDataBytes, store.ErrQuota)
	}
	return fmt.Errorf("data of %s: berm_set answered %q", program, outcome)
}

// Delete removes key from program's data; an absent key is no error.
func (s *State) Delete(ctx context.Context, program string, key []byte) error {
	if err := manifest.CheckProgramName(program); err != nil {
		return err
	}
	key = notNull(key)
	err := s.do(ctx, false, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `SELECT berm_delete($1, $2, $3)`, program, key, store.BlockSize)
		return err
	})
	if err != nil {
		return fmt.Errorf("data of %s: %w", program, err)
	}
	return nil
}

// DataUsage is what program's data is charged against store.MaxDataBytes: the
// sum that Set and Delete keep in its usage row, 0 when it has none.
func (s *State) DataUsage(program string) (int64, error) {
	if err := manifest.CheckProgramName(program); err != nil {
		return 0, err
	}
	var bytes int64
	err := s.do(context.Background(), true, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT bytes FROM berm_data_usage WHERE program = $1`, program).Scan(&bytes)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("data of %s: %w", program, err)
	}
	return bytes, nil
}

// notNull makes a nil key or value the empty one it stands for: pgx sends a
// nil slice as NULL.
func notNull(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
