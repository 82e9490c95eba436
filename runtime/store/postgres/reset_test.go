package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/pgtest"
)

// TestResetOncePerFailure: the calls in flight when the database went away
// all lose their connections; the first to fail resets the pool, and the
// others, which began before that reset, leave alone the connections made
// since. A failure of a call that began after it resets again.
func TestResetOncePerFailure(t *testing.T) {
	s, err := Open(context.Background(), pgtest.URL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ping := func() {
		t.Helper()
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	made := func() int64 { return s.pool.Stat().NewConnsCount() }

	ping()
	inFlight := time.Now().UnixNano() // calls that began before the failure
	s.resetPool(inFlight)             // the first of them to fail
	ping()                            // a new connection, idle in the pool
	before := made()
	s.resetPool(inFlight) // the others of the same failure
	s.resetPool(inFlight)
	ping()
	if got := made() - before; got != 0 {
		t.Errorf("%d connections made after calls of a failure already reset failed too, want 0", got)
	}
	s.resetPool(time.Now().UnixNano()) // a call begun since failed: reset
	ping()
	if got := made() - before; got != 1 {
		t.Errorf("%d connections made after a later failure, want 1", got)
	}
}
