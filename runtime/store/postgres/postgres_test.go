package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/internal/pgtest"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/postgres"
	"github.com/berm-dev/berm/runtime/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// changeWithin is how soon a change made anywhere must reach Changes here:
// far more than the second the issue allows a deploy to reach every replica,
// so that a loaded 2-core CI does not fail it by chance. Whether the second
// holds is the benchmark's to measure (deploy/'s bench-replicas), not a
// test's.
const changeWithin = 5 * time.Second

// quietFor is how long a test waits to see that no change arrives, once a
// real change arrived on the same path: a signal would come in milliseconds.
const quietFor = 300 * time.Millisecond

// open opens a State that listens, as berm serve's does.
func open(t *testing.T, url string) *postgres.State {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, &postgres.Options{Listen: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// exec runs SQL as another client would (psql, a migration by hand).
func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() store.State {
		url := pgtest.URL(t)
		return func() store.State {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Listen: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

func TestDamagedRows(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deploy(store.Deployment{Name: "good", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ name, digest, grants string }{
		{"Bad Name", digest, "null"},
		{"bad-digest", "md5:abc", "null"},
		{"bad-grants", digest, `{"hosts": 5}`},
		{"grants-not-object", digest, `[1, 2]`},
		{"grants-unknown-field", digest, `{"dirs": [], "root": true}`},
	} {
		exec(t, url, `INSERT INTO berm_deployments (name, digest, grants) VALUES ($1, $2, $3::jsonb)`, r.name, r.digest, r.grants)
	}

	list, damaged, err := s.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "good" {
		t.Errorf("Deployments = %v, want only good", list)
	}
	var names []string
	for _, d := range damaged {
		names = append(names, d.Name)
		if !errors.Is(d.Err, store.ErrDamaged) {
			t.Errorf("damaged %q: %v does not wrap ErrDamaged", d.Name, d.Err)
		}
	}
	if got, want := strings.Join(names, ","), "Bad Name,bad-digest,bad-grants,grants-not-object,grants-unknown-field"; got != want {
		t.Errorf("damaged = %s, want %s", got, want)
	}
	for _, name := range []string{"bad-digest", "bad-grants", "grants-not-object", "grants-unknown-field"} {
		if _, err := s.Deployment(name); !errors.Is(err, store.ErrDamaged) {
			t.Errorf("Deployment(%s) = %v, want ErrDamaged", name, err)
		}
	}
	if _, err := s.Deployment("Bad Name"); !errors.Is(err, manifest.ErrProgramName) {
		t.Errorf("Deployment(Bad Name) = %v, want ErrProgramName", err)
	}
	// A damaged row is removed like any other.
	if err := s.Remove("bad-grants", false); err != nil {
		t.Errorf("Remove(bad-grants) = %v", err)
	}
}

func TestDamagedImage(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, url, `UPDATE berm_images SET image = 'other bytes'::bytea`)
	if _, err := s.Image(digest); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("Image of changed bytes = %v, want ErrDamaged", err)
	}
	// Putting the image again repairs it.
	if _, err := s.PutImage([]byte("image")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Image(digest); err != nil || string(b) != "image" {
		t.Fatalf("Image after PutImage = %q, %v", b, err)
	}
}

func TestDamagedValue(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url)
	exec(t, url, `INSERT INTO berm_data (program, key, value) VALUES ('p', 'k', repeat('x', $1)::bytea)`, store.MaxValue+1)
	if _, _, err := s.Get(t.Context(), "p", []byte("k")); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("Get of a value over MaxValue = %v, want ErrDamaged", err)
	}
}

func TestConcurrentMigrations(t *testing.T) {
	url := pgtest.URL(t)
	const replicas = 8
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), url, nil)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, last int
	if err := conn.QueryRow(ctx, `SELECT count(*), max(version) FROM berm_schema`).Scan(&rows, &last); err != nil {
		t.Fatal(err)
	}
	if rows != len(postgres.Migrations) || last != len(postgres.Migrations) {
		t.Errorf("berm_schema: %d rows up to %d, want each of %d steps once", rows, last, len(postgres.Migrations))
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.URL(t)
	open(t, url).Close()
	exec(t, url, `INSERT INTO berm_schema (version) VALUES ($1)`, len(postgres.Migrations)+1)
	_, err := postgres.Open(context.Background(), url, nil)
	if !errors.Is(err, postgres.ErrNewerSchema) {
		t.Fatalf("Open of a newer schema = %v, want ErrNewerSchema", err)
	}
}

// drain empties Changes of what is pending, so that only a signal sent for
// what follows counts.
func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func waitChange(t *testing.T, c <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(within):
		t.Fatalf("no change received within %v of %s", within, what)
	}
}

func TestChangesFromAnyClient(t *testing.T) {
	url := pgtest.URL(t)
	s, other := open(t, url), open(t, url)
	digest, err := other.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	changes := s.Changes()
	for _, c := range []struct {
		what   string
		change func() error
	}{
		{"a deploy by another State", func() error { return other.Deploy(store.Deployment{Name: "p", Digest: digest}) }},
		{"a redeploy by another State", func() error {
			return other.Deploy(store.Deployment{Name: "p", Digest: digest, Source: "again"})
		}},
		{"an update by plain SQL", func() error {
			exec(t, url, `UPDATE berm_deployments SET source = 'psql' WHERE name = 'p'`)
			return nil
		}},
		{"a removal by another State", func() error { return other.Remove("p", false) }},
		{"an insert by plain SQL", func() error {
			exec(t, url, `INSERT INTO berm_deployments (name, digest) VALUES ('q', $1)`, digest)
			return nil
		}},
		{"a delete by plain SQL", func() error {
			exec(t, url, `DELETE FROM berm_deployments`)
			return nil
		}},
	} {
		drain(changes)
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		waitChange(t, changes, changeWithin, c.what)
	}
	// What changes no deployment sends nothing: data, and a Remove of a
	// name that is not deployed. Each is checked right after a real change
	// came through, so that the path is shown to work when nothing comes.
	for _, c := range []struct {
		what   string
		change func() error
	}{
		{"a Set", func() error { return other.Set(t.Context(), "p", []byte("k"), []byte("v")) }},
		{"a Delete", func() error { return other.Delete(t.Context(), "p", []byte("k")) }},
		{"a Remove of a missing name", func() error {
			if err := other.Remove("missing", false); !errors.Is(err, store.ErrNotDeployed) {
				return fmt.Errorf("Remove(missing) = %v, want ErrNotDeployed", err)
			}
			return nil
		}},
	} {
		drain(changes)
		if err := other.Deploy(store.Deployment{Name: "marker", Digest: digest, Source: c.what}); err != nil {
			t.Fatal(err)
		}
		waitChange(t, changes, changeWithin, "a deploy before "+c.what)
		drain(changes)
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		select {
		case <-changes:
			t.Errorf("%s signaled Changes", c.what)
		case <-time.After(quietFor):
		}
	}
}

func TestNoListen(t *testing.T) {
	s, err := postgres.Open(context.Background(), pgtest.URL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.Changes(); c != nil {
		t.Error("Changes of a State opened without Listen is not nil")
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestUpgrade: a database that an older berm migrated is brought up to date.
func TestUpgrade(t *testing.T) {
	url := pgtest.URL(t)
	exec(t, url, `CREATE TABLE berm_schema (version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, postgres.Migrations[0], pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	exec(t, url, `INSERT INTO berm_schema (version) VALUES (1)`)

	s := open(t, url)
	var last int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM berm_schema`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last != len(postgres.Migrations) {
		t.Errorf("schema version %d after Open, want %d", last, len(postgres.Migrations))
	}
	// The upgraded trigger sends nothing for a Remove that removes nothing,
	// and still sends for a deploy.
	changes := s.Changes()
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	drain(changes)
	if err := s.Deploy(store.Deployment{Name: "p", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes, changeWithin, "a deploy")
	drain(changes)
	if err := s.Remove("missing", false); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatal(err)
	}
	select {
	case <-changes:
		t.Error("a Remove of a missing name signaled Changes")
	case <-time.After(quietFor):
	}
}

func TestChangesAfterRestart(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.URL(t)
	s := open(t, url)
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(t.Context(), "p", []byte("k"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	changes := s.Changes()
	drain(changes)

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Error("Ping of a stopped database succeeded")
	}
	if _, _, err := s.Get(t.Context(), "p", []byte("k")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Get from a stopped database: %v, want ErrUnavailable", err)
	}
	if err := s.Set(t.Context(), "p", []byte("k"), []byte("lost")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Set into a stopped database: %v, want ErrUnavailable", err)
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	// Notifications sent while the listener was away are lost: it signals
	// once it listens again, so that the service reads everything again.
	waitChange(t, changes, 30*time.Second, "the database's restart")

	// The State works again, and listens again: a deploy by another client
	// reaches it.
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping after the restart: %v", err)
	}
	if v, ok, err := s.Get(t.Context(), "p", []byte("k")); err != nil || !ok || string(v) != "before" {
		t.Fatalf("Get after the restart = %q, %v, %v", v, ok, err)
	}
	drain(changes)
	if err := open(t, url).Deploy(store.Deployment{Name: "after", Digest: digest}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes, changeWithin, "a deploy after the restart")
	if err := s.Set(t.Context(), "p", []byte("k"), []byte("after")); err != nil {
		t.Fatalf("Set after the restart: %v", err)
	}
}

// TestRestartUnderUse: connections that the restart killed while idle in
// the pool cost no call an error: each is tried once more on a new one.
func TestRestartUnderUse(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	s := open(t, cluster.URL(t))
	// Several connections in the pool, all idle when the server restarts.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if err := s.Set(t.Context(), "p", fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, ok, err := s.Get(t.Context(), "p", fmt.Appendf(nil, "k%d", i)); err != nil || !ok {
			t.Errorf("Get k%d right after the restart = %v, %v", i, ok, err)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	s := open(t, pgtest.URL(t))
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		call func() error
		want uint64
	}{
		{"Get", func() error { _, _, err := s.Get(t.Context(), "p", []byte("k")); return err }, 1},
		{"Set", func() error { return s.Set(t.Context(), "p", []byte("k"), []byte("v")) }, 1},
		{"Delete", func() error { return s.Delete(t.Context(), "p", []byte("k")) }, 1},
		{"Deploy", func() error { return s.Deploy(store.Deployment{Name: "p", Digest: digest}) }, 1},
		{"Deployment", func() error { _, err := s.Deployment("p"); return err }, 1},
		{"Deployments", func() error { _, _, err := s.Deployments(); return err }, 1},
	} {
		// The first call prepares its statement on the connection.
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		before := s.RoundTrips()
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got := s.RoundTrips() - before; got != c.want {
			t.Errorf("%s: %d round trips, want %d", c.what, got, c.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = postgres.Open(context.Background(), "postgres://berm:s3cret-pw@"+addr+"/berm?sslmode=disable", nil)
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, addr) {
		t.Errorf("error %q does not name %s", msg, addr)
	}
	if strings.Contains(msg, "s3cret-pw") {
		t.Errorf("error %q shows the password", msg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
	// Refused at once, not after a timeout.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %q is not the refusal", msg)
	}
	// What may heal: the caller may try again.
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("error %q does not wrap ErrUnavailable", msg)
	}
}

// TestOpenRefused: what will not heal by waiting is not ErrUnavailable, so
// that a caller retries only what may.
func TestOpenRefused(t *testing.T) {
	url := pgtest.URL(t)
	open(t, url).Close()
	exec(t, url, `CREATE ROLE berm_nobody LOGIN`)
	t.Cleanup(func() { exec(t, url, `DROP OWNED BY berm_nobody; DROP ROLE berm_nobody`) })
	// A database of its own that berm_nobody may connect to but not
	// create tables in (PostgreSQL 15 grants no CREATE on public; the
	// revoke makes sure).
	fresh := pgtest.URL(t)
	exec(t, fresh, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	with := func(base, user, database string) string {
		u, err := neturl.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			u.User = neturl.User(user)
		}
		if database != "" {
			u.Path = "/" + database
		}
		return u.String()
	}

	for _, c := range []struct{ what, url string }{
		{"a malformed URL", "postgres://berm@db:notaport/berm"},
		{"an unknown role (28000)", with(url, "berm_no_such_role", "")},
		{"a missing database (3D000)", with(url, "", "berm_no_such_database")},
		{"no privilege to create the schema (42501)", with(fresh, "berm_nobody", "")},
	} {
		_, err := postgres.Open(context.Background(), c.url, nil)
		if err == nil {
			t.Errorf("%s: Open succeeded", c.what)
			continue
		}
		t.Logf("%s: %v", c.what, err)
		if errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v wraps ErrUnavailable", c.what, err)
		}
	}
	exec(t, url, `INSERT INTO berm_schema (version) VALUES ($1)`, len(postgres.Migrations)+1)
	if _, err := postgres.Open(context.Background(), url, nil); !errors.Is(err, postgres.ErrNewerSchema) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open of a newer schema = %v, want ErrNewerSchema and not ErrUnavailable", err)
	}
}

func TestMalformedURL(t *testing.T) {
	for _, url := range []string{
		"postgres://berm:s3cret-pw@db:notaport/berm",
		"postgres://berm:s3cret-pw@db/berm?sslmode=bogus",
		"postgres://berm:s3cret-pw@db/berm?connect_timeout=x",
	} {
		_, err := postgres.Open(context.Background(), url, nil)
		if err == nil {
			t.Errorf("Open(%s) succeeded", url)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret-pw") || !strings.Contains(msg, "URL") {
			t.Errorf("Open(%s) = %q, want a malformed URL error without the password", url, msg)
		}
	}
}

// TestFunctionsPinSearchPath: every berm_ function resolves names in
// pg_catalog and its own schema, whatever the caller's search_path.
func TestFunctionsPinSearchPath(t *testing.T) {
	url := pgtest.URL(t)
	open(t, url)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT proname, coalesce(array_to_string(proconfig, ','), '') FROM pg_proc WHERE proname LIKE 'berm\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name, config string
		if err := rows.Scan(&name, &config); err != nil {
			t.Fatal(err)
		}
		n++
		if config != "search_path=pg_catalog, public" {
			t.Errorf("%s: config %q, want its search_path pinned to pg_catalog, public", name, config)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("%d berm_ functions, want at least 5", n)
	}
}
