package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

func TestDataUsage(t *testing.T) {
	s := open(t)
	usage := func(s *store.Store, want int64) {
		t.Helper()
		if got, err := s.DataUsage("p"); err != nil || got != want {
			t.Errorf("DataUsage = %d, %v; want %d", got, err, want)
		}
	}
	usage(s, 0) // no data yet, and none made by asking
	if err := s.Set("p", []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	usage(s, store.BlockSize)
	if err := s.Set("p", []byte("b"), bytes.Repeat([]byte("x"), store.BlockSize)); err != nil {
		t.Fatal(err)
	}
	usage(s, 3*store.BlockSize) // 4+1+4096 bytes take two blocks

	// Another process's write is seen: the count is redone.
	other, err := store.Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	usage(other, 3*store.BlockSize)
	if err := other.Delete("p", []byte("b")); err != nil {
		t.Fatal(err)
	}
	usage(s, store.BlockSize)

	if _, err := s.DataUsage("../p"); !errors.Is(err, manifest.ErrProgramName) {
		t.Errorf("DataUsage(../p) = %v, want ErrProgramName", err)
	}
}
