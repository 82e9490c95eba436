package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/runtime/store"
)

// Migrations is the schema's steps, for tests that count them.
var Migrations = migrations

// RoundTrips is how many round trips this State's calls made to the database
// so far: statements, their preparation on a connection's first use, and
// pings. Connecting is not counted, nor the listening connection's traffic.
func (s *State) RoundTrips() uint64 { return s.roundTrips.Load() }

// Fill implements storetest.Filler: n entries of a block each, written in one
// transaction under the program's lock as berm_set writes.
func (s *State) Fill(program string, n int) error {
	var prefix [8]byte
	rand.Read(prefix[:])
	return s.do(context.Background(), false, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
			defer cancel()
			tx.Rollback(c)
		}()
		if _, err := tx.Exec(ctx, `SELECT berm_lock_program($1)`, program); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO berm_data_usage (program, bytes, keys) VALUES ($1, 0, 0)
			ON CONFLICT (program) DO NOTHING`, program); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM berm_data_usage WHERE program = $1 FOR UPDATE`, program); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO berm_data (program, key, value)
			SELECT $1, convert_to($2 || i::text, 'UTF8'), ''::bytea FROM generate_series(1, $3::int) AS i`,
			program, "\x01fill-"+hex.EncodeToString(prefix[:])+"-", n)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE berm_data_usage SET bytes = bytes + $2, keys = keys + $3 WHERE program = $1`,
			program, tag.RowsAffected()*store.BlockSize, tag.RowsAffected()); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// Hold implements storetest.Holder as another replica's Set holds a
// program's data: a transaction on a connection of its own that holds the
// program's lock and its usage row.
func (s *State) Hold(program string) (func(), error) {
	ctx := context.Background()
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.Tracer = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	release := func() { conn.Close(ctx) } // which rolls back
	for _, sql := range []string{
		`BEGIN`,
		`SELECT berm_lock_program($1)`,
		`SELECT 1 FROM berm_data_usage WHERE program = $1 FOR UPDATE`,
	} {
		var args []any
		if sql != `BEGIN` {
			args = []any{program}
		}
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}
