package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/berm-dev/berm/internal/pgtest"
	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/postgres"
)

// BenchmarkCalls measures each call on one connection's worth of traffic,
// with the round trips it took per call.
func BenchmarkCalls(b *testing.B) {
	s, err := postgres.Open(context.Background(), pgtest.URL(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	digest, err := s.PutImage([]byte("image"))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Set(b.Context(), "p", []byte("k"), []byte("v")); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func(i int) error
	}{
		{"Get", func(int) error { _, _, err := s.Get(b.Context(), "p", []byte("k")); return err }},
		{"Set", func(i int) error { return s.Set(b.Context(), "p", fmt.Appendf(nil, "k%d", i%1000), []byte("value")) }},
		{"Delete", func(i int) error { return s.Delete(b.Context(), "p", fmt.Appendf(nil, "k%d", i%1000)) }},
		{"Deploy", func(int) error { return s.Deploy(store.Deployment{Name: "p", Digest: digest}) }},
		{"Deployments", func(int) error { _, _, err := s.Deployments(); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.call(0) // prepares the statement
			before := s.RoundTrips()
			i := 0
			for b.Loop() {
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(s.RoundTrips()-before)/float64(i), "round-trips/op")
		})
	}
}
