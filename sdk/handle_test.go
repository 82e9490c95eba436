//go:build !wasip1

package berm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

type dish struct {
	Title string          `json:"title"`
	Note  string          `json:"note"`
	Raw   json.RawMessage `json:"raw"`
}

type point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

func TestHandle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    string
		tool    func()
		result  string
		failure string // when the call fails
	}{
		{
			name:   "text",
			args:   `{"x":1,"y":2}`,
			tool:   func() { Handle(func(p point) (string, error) { return "at 1,2", nil }) },
			result: "at 1,2",
		},
		{
			name:   "bytes",
			tool:   func() { Handle(func(struct{}) ([]byte, error) { return []byte("raw"), nil }) },
			result: "raw",
		},
		{
			name:   "json",
			args:   `{"x":1,"y":2}`,
			tool:   func() { Handle(func(p point) (point, error) { return point{p.Y, p.X}, nil }) },
			result: `{"x":2,"y":1}`,
		},
		{
			name:   "json map",
			tool:   func() { Handle(func(map[string]any) (map[string]int, error) { return map[string]int{"n": 1}, nil }) },
			result: `{"n":1}`,
		},
		{
			// A result reaches a model, not a web page: &, < and > stay as
			// they are, not \u0026, \u003c and \u003e.
			name: "json keeps HTML characters",
			tool: func() {
				Handle(func(struct{}) (dish, error) {
					return dish{"Fish & Chips", "<b>hot</b>", json.RawMessage(`"a&b"`)}, nil
				})
			},
			result: `{"title":"Fish & Chips","note":"<b>hot</b>","raw":"a&b"}`,
		},
		{
			name:    "error",
			tool:    func() { Handle(func(point) (string, error) { return "ignored", errors.New("x: out of range") }) },
			failure: "x: out of range",
		},
		{
			// A path outside every grant is EBADF under WASI: the model is
			// told it was not granted, not "Bad file number".
			name: "path not granted",
			tool: func() {
				Handle(func(struct{}) (string, error) {
					return "", fmt.Errorf("reading config: %w", &fs.PathError{Op: "stat", Path: "/etc", Err: syscall.EBADF})
				})
			},
			failure: "reading config: stat /etc: " + notGranted,
		},
		{
			name: "rename not granted",
			tool: func() {
				Handle(func(struct{}) (string, error) {
					return "", &os.LinkError{Op: "rename", Old: "/data/a", New: "/etc/a", Err: syscall.EBADF}
				})
			},
			failure: "rename /data/a /etc/a: " + notGranted,
		},
		{
			// A write to a file opened read-only is EBADF of the file, which
			// is inside a grant: said as it is.
			name: "write to a read-only file",
			tool: func() {
				Handle(func(struct{}) (string, error) {
					return "", &fs.PathError{Op: "write", Path: "/data/f.txt", Err: syscall.EBADF}
				})
			},
			failure: "write /data/f.txt: " + syscall.EBADF.Error(),
		},
		{
			name:    "bad arguments",
			args:    `{"x":"one"}`,
			tool:    func() { Handle(func(point) (string, error) { return "ran", nil }) },
			failure: "arguments: json: cannot unmarshal string into Go struct field point.x of type int",
		},
		{
			name:    "unencodable result",
			tool:    func() { Handle(func(struct{}) (func(), error) { return func() {}, nil }) },
			failure: "result: json: unsupported type: func()",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &FakeHost{}
			if tc.args != "" {
				h.Args = []byte(tc.args)
			}
			h.Run(tc.tool)
			if h.Failed != (tc.failure != "") || h.Failure != tc.failure || string(h.Result) != tc.result {
				t.Errorf("outcome = %q, failed %v %q; want %q, %q", h.Result, h.Failed, h.Failure, tc.result, tc.failure)
			}
		})
	}
}

// warmArgs and warmResult are used by TestWarm alone: encoding/json keeps
// what it learns of a type for the life of the process.
type warmArgs struct {
	Name  string   `json:"name"`
	Tags  []string `json:"tags"`
	Count int      `json:"count"`
}

type warmResult struct {
	Greeting string `json:"greeting"`
	Length   int    `json:"length"`
}

// TestWarm checks that a call after Warm allocates about as much as every
// later call does: what encoding/json learns of the types at the first call, Warm
// has done.
func TestWarm(t *testing.T) {
	h := &FakeHost{Args: []byte(`{"name":"Ada","tags":["x"],"count":2}`)}
	tool := func(a warmArgs) (warmResult, error) { return warmResult{"Hello, " + a.Name, len(a.Name)}, nil }
	Warm(tool)
	mallocs := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		before := m.Mallocs
		h.Run(func() { Handle(tool) })
		runtime.ReadMemStats(&m)
		return m.Mallocs - before
	}
	first, second := mallocs(), mallocs()
	// Slack for a pooled buffer a collection took between the two; without
	// Warm the first call makes about 8 times as many as the second.
	if first > second+second/2 {
		t.Errorf("the first call after Warm made %d allocations, the second %d: Warm left work to the first call", first, second)
	}
}

// TestWarmPanic checks that a MarshalJSON that panics on a zero value does
// not take Warm, and so the program's initialization, down with it.
func TestWarmPanic(t *testing.T) {
	Warm(func(struct{}) (panicky, error) { return panicky{}, nil })
}

type panicky struct{ p *int }

func (v panicky) MarshalJSON() ([]byte, error) { return []byte(strconv.Itoa(*v.p)), nil }

// TestWarmSyscall checks that a JSON method that makes a syscall other than
// Log does not reach the host while Warm runs: on WebAssembly, during
// _initialize, the host would trap the instance, which nothing recovers. At
// the call, it does.
func TestWarmSyscall(t *testing.T) {
	h := &FakeHost{}
	tool := func(struct{}) (stamped, error) { return stamped{}, nil }
	h.Run(func() { Warm(tool) })
	if len(h.Store) != 0 {
		t.Fatalf("store %v after Warm: a syscall reached the host", h.Store)
	}
	h.Run(func() { Handle(tool) })
	if string(h.Result) != `"stamped"` || string(h.Store["stamp"]) != "1" {
		t.Errorf("result %q, store %q after the call; want the method's syscall made", h.Result, h.Store)
	}
}

// stamped's MarshalJSON makes a syscall.
type stamped struct{}

func (stamped) MarshalJSON() ([]byte, error) {
	if err := Set("stamp", []byte("1")); err != nil {
		return nil, err
	}
	return []byte(`"stamped"`), nil
}
