package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func query(t *testing.T, url, sql string) (n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestURLIsFreshDatabase(t *testing.T) {
	a, b := pgtest.URL(t), pgtest.URL(t)
	if a == b {
		t.Fatalf("two calls gave the same database %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	if n := query(t, b, "SELECT count(*) FROM pg_tables WHERE tablename = 't'"); n != 0 {
		t.Errorf("a table of one database is seen in the other")
	}
}

func TestClusterRestart(t *testing.T) {
	c := pgtest.NewCluster(t)
	url := c.URL(t)
	if n := query(t, url, "SELECT 1"); n != 1 {
		t.Fatalf("SELECT 1 = %d", n)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(context.Background(), url); err == nil {
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n := query(t, url, "SELECT 2"); n != 2 {
		t.Fatalf("SELECT 2 = %d after a restart", n)
	}
}
