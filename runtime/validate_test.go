package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// costlyParameters recurses through allOf with two branches: without a
// bound, checking 22 nested arrays against it took 8 s of CPU, before the
// call started and past any deadline.
const costlyParameters = `{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},
	"$defs":{"n":{"allOf":[{"items":{"$ref":"#/$defs/n"}},{"items":{"$ref":"#/$defs/n"}}]}}}`

// dagParameters blow up without recursion: each of 40 $defs refers to the
// next twice, 2^40 subschemas whatever the arguments.
func dagParameters() string {
	var defs []string
	for i := range 40 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d40":{"minProperties":0}`)
	return `{"type":"object","$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
}

// withParameters is fixture file's image, with the parameters of its tool
// named tool replaced.
func withParameters(t *testing.T, file, manifestFile, tool, parameters string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, manifestFile), &m); err != nil {
		t.Fatal(err)
	}
	for _, tl := range m["tools"].([]any) {
		if tl := tl.(map[string]any); tl["name"] == tool {
			tl["parameters"] = json.RawMessage(parameters)
		}
	}
	payload, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	image, err := manifest.Attach(fixture(t, file), payload)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// TestCallChecksArguments: the check of a call's arguments, top-level or
// through berm.call, is bounded in steps and meets the call's deadline and
// cancel; nothing runs when it refuses.
func TestCallChecksArguments(t *testing.T) {
	t.Parallel()
	// The default deadline: a refusal in steps does not depend on how fast
	// the machine takes them.
	rt := newRuntime(t, nil)
	ctx := context.Background()
	if _, err := rt.Deploy(ctx, "costly", withParameters(t, "echo.wasm", "echo.abi.json", "echo", costlyParameters), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "nest", withParameters(t, "nest.wasm", "nest.abi.json", "echo", dagParameters()), nil); err != nil {
		t.Fatal(err)
	}
	nested := func(depth int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	}
	// Padded, a check may take so many steps that its context ends it first.
	padded := func(depth int) []byte {
		return []byte(`{"pad":"` + strings.Repeat("x", 1<<19) + `","a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	}

	t.Run("costly", func(t *testing.T) {
		t.Parallel()
		out, err := rt.Call(ctx, "costly", "echo", nested(22))
		if !errors.Is(err, runtime.ErrArguments) || !errors.Is(err, manifest.ErrCostly) || errors.Is(err, runtime.ErrDeadline) {
			t.Fatalf("Call = %+v, %v; want ErrArguments and manifest.ErrCostly", out, err)
		}
		// The same tool serves what it can check.
		if out, err := rt.Call(ctx, "costly", "echo", nested(3)); err != nil || string(out.Result) != string(nested(3)) {
			t.Errorf("Call(3 levels) = %q, %v; want the arguments back", out.Result, err)
		}
	})
	t.Run("nested", func(t *testing.T) {
		t.Parallel()
		// nest.call_echo calls nest.echo with {"via":"nest"}, whose check is
		// refused to the caller (bits 63 and 62), which returns refused:...
		out, err := rt.Call(ctx, "nest", "call_echo", []byte(`{}`))
		if err != nil || !strings.HasPrefix(string(out.Result), "refused:") || !strings.Contains(string(out.Result), manifest.ErrCostly.Error()) {
			t.Fatalf("Call(call_echo) = %q, %v; want refused:... too costly to check", out.Result, err)
		}
	})
	// Without a bound, the check of padded(24) took minutes of CPU, past
	// every deadline; now it stops at the first look at its context, so
	// the bound on the time is many times what it takes.
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		start := time.Now()
		_, err := rt.Call(past, "costly", "echo", padded(24))
		if !errors.Is(err, runtime.ErrDeadline) || errors.Is(err, runtime.ErrArguments) {
			t.Fatalf("Call = %v, want ErrDeadline", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Call took %v past its deadline", d)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		start := time.Now()
		_, err := rt.Call(canceled, "costly", "echo", padded(24))
		if !errors.Is(err, context.Canceled) || errors.Is(err, runtime.ErrArguments) {
			t.Fatalf("Call = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Call took %v after its cancel", d)
		}
	})
}

// TestCallBoundsUncountedWork: what a check's steps cannot see is bounded
// before the check, at the call's default deadline. Numbers past the bounds
// are the caller's error, naming the field: [1e999999,...] under
// uniqueItems took 2.5 s at a deadline of 200 ms, and 300 of them 6.8 s. A
// pattern's match is charged by its program's size: a{1000}b took 8.2 s on
// 1 MiB. A pattern whose program is out of all proportion to its text is
// refused at deploy: 2,002 of (a|aa|aaa|aaaa){1000}N, 64 KiB, compiled to
// 2 GB for each of a tool's checkers.
func TestCallBoundsUncountedWork(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	ctx := context.Background()
	parameters := `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true},
		"n":{"type":"integer"},"s":{"type":"string","pattern":"a{1000}b"}}}`
	if _, err := rt.Deploy(ctx, "bounds", withParameters(t, "echo.wasm", "echo.abi.json", "echo", parameters), nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, args, field string
	}{
		{"uniqueItems", `{"tags":[1e999999,1e999998,1e999997]}`, "/tags/0"},
		{"integer", `{"n":` + strings.Repeat("7", 2000) + `}`, "/n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := rt.Call(ctx, "bounds", "echo", []byte(tt.args))
			if !errors.Is(err, runtime.ErrArguments) || !errors.Is(err, manifest.ErrNumber) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Call(%.40s) = %+v, %v; want ErrArguments and manifest.ErrNumber naming %s", tt.args, out, err, tt.field)
			}
		})
	}
	t.Run("within", func(t *testing.T) {
		t.Parallel()
		args := `{"n":-9223372036854775808,"tags":["a","b"],"s":"x` + strings.Repeat("a", 1000) + `b"}`
		if out, err := rt.Call(ctx, "bounds", "echo", []byte(args)); err != nil || string(out.Result) != args {
			t.Errorf("Call = %q, %v; want the arguments back", out.Result, err)
		}
	})
	t.Run("pattern", func(t *testing.T) {
		t.Parallel()
		_, err := rt.Call(ctx, "bounds", "echo", []byte(`{"s":"`+strings.Repeat("a", 128<<10)+`"}`))
		if !errors.Is(err, runtime.ErrArguments) || !errors.Is(err, manifest.ErrCostly) {
			t.Fatalf("Call = %.200v, want ErrArguments and manifest.ErrCostly", err)
		}
	})
	t.Run("deploy", func(t *testing.T) {
		t.Parallel()
		big := `{"type":"object","patternProperties":{"(a|aa|aaa|aaaa){1000}N":true}}`
		_, err := rt.Deploy(ctx, "big", withParameters(t, "echo.wasm", "echo.abi.json", "echo", big), nil)
		if !errors.Is(err, manifest.ErrSchema) {
			t.Fatalf("Deploy = %v, want manifest.ErrSchema", err)
		}
	})
}
