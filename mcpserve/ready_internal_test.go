package mcpserve

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// settled waits for the check under way, if any, to answer.
func (h *stateHealth) settled() {
	h.mu.Lock()
	running := h.running
	h.mu.Unlock()
	if running != nil {
		<-running
	}
}

func newStateHealth(ask func(context.Context) error) (*stateHealth, *time.Time) {
	now := time.Unix(1000, 0)
	return &stateHealth{ask: ask, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }}, &now
}

// Options.CheckState is asked at most once per stateCheckedFor, however often
// /healthz is probed, and its answer stands until then; the probe after that
// gets the answer before while the state is asked anew.
func TestStateHealthCached(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	var answer atomic.Pointer[error]
	down := errors.New("database unreachable")
	answer.Store(&down)
	h, now := newStateHealth(func(context.Context) error {
		asked.Add(1)
		return *answer.Load()
	})
	for range 100 {
		if err := h.check(context.Background()); err == nil {
			t.Fatal("check = nil, want the failure")
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("100 probes within a second asked the state %d times, want 1", n)
	}
	var up error
	answer.Store(&up)
	*now = now.Add(stateCheckedFor)
	h.check(context.Background())
	h.settled()
	if err := h.check(context.Background()); err != nil || asked.Load() != 2 {
		t.Fatalf("after stateCheckedFor: %v, asked %d; want nil, asked 2", err, asked.Load())
	}
}

// A slow state holds no probe once there is an answer: while it is asked
// again, every probe gets the answer before at once, and it is asked once.
// (Were a probe to wait for the check, the test would hang: the check ends
// only once the probes have answered.)
func TestStateHealthSlowCheckHoldsNoProbe(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	release := make(chan struct{})
	h, now := newStateHealth(func(ctx context.Context) error {
		if asked.Add(1) == 1 {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := h.check(context.Background()); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(stateCheckedFor)
	for range 10 {
		if err := h.check(context.Background()); err != nil {
			t.Fatalf("probe during a slow check = %v, want the answer before it (nil)", err)
		}
	}
	close(release)
	h.settled()
	if n := asked.Load(); n != 2 {
		t.Fatalf("the state was asked %d times, want 2: one check at a time", n)
	}
}

// A probe that hangs up does not leave its cancellation as the answer.
func TestStateHealthIgnoresProbeCancellation(t *testing.T) {
	t.Parallel()
	h, _ := newStateHealth(func(ctx context.Context) error { return ctx.Err() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.check(ctx)
	h.settled()
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("check after a probe hung up = %v, want nil", err)
	}
}
