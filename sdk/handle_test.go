//go:build !wasip1

package berm

import (
	"errors"
	"testing"
)

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
			name:    "error",
			tool:    func() { Handle(func(point) (string, error) { return "ignored", errors.New("x: out of range") }) },
			failure: "x: out of range",
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
