//go:build !wasip1

package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
)

// TestImage runs the committed image in the real runtime, over the binary's
// own syscalls and a store in a temporary root: the notes outlive each call
// and a new runtime, the host refuses arguments against the schemas berm
// build derived, and a program that is not notes sees none of its data.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 3.5 MB image")
	}
	ctx := context.Background()
	root := t.TempDir()
	st, err := store.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	image, err := os.ReadFile("notes.wasm")
	if err != nil {
		t.Fatal(err)
	}
	start := func() *runtime.Runtime {
		t.Helper()
		rt, err := runtime.New(ctx, runtime.Config{
			Syscalls:     host.Syscalls(st),
			Imports:      []runtime.HostModule{host.WASI()},
			ModuleConfig: host.ModuleConfig(),
			CacheDir:     st.CacheDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close(ctx) })
		if _, err := rt.Deploy(ctx, "notes", image, nil); err != nil {
			t.Fatal(err)
		}
		return rt
	}
	call := func(rt *runtime.Runtime, program, tool, args string) (runtime.Outcome, error) {
		t.Helper()
		return rt.Call(ctx, program, tool, []byte(args))
	}
	result := func(rt *runtime.Runtime, tool, args string) string {
		t.Helper()
		out, err := call(rt, "notes", tool, args)
		if err != nil || out.Failed {
			t.Fatalf("%s %s: %v, failure %q", tool, args, err, out.Failure)
		}
		return string(out.Result)
	}

	rt := start()
	begin := time.Now()
	if got := result(rt, "add", `{"title":"Milk","text":"two litres","tags":["shop"]}`); got != `{"id":1,"notes":1}` {
		t.Errorf("add = %s", got)
	}
	t.Logf("one call of add: %v", time.Since(begin))
	result(rt, "add", `{"title":"Call Ada","text":"about the report\nbefore Friday"}`)
	got := result(rt, "get", `{"id":2}`)
	if !regexp.MustCompile(`^\{"id":2,"title":"Call Ada","text":"about the report\\nbefore Friday","tags":\[\],"created":"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ"\}$`).MatchString(got) {
		t.Errorf("get = %s", got)
	}

	// Another runtime over the same root: the notes are the store's.
	rt = start()
	begin = time.Now()
	if got, want := result(rt, "search", `{"query":"FRIDAY"}`), `{"notes":[{"id":2,"title":"Call Ada","tags":[],"line":"before Friday"}]}`; got != want {
		t.Errorf("search = %s, want %s", got, want)
	}
	t.Logf("one call of search: %v", time.Since(begin))
	if got, want := result(rt, "delete", `{"id":1}`), `{"id":1,"title":"Milk","notes":1}`; got != want {
		t.Errorf("delete = %s, want %s", got, want)
	}
	if got, want := result(rt, "list", `{}`), `{"notes":[{"id":2,"title":"Call Ada","tags":[]}]}`; got != want {
		t.Errorf("list = %s, want %s", got, want)
	}
	if _, ok, _ := st.Get(t.Context(), "notes", []byte("note/1")); ok {
		t.Error("delete left note/1 in the store")
	}

	// The program's own failure.
	out, err := call(rt, "notes", "get", `{"id":1}`)
	if err != nil || !out.Failed || string(out.Failure) != "no note 1: list or search gives the ids of the notes there are" {
		t.Errorf("get of a deleted note: %v, %q, %q", err, out.Result, out.Failure)
	}
	// Arguments against the derived schemas are refused before it runs.
	for _, args := range []string{`{}`, `{"title":"x","tags":"shop"}`, `{"title":"x","colour":"red"}`} {
		if _, err := call(rt, "notes", "add", args); !errors.Is(err, runtime.ErrArguments) {
			t.Errorf("add %s: %v, want the host's refusal of the arguments", args, err)
		}
	}
	if _, err := call(rt, "notes", "get", `{"id":"2"}`); !errors.Is(err, runtime.ErrArguments) {
		t.Errorf(`get {"id":"2"}: %v, want the host's refusal of the arguments`, err)
	}

	// The same image under another name has data of its own: none.
	if _, err := rt.Deploy(ctx, "other", image, nil); err != nil {
		t.Fatal(err)
	}
	out, err = call(rt, "other", "list", `{}`)
	if err != nil || string(out.Result) != `{"notes":[]}` {
		t.Errorf("list as another program: %v, %q, %q", err, out.Result, out.Failure)
	}

	// A result reaches the model as the program wrote it: &, < and > are
	// not escaped (\u0026, \u003c, \u003e) as in HTML.
	if _, err := call(rt, "other", "add", `{"title":"Fish & Chips <hot>"}`); err != nil {
		t.Fatal(err)
	}
	out, err = call(rt, "other", "list", `{}`)
	if want := `{"notes":[{"id":1,"title":"Fish & Chips <hot>","tags":[]}]}`; err != nil || string(out.Result) != want {
		t.Errorf("list of a title with & < > = %s, %v; want %s", out.Result, err, want)
	}
}
