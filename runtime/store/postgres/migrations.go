package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/runtime/store"
)

// ErrNewerSchema: the database was migrated by a newer berm than this one.
var ErrNewerSchema = store.ErrNewerSchema

// schemaLockKey is the pg_advisory_xact_lock key that migrations take, so
// that processes starting at once migrate one after another ("berm" in
// ASCII).
const schemaLockKey = 0x6265726d

// notifyChannel is what the trigger on berm_deployments notifies.
const notifyChannel = "berm_deployments"

// migrations are the schema's steps in order; berm_schema holds the number of
// each step applied (1-based). Append only: a step once released never
// changes.
var migrations = []string{
	// 1: the tables, the change trigger and the data functions.
	`
CREATE TABLE berm_images (
	digest text PRIMARY KEY,
	image  bytea NOT NULL
);

CREATE TABLE berm_deployments (
	name     text PRIMARY KEY,
	digest   text NOT NULL,
	source   text NOT NULL DEFAULT '',
	grants   jsonb,
	deployed timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE berm_data (
	program text  NOT NULL,
	key     bytea NOT NULL,
	value   bytea NOT NULL,
	PRIMARY KEY (program, key)
);

-- What each program's data is charged; its row is the lock that the
-- program's writers take in turn.
CREATE TABLE berm_data_usage (
	program text   PRIMARY KEY,
	bytes   bigint NOT NULL,
	keys    bigint NOT NULL
);

-- One notification per statement: listeners read the whole table again, so
-- the payload is empty, and PostgreSQL folds equal notifications of one
-- transaction into one.
CREATE FUNCTION berm_deployments_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('berm_deployments', '');
	RETURN NULL;
END $$;

CREATE TRIGGER berm_deployments_notify
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON berm_deployments
	FOR EACH STATEMENT EXECUTE FUNCTION berm_deployments_notify();

-- berm_charge is what an entry of n bytes costs: whole blocks, one at least;
-- NULL for no entry.
CREATE FUNCTION berm_charge(n bigint, block bigint) RETURNS bigint
	LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT (greatest(n, 1) + block - 1) / block * block $$;

-- berm_set writes an entry unless it passes a limit: outcome is 'ok', 'keys'
-- (the program holds max_keys already) or 'bytes' (held_bytes would be the
-- charge after the write). The usage row, locked first, makes the program's
-- writers take turns, so that the check and the write are one.
CREATE FUNCTION berm_set(p_program text, p_key bytea, p_value bytea,
		p_block bigint, p_max_bytes bigint, p_max_keys bigint,
		OUT outcome text, OUT held_keys bigint, OUT held_bytes bigint)
	LANGUAGE plpgsql AS $$
DECLARE
	old_size bigint;
	after    bigint;
BEGIN
	LOOP
		SELECT u.bytes, u.keys INTO held_bytes, held_keys
			FROM berm_data_usage u WHERE u.program = p_program FOR UPDATE;
		EXIT WHEN FOUND;
		INSERT INTO berm_data_usage (program, bytes, keys) VALUES (p_program, 0, 0)
			ON CONFLICT (program) DO NOTHING;
	END LOOP;
	SELECT 4 + length(d.key) + length(d.value) INTO old_size
		FROM berm_data d WHERE d.program = p_program AND d.key = p_key;
	IF old_size IS NULL AND held_keys >= p_max_keys THEN
		outcome := 'keys';
		RETURN;
	END IF;
	after := held_bytes - coalesce(berm_charge(old_size, p_block), 0)
		+ berm_charge(4 + length(p_key) + length(p_value), p_block);
	-- A write that takes no more than it frees passes even over the quota,
	-- so that a program over it can shrink its data in place.
	IF after > p_max_bytes AND after > held_bytes THEN
		outcome := 'bytes';
		held_bytes := after;
		RETURN;
	END IF;
	INSERT INTO berm_data (program, key, value) VALUES (p_program, p_key, p_value)
		ON CONFLICT (program, key) DO UPDATE SET value = EXCLUDED.value;
	held_bytes := after;
	IF old_size IS NULL THEN
		held_keys := held_keys + 1;
	END IF;
	UPDATE berm_data_usage u SET bytes = held_bytes, keys = held_keys WHERE u.program = p_program;
	outcome := 'ok';
END $$;

-- berm_delete removes an entry, in turn with the program's writers.
CREATE FUNCTION berm_delete(p_program text, p_key bytea, p_block bigint) RETURNS void
	LANGUAGE plpgsql AS $$
DECLARE
	old_size bigint;
BEGIN
	PERFORM 1 FROM berm_data_usage u WHERE u.program = p_program FOR UPDATE;
	DELETE FROM berm_data d WHERE d.program = p_program AND d.key = p_key
		RETURNING 4 + length(d.key) + length(d.value) INTO old_size;
	IF FOUND THEN
		UPDATE berm_data_usage u SET bytes = u.bytes - berm_charge(old_size, p_block), keys = u.keys - 1
			WHERE u.program = p_program;
	END IF;
END $$;

-- berm_remove deletes a deployment and, unless p_keep_data, its data, and
-- reports whether there was one. The usage row goes first: it waits for a
-- writer in progress, and the data is deleted after that writer committed.
CREATE FUNCTION berm_remove(p_name text, p_keep_data boolean) RETURNS boolean
	LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM berm_deployments d WHERE d.name = p_name;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF NOT p_keep_data THEN
		DELETE FROM berm_data_usage u WHERE u.program = p_name;
		DELETE FROM berm_data d WHERE d.program = p_name;
	END IF;
	RETURN true;
END $$;
`,

	// 2: a program's writers and its Remove take turns on an advisory lock
	// of the program, which exists before the program's usage row does (in
	// 1, a Remove that found no usage row locked nothing, and a first Set
	// committed between its deletes left the usage charged for data that
	// was gone). Two programs whose names hash alike only wait for each
	// other. And the trigger notifies per row, so that a statement that
	// changes nothing (a Remove of a missing name) tells no replica.
	`
CREATE OR REPLACE FUNCTION berm_lock_program(p_program text) RETURNS void
	LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(1650815597, hashtext(p_program)) $$;

CREATE OR REPLACE FUNCTION berm_set(p_program text, p_key bytea, p_value bytea,
		p_block bigint, p_max_bytes bigint, p_max_keys bigint,
		OUT outcome text, OUT held_keys bigint, OUT held_bytes bigint)
	LANGUAGE plpgsql AS $$
DECLARE
	old_size bigint;
	after    bigint;
BEGIN
	PERFORM berm_lock_program(p_program);
	INSERT INTO berm_data_usage (program, bytes, keys) VALUES (p_program, 0, 0)
		ON CONFLICT (program) DO NOTHING;
	SELECT u.bytes, u.keys INTO held_bytes, held_keys
		FROM berm_data_usage u WHERE u.program = p_program FOR UPDATE;
	SELECT 4 + length(d.key) + length(d.value) INTO old_size
		FROM berm_data d WHERE d.program = p_program AND d.key = p_key;
	IF old_size IS NULL AND held_keys >= p_max_keys THEN
		outcome := 'keys';
		RETURN;
	END IF;
	after := held_bytes - coalesce(berm_charge(old_size, p_block), 0)
		+ berm_charge(4 + length(p_key) + length(p_value), p_block);
	-- A write that takes no more than it frees passes even over the quota,
	-- so that a program over it can shrink its data in place.
	IF after > p_max_bytes AND after > held_bytes THEN
		outcome := 'bytes';
		held_bytes := after;
		RETURN;
	END IF;
	INSERT INTO berm_data (program, key, value) VALUES (p_program, p_key, p_value)
		ON CONFLICT (program, key) DO UPDATE SET value = EXCLUDED.value;
	held_bytes := after;
	IF old_size IS NULL THEN
		held_keys := held_keys + 1;
	END IF;
	UPDATE berm_data_usage u SET bytes = held_bytes, keys = held_keys WHERE u.program = p_program;
	outcome := 'ok';
END $$;

CREATE OR REPLACE FUNCTION berm_delete(p_program text, p_key bytea, p_block bigint) RETURNS void
	LANGUAGE plpgsql AS $$
DECLARE
	old_size bigint;
BEGIN
	PERFORM berm_lock_program(p_program);
	DELETE FROM berm_data d WHERE d.program = p_program AND d.key = p_key
		RETURNING 4 + length(d.key) + length(d.value) INTO old_size;
	IF FOUND THEN
		UPDATE berm_data_usage u SET bytes = u.bytes - berm_charge(old_size, p_block), keys = u.keys - 1
			WHERE u.program = p_program;
	END IF;
END $$;

-- Each statement of a plpgsql function reads what committed before it
-- began, so the deletes after the lock see every write that held it.
CREATE OR REPLACE FUNCTION berm_remove(p_name text, p_keep_data boolean) RETURNS boolean
	LANGUAGE plpgsql AS $$
BEGIN
	IF NOT p_keep_data THEN
		PERFORM berm_lock_program(p_name);
	END IF;
	DELETE FROM berm_deployments d WHERE d.name = p_name;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF NOT p_keep_data THEN
		DELETE FROM berm_data_usage u WHERE u.program = p_name;
		DELETE FROM berm_data d WHERE d.program = p_name;
	END IF;
	RETURN true;
END $$;

DROP TRIGGER berm_deployments_notify ON berm_deployments;

CREATE TRIGGER berm_deployments_notify
	AFTER INSERT OR UPDATE OR DELETE ON berm_deployments
	FOR EACH ROW EXECUTE FUNCTION berm_deployments_notify();

CREATE TRIGGER berm_deployments_notify_truncate
	AFTER TRUNCATE ON berm_deployments
	FOR EACH STATEMENT EXECUTE FUNCTION berm_deployments_notify();
`,
	// Step 3: the functions resolve names in pg_catalog and their own schema
	// only, whatever the caller's search_path: otherwise a role that may
	// create objects in a schema earlier on it could put its own
	// berm_data or berm_charge under them (CVE-2018-1058). A step that adds
	// a function pins it likewise.
	`
DO $$
DECLARE f regprocedure;
BEGIN
	FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
		WHERE p.proname LIKE 'berm\_%' AND p.pronamespace = current_schema()::regnamespace
	LOOP
		EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I', f, current_schema());
	END LOOP;
END $$;
`,
}

// migrate applies the steps the database lacks, in one transaction under the
// schema lock. Connecting and each short statement are bounded by the
// timeout; the wait for the lock (another process migrating) and each step
// by the migration timeout, on both ends: the server's lock_timeout and
// statement_timeout end a stuck wait even when this process is gone.
func (s *State) migrate(ctx context.Context) error {
	return s.migrateTo(ctx, migrations)
}

func (s *State) migrateTo(ctx context.Context, steps []string) error {
	within := func(d time.Duration) (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, d) }
	bounded := func() (context.Context, context.CancelFunc) { return within(s.timeout) }

	c, cancel := bounded()
	conn, err := s.pool.Acquire(c)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Release()
	c, cancel = bounded()
	tx, err := conn.Begin(c)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		// A no-op once committed; otherwise it releases the lock.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		tx.Rollback(c)
	}()
	serverBound := fmt.Sprintf("'%dms'", s.migrationTimeout.Milliseconds())
	for _, stmt := range []string{
		"SET LOCAL lock_timeout = " + serverBound,
		"SET LOCAL statement_timeout = " + serverBound,
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", schemaLockKey),
		`CREATE TABLE IF NOT EXISTS berm_schema (
			version int PRIMARY KEY,
			applied timestamptz NOT NULL DEFAULT now()
		)`,
	} {
		c, cancel := within(s.migrationTimeout)
		_, err := tx.Exec(c, stmt)
		cancel()
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	var version int
	c, cancel = bounded()
	err = tx.QueryRow(c, "SELECT coalesce(max(version), 0) FROM berm_schema").Scan(&version)
	cancel()
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if version > len(steps) {
		return fmt.Errorf("schema version %d, this berm knows up to %d: %w", version, len(steps), ErrNewerSchema)
	}
	if version == len(steps) {
		return nil // the rollback only releases the lock
	}
	for i := version; i < len(steps); i++ {
		c, cancel := within(s.migrationTimeout)
		_, err := tx.Exec(c, steps[i], pgx.QueryExecModeSimpleProtocol)
		if err == nil {
			_, err = tx.Exec(c, "INSERT INTO berm_schema (version) VALUES ($1)", i+1)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("schema step %d: %w", i+1, err)
		}
	}
	c, cancel = bounded()
	defer cancel()
	if err := tx.Commit(c); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	s.log.Info("postgres: migrated the schema", "from", version, "to", len(steps))
	return nil
}
