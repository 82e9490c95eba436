//go:build !wasip1

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// TestImage runs the committed image in the real runtime, over WASI and the
// host's mounts: a directory granted read-only at /data, another granted
// read-write at /out, and files beside them that are granted to nobody.
// What the tool's own check lets through (a symbolic link out, a write in a
// read-only grant) the host refuses.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 4 MB image")
	}
	base := t.TempDir()
	data, out := filepath.Join(base, "data"), filepath.Join(base, "out")
	for _, d := range []string{filepath.Join(data, "sub"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		"data/a.txt":     "from the grant\n",
		"data/sub/b.txt": "TODO: deeper\n",
		"secret.txt":     "TODO: not granted\n",
		"database/c":     "not granted either\n",
	} {
		p := filepath.Join(base, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Links out of the grant, absolute and relative: the tool sees paths
	// in /data, the host's mount refuses to follow them.
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(data, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.txt", filepath.Join(data, "rel")); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	image, err := os.ReadFile("files.wasm")
	if err != nil {
		t.Fatal(err)
	}
	grants := &sandbox.Grants{Dirs: []sandbox.Dir{{Host: data, Guest: "/data"}, {Host: out, Guest: "/out", Write: true}}}
	if _, err := rt.Deploy(ctx, "files", image, grants); err != nil {
		t.Fatal(err)
	}
	// A deployment that grants nothing, for the refusal that says so.
	if _, err := rt.Deploy(ctx, "nothing", image, nil); err != nil {
		t.Fatal(err)
	}

	outside := func(p string) string {
		return p + " is outside the directories this deployment grants (/data, /out): give a path in one of them"
	}
	for _, tc := range []struct {
		name, program, tool, args string
		result, failure           string
	}{
		{name: "read", tool: "read", args: `{"path":"/data/a.txt"}`, result: "from the grant\n"},
		{name: "read a relative path", tool: "read", args: `{"path":"sub/b.txt"}`, result: "TODO: deeper\n"},
		{name: "list the grants", tool: "list", args: `{}`, result: `{"path":"","entries":[{"name":"/data","type":"dir"},{"name":"/out","type":"dir"}]}`},
		{name: "list", tool: "list", args: `{"path":"/data"}`,
			result: `{"path":"/data","entries":[{"name":"a.txt","type":"file","size":15},{"name":"abs","type":"symlink"},{"name":"rel","type":"symlink"},{"name":"sub","type":"dir"}]}`},
		{name: "search", tool: "search", args: `{"path":"/data","text":"todo","ignore_case":true}`,
			result: `{"matches":[{"path":"/data/sub/b.txt","line":1,"text":"TODO: deeper"}],"files":2}`},
		{name: "an absolute host path", tool: "read", args: `{"path":"` + filepath.ToSlash(base) + `/secret.txt"}`, failure: outside(filepath.ToSlash(base) + "/secret.txt")},
		{name: "dot dot", tool: "read", args: `{"path":"/data/../secret.txt"}`, failure: outside("/data/../secret.txt")},
		{name: "dot dot from a relative path", tool: "read", args: `{"path":"../secret.txt"}`, failure: outside("../secret.txt")},
		{name: "the root", tool: "list", args: `{"path":"/"}`, failure: outside("/")},
		{name: "a name that starts like a grant", tool: "read", args: `{"path":"/database/c"}`, failure: outside("/database/c")},
		{name: "an absolute link out", tool: "read", args: `{"path":"/data/abs"}`,
			failure: "/data/abs: not permitted (a symbolic link out of the granted directory, or the host's permissions)"},
		{name: "a relative link out", tool: "read", args: `{"path":"/data/rel"}`,
			failure: "/data/rel: not permitted (a symbolic link out of the granted directory, or the host's permissions)"},
		{name: "a missing file", tool: "read", args: `{"path":"/data/nope"}`, failure: "/data/nope: no such file or directory: list its directory to see what is there"},
		{name: "a directory", tool: "read", args: `{"path":"/data/sub"}`, failure: "/data/sub is a directory: list it, or read a file in it"},
		{name: "write read-only", tool: "write", args: `{"path":"/data/new.txt","text":"x"}`,
			failure: "/data/new.txt: the directory is granted read-only: writing needs a read-write grant (--allow-dir HOST:GUEST:rw)"},
		{name: "replace read-only", tool: "write", args: `{"path":"/data/a.txt","text":"x"}`,
			failure: "/data/a.txt: the directory is granted read-only: writing needs a read-write grant (--allow-dir HOST:GUEST:rw)"},
		{name: "write read-write", tool: "write", args: `{"path":"/out/new.txt","text":"written"}`, result: "wrote 7 bytes to /out/new.txt"},
		{name: "read it back", tool: "read", args: `{"path":"/out/new.txt"}`, result: "written"},
		{name: "append", tool: "write", args: `{"path":"/out/new.txt","text":"!","append":true}`, result: "appended 1 bytes to /out/new.txt"},
		{name: "write through dot dot", tool: "write", args: `{"path":"/out/../escaped","text":"x"}`, failure: outside("/out/../escaped")},
		{name: "nothing granted", program: "nothing", tool: "read", args: `{"path":"/data/a.txt"}`,
			failure: "this deployment grants no directory: there are no files to reach (berm deploy --allow-dir HOST:GUEST grants one)"},
		{name: "nothing granted lists nothing", program: "nothing", tool: "list", args: `{}`, result: `{"path":"","entries":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			program := tc.program
			if program == "" {
				program = "files"
			}
			o, err := rt.Call(ctx, program, tc.tool, []byte(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if string(o.Result) != tc.result || string(o.Failure) != tc.failure {
				t.Errorf("%s %s = %q, failure %q\nwant %q, failure %q", tc.tool, tc.args, o.Result, o.Failure, tc.result, tc.failure)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(out, "new.txt")); err != nil || string(b) != "written!" {
		t.Errorf("out/new.txt holds %q (%v), want the writes", b, err)
	}
	for _, p := range []string{filepath.Join(data, "new.txt"), filepath.Join(base, "escaped")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, "a.txt")); string(b) != "from the grant\n" {
		t.Errorf("a read-only file was changed: %q", b)
	}
	// What list returns decodes as listResult: the wire format is the
	// native one.
	o, _ := rt.Call(ctx, "files", "list", []byte(`{"path":"/out"}`))
	var got listResult
	if err := json.Unmarshal(o.Result, &got); err != nil || !reflect.DeepEqual(got, listResult{Path: "/out", Entries: []entry{{Name: "new.txt", Type: "file", Size: 8}}}) {
		t.Errorf("list /out = %s (%v)", o.Result, err)
	}
}
