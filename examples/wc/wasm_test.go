package wc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// TestNative builds src/wc_test.c, the tools under sdk/c's fake host, with the
// system's C compiler and runs it.
func TestNative(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc: the native test of wc.c needs a C compiler (Debian's gcc or clang)")
	}
	bin := filepath.Join(t.TempDir(), "wc_test")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", "../../sdk/c",
		"-o", bin, "src/wc_test.c").CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("wc_test: %v\n%s", err, out)
	}
}

func deploy(tb testing.TB) *runtime.Runtime {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(ctx) })
	image, err := os.ReadFile("wc.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "wc", image, nil); err != nil {
		tb.Fatal(err)
	}
	return rt
}

// TestImage runs the committed image in the real runtime, with no host
// syscalls at all: the core ABI is all it needs.
func TestImage(t *testing.T) {
	ctx := context.Background()
	image, err := os.ReadFile("wc.wasm")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 2 || len(m.Syscalls) != 0 {
		t.Errorf("manifest: %d tools, syscalls %v", len(m.Tools), m.Syscalls)
	}
	rt := deploy(t)
	for _, c := range []struct{ tool, args, want, failure string }{
		{"count", `{"text":"one two  three\nfour\n\u00e9t\u00e9"}`, `{"lines":3,"words":5,"chars":23,"bytes":25}`, ""},
		{"count", `{"text":""}`, `{"lines":0,"words":0,"chars":0,"bytes":0}`, ""},
		{"search", `{"text":"Alpha\nbeta ALPHA\r\ngamma\nalphabet","query":"alpha","ignore_case":true,"max":2}`,
			`{"matches":[{"line":1,"text":"Alpha"},{"line":2,"text":"beta ALPHA"}],"count":3,"truncated":true}`, ""},
		{"search", `{"text":"a \"b\"\tc","query":"b"}`, `{"matches":[{"line":1,"text":"a \"b\"\tc"}],"count":1,"truncated":false}`, ""},
		// The C SDK's strings keep &, < and > as they are: a model reads them.
		{"search", `{"text":"Fish & Chips <b>","query":"&"}`, `{"matches":[{"line":1,"text":"Fish & Chips <b>"}],"count":1,"truncated":false}`, ""},
		// A large text grows the memory past the module's first pages.
		{"count", `{"text":"` + strings.Repeat("word ", 200000) + `"}`, `{"lines":1,"words":200000,"chars":1000000,"bytes":1000000}`, ""},
	} {
		out, err := rt.Call(ctx, "wc", c.tool, []byte(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if string(out.Result) != c.want || string(out.Failure) != c.failure {
			t.Errorf("%s %.60s: result %s, failure %q; want %s, %q", c.tool, c.args, out.Result, out.Failure, c.want, c.failure)
		}
	}
	// The schema refuses what the tool would otherwise fail on.
	if _, err := rt.Call(ctx, "wc", "search", []byte(`{"text":"x","query":""}`)); err == nil {
		t.Error("search with an empty query: no error; want the host's refusal of the arguments")
	}
}

// BenchmarkCall is one call of wc.count through the runtime: arguments
// checked, a fresh instance, arguments in, result out, closed.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	rt := deploy(b)
	args := []byte(`{"text":"the quick brown fox\njumps over the lazy dog\n"}`)
	b.ReportAllocs()
	for b.Loop() {
		out, err := rt.Call(ctx, "wc", "count", args)
		if err != nil || out.Failed {
			b.Fatal(err, string(out.Failure))
		}
	}
}
