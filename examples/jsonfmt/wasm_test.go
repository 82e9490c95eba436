package jsonfmt_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// TestNative runs the crate's own tests (src/lib.rs, under sdk/rust's
// FakeHost) natively, with rustc alone: the SDK as an rlib, then the
// program's test harness against it.
func TestNative(t *testing.T) {
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		t.Skip("no rustc: the native test of jsonfmt needs one (Debian's rustc)")
	}
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	rlib := filepath.Join(dir, "libberm.rlib")
	run(rustc, "--edition", "2021", "--crate-type", "rlib", "--crate-name", "berm", "-o", rlib, "../../sdk/rust/src/lib.rs")
	bin := filepath.Join(dir, "jsonfmt_test")
	run(rustc, "--edition", "2021", "--test", "--crate-name", "jsonfmt", "--extern", "berm="+rlib, "-o", bin, "src/lib.rs")
	run(bin)
}

func deploy(tb testing.TB) *runtime.Runtime {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(ctx) })
	image, err := os.ReadFile("jsonfmt.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "jsonfmt", image, nil); err != nil {
		tb.Fatal(err)
	}
	return rt
}

func args(tb testing.TB, kv ...any) []byte {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestImage runs the committed image in the real runtime, with no host
// syscalls: the core ABI is all it needs.
func TestImage(t *testing.T) {
	ctx := context.Background()
	rt := deploy(t)
	doc := `{"b":[1,2.50,{"d":null,"c":"\u00e9\ud83d\ude00"}],"a":true}`
	for _, c := range []struct {
		tool    string
		args    []byte
		want    string
		failure string
	}{
		{"format", args(t, "json", doc), "{\n  \"b\": [\n    1,\n    2.50,\n    {\n      \"d\": null,\n      \"c\": \"é😀\"\n    }\n  ],\n  \"a\": true\n}\n", ""},
		{"format", args(t, "json", doc, "indent", 0, "sort_keys", true), `{"a":true,"b":[1,2.50,{"c":"é😀","d":null}]}`, ""},
		{"format", args(t, "json", `{"a":[1,}`), "", "json: invalid JSON at byte 8: not a value"},
		{"query", args(t, "json", doc, "path", "b[-1].c"), `"é😀"`, ""},
		// The Rust SDK's strings keep &, < and > as they are: a model reads them.
		{"format", args(t, "json", `{"t":"Fish \u0026 Chips <b>"}`, "indent", 0), `{"t":"Fish & Chips <b>"}`, ""},
		{"query", args(t, "json", doc, "path", "b[3]"), "", "b[3]: out of range (the array has 3 elements)"},
		// Deep nesting is refused, not a stack overflow.
		{"format", args(t, "json", strings.Repeat("[", 300)+strings.Repeat("]", 300)), "", "json: invalid JSON at byte 256: nested too deep"},
		// A large document grows the memory past the module's first pages.
		{"query", args(t, "json", "["+strings.Repeat(`"abcdefgh",`, 80000)+`"last"]`, "path", "[-1]"), `"last"`, ""},
	} {
		out, err := rt.Call(ctx, "jsonfmt", c.tool, c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if string(out.Result) != c.want || string(out.Failure) != c.failure {
			t.Errorf("%s %.60s: result %q, failure %q; want %q, %q", c.tool, c.args, out.Result, out.Failure, c.want, c.failure)
		}
	}
}

// BenchmarkCall is one call of jsonfmt.format through the runtime:
// arguments checked, a fresh instance, arguments in, result out, closed.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	rt := deploy(b)
	a := args(b, "json", `{"name":"berm","tags":["wasm","mcp"],"n":3}`)
	b.ReportAllocs()
	for b.Loop() {
		out, err := rt.Call(ctx, "jsonfmt", "format", a)
		if err != nil || out.Failed {
			b.Fatal(err, string(out.Failure))
		}
	}
}
