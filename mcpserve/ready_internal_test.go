package mcpserve

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// Options.Ready is asked at most once per readyFor, however often /healthz
// is probed, and its answer stands until then.
func TestReadyCached(t *testing.T) {
	var asked int
	answer := errors.New("database unreachable")
	s := &Server{log: slog.New(slog.DiscardHandler), opts: Options{Ready: func(context.Context) error {
		asked++
		return answer
	}}}
	now := time.Unix(1000, 0)
	s.ready.now = func() time.Time { return now }
	for range 100 {
		if err := s.checkReady(context.Background()); err == nil {
			t.Fatal("checkReady = nil, want the failure")
		}
	}
	if asked != 1 {
		t.Fatalf("100 probes within a second asked Ready %d times, want 1", asked)
	}
	answer = nil
	now = now.Add(readyFor)
	if err := s.checkReady(context.Background()); err != nil || asked != 2 {
		t.Fatalf("after readyFor: %v, asked %d; want nil, asked 2", err, asked)
	}
}

// A probe that hangs up does not leave its cancellation as the answer.
func TestReadyIgnoresProbeCancellation(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler), opts: Options{Ready: func(ctx context.Context) error { return ctx.Err() }}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.checkReady(ctx); err != nil {
		t.Fatalf("checkReady with the probe's context cancelled = %v, want nil", err)
	}
}
