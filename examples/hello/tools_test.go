//go:build !wasip1

package main

import (
	"testing"
	"time"

	berm "github.com/berm-dev/berm/sdk"
)

func TestGreet(t *testing.T) {
	for _, tc := range []struct {
		name, args      string
		result, failure string
	}{
		{name: "name", args: `{"name":"berm"}`, result: "Hello, berm!"},
		{name: "empty", args: `{"name":""}`, failure: `name is empty: say whom to greet, as in {"name": "Ada"}`},
		{name: "blank", args: `{"name":"  "}`, failure: `name is empty: say whom to greet, as in {"name": "Ada"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &berm.FakeHost{Args: []byte(tc.args)}
			h.Run(func() { berm.Handle(greetTool) })
			if string(h.Result) != tc.result || h.Failure != tc.failure {
				t.Errorf("greet = %q, failure %q; want %q, %q", h.Result, h.Failure, tc.result, tc.failure)
			}
		})
	}
}

func TestCount(t *testing.T) {
	h := &berm.FakeHost{}
	for _, want := range []string{"1", "2", "3"} {
		h.Run(func() { berm.Handle(countTool) })
		if string(h.Result) != want || h.Failed {
			t.Fatalf("count = %q, failure %q; want %s", h.Result, h.Failure, want)
		}
	}
	h.Store[countKey] = []byte("many")
	h.Run(func() { berm.Handle(countTool) })
	if want := `count: the stored value "many" is not a number`; h.Failure != want {
		t.Errorf("count over a bad value: failure %q, want %q", h.Failure, want)
	}
	h = &berm.FakeHost{StoreLimit: 1}
	h.Run(func() { berm.Handle(countTool) })
	if !h.Failed {
		t.Errorf("count past the store's quota = %q, want a failure", h.Result)
	}
}

func TestNow(t *testing.T) {
	h := &berm.FakeHost{Time: time.Date(2026, 5, 4, 3, 2, 1, 0, time.FixedZone("x", 3600))}
	h.Run(func() { berm.Handle(nowTool) })
	if want := "2026-05-04T02:02:01Z"; string(h.Result) != want {
		t.Errorf("now = %q, want %q", h.Result, want)
	}
}
