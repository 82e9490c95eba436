//go:build !wasip1

package berm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/sdk/describe"
)

// withRegistry runs f on an empty registry and restores the one before.
func withRegistry(t *testing.T, f func()) {
	t.Helper()
	saved := registry
	registry.usage, registry.syscalls, registry.calls, registry.tools = "", nil, nil, nil
	defer func() { registry = saved }()
	f()
}

type unit string

func (unit) Enum() []any { return []any{"celsius", "fahrenheit"} }

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children"`
}

type describeArgs struct {
	City    string            `json:"city" jsonschema:"the city"`
	Unit    unit              `json:"unit,omitempty"`
	When    *time.Time        `json:"when,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
	Skipped func()            `json:"-"`
	hidden  int
	embedded
}

type embedded struct {
	Depth [2]int8 `json:"depth"`
}

func TestRegistry(t *testing.T) {
	withRegistry(t, func() {
		Usage("**t** tests.")
		Syscalls("berm.get", "berm.set", "berm.get")
		Calls("a.b")
		Tool("greet", "Greets.", func(a struct{ Name string }) (string, error) { return "Hello, " + a.Name, nil })
		Tool("weather", "Weather.", func(describeArgs) (string, error) { return "", nil })
		Tool("tree", "A tree.", func(node) (string, error) { return "", nil })
		Tool("greet", "Greets again.", func(a struct{ Name string }) (string, error) { return "Hi, " + a.Name, nil })

		h := &FakeHost{Args: []byte(`{"Name":"Ada"}`)}
		h.RunTool("greet")
		if string(h.Result) != "Hi, Ada" {
			t.Errorf("greet = %q, want the second registration's %q", h.Result, "Hi, Ada")
		}
		h.RunTool("nope")
		if want := "no tool nope is registered in this program"; h.Failure != want {
			t.Errorf("unknown tool: failure %q, want %q", h.Failure, want)
		}

		var b bytes.Buffer
		if err := Describe(&b); err != nil {
			t.Fatal(err)
		}
		var d describe.Program
		if err := json.Unmarshal(b.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if d.Usage != "**t** tests." || strings.Join(d.Syscalls, ",") != "berm.get,berm.set" || strings.Join(d.Calls, ",") != "a.b" {
			t.Errorf("usage %q, syscalls %q, calls %q", d.Usage, d.Syscalls, d.Calls)
		}
		if len(d.Tools) != 3 || d.Tools[0].Name != "greet" || d.Tools[0].Description != "Greets again." {
			t.Fatalf("tools = %+v", d.Tools)
		}
		w := d.Tools[1].Args
		var names []string
		for _, f := range w.Fields {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, ","); got != "City,Unit,When,Raw,Tags,Depth" {
			t.Errorf("fields = %s", got)
		}
		byName := func(n string) *describe.Type {
			for _, f := range w.Fields {
				if f.Name == n {
					return f.Type
				}
			}
			return nil
		}
		if u := byName("Unit"); u.Kind != "string" || len(u.Enum) != 2 {
			t.Errorf("unit = %+v", u)
		}
		if when := byName("When"); when.Kind != "ptr" || when.Elem.As != "string" {
			t.Errorf("when = %+v", when)
		}
		if raw := byName("Raw"); raw.As != "any" {
			t.Errorf("raw = %+v", raw)
		}
		if depth := byName("Depth"); depth.Kind != "array" || depth.Len != 2 || depth.Elem.Kind != "int8" {
			t.Errorf("depth = %+v", depth)
		}
		if c := d.Tools[2].Args.Fields[1].Type.Elem.Elem; c.Kind != "cycle" {
			t.Errorf("tree's children = %+v, want a cycle", c)
		}
	})
}
