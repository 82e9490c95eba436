//go:build !wasip1

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	berm "github.com/berm-dev/berm/sdk"
)

// call runs tool through berm.Handle on a FakeHost, as the image's export
// does: the arguments decoded from JSON, the result or the failure.
func call[A, R any](tool func(A) (R, error), args string) (result, failure string) {
	h := &berm.FakeHost{Args: []byte(args)}
	h.Run(func() { berm.Handle(tool) })
	return string(h.Result), h.Failure
}

// tree makes a directory of files (a name ending in / is a directory) and
// returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// js quotes s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestRead(t *testing.T) {
	dir := tree(t, map[string]string{
		"a.txt":     "héllo\n",
		"empty":     "",
		"sub/b.md":  "# b\n",
		"big":       strings.Repeat("x", maxRead+1),
		"limit":     strings.Repeat("x", maxRead),
		"binary":    "\xff\xfe\x00",
		"emptydir/": "",
	})
	// A sibling whose name starts with the grant's: Go's os on wasip1
	// would take /database for a path in a grant of /data.
	sibling := dir + "x"
	if err := os.WriteFile(sibling, []byte("not granted"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sibling) })
	f := files{roots: []string{dir}}
	for _, tc := range []struct {
		name, path      string
		result, failure string
	}{
		{name: "file", path: dir + "/a.txt", result: "héllo\n"},
		{name: "in a subdirectory", path: dir + "/sub/b.md", result: "# b\n"},
		{name: "empty", path: dir + "/empty", result: ""},
		{name: "at the limit", path: dir + "/limit", result: strings.Repeat("x", maxRead)},
		{name: "over the limit", path: dir + "/big",
			failure: dir + "/big is 1048577 bytes, over the 1048576 (1 MiB) that read returns: search finds the lines you need in it"},
		{name: "not text", path: dir + "/binary", failure: dir + "/binary is not UTF-8 text (3 bytes): read returns text only"},
		{name: "missing", path: dir + "/nope", failure: dir + "/nope: no such file or directory: list its directory to see what is there"},
		{name: "a directory", path: dir + "/emptydir", failure: dir + "/emptydir is a directory: list it, or read a file in it"},
		{name: "the grant itself", path: dir, failure: dir + " is a directory: list it, or read a file in it"},
		{name: "dot dot out", path: dir + "/../" + filepath.Base(sibling),
			failure: dir + "/../" + filepath.Base(sibling) + " is outside the directories this deployment grants (" + dir + "): give a path in one of them"},
		{name: "dot dot back in", path: dir + "/sub/../a.txt", result: "héllo\n"},
		{name: "a prefix of the name", path: sibling,
			failure: sibling + " is outside the directories this deployment grants (" + dir + "): give a path in one of them"},
		{name: "elsewhere", path: "/etc/passwd",
			failure: "/etc/passwd is outside the directories this deployment grants (" + dir + "): give a path in one of them"},
		{name: "empty path", path: "", failure: "path is empty: give a path in a granted directory (" + dir + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, failure := call(f.read, `{"path":`+js(tc.path)+`}`)
			if result != tc.result || failure != tc.failure {
				t.Errorf("read %q = %.40q, failure %q\nwant %.40q, failure %q", tc.path, result, failure, tc.result, tc.failure)
			}
		})
	}
	// Nothing granted: nothing to read, and the message says how to grant.
	_, failure := call(files{}.read, `{"path":`+js(dir+"/a.txt")+`}`)
	if want := "this deployment grants no directory: there are no files to reach (berm deploy --allow-dir HOST:GUEST grants one)"; failure != want {
		t.Errorf("read with no grant: failure %q, want %q", failure, want)
	}
}

func TestReadNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/dev/null", filepath.Join(dir, "null")); err != nil {
		t.Skip(err)
	}
	// Natively the link is followed (the sandbox is the host's job); the
	// device is refused without being opened.
	_, failure := call(files{roots: []string{dir}}.read, `{"path":`+js(dir+"/null")+`}`)
	if !strings.HasPrefix(failure, dir+"/null is not a regular file") {
		t.Errorf("read of a device: failure %q", failure)
	}
}

func TestList(t *testing.T) {
	dir := tree(t, map[string]string{"b.txt": "12345", "a/": "", "c/d.txt": "x"})
	if err := os.Symlink("b.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	f := files{roots: []string{dir, other}}
	for _, tc := range []struct {
		name, args string
		want       listResult
		failure    string
	}{
		{name: "the grants", args: `{}`, want: listResult{Entries: []entry{{Name: dir, Type: "dir"}, {Name: other, Type: "dir"}}}},
		{name: "a directory", args: `{"path":` + js(dir) + `}`, want: listResult{Path: dir, Entries: []entry{
			{Name: "a", Type: "dir"}, {Name: "b.txt", Type: "file", Size: 5}, {Name: "c", Type: "dir"}, {Name: "link", Type: "symlink"},
		}}},
		{name: "empty", args: `{"path":` + js(other) + `}`, want: listResult{Path: other, Entries: []entry{}}},
		{name: "a file", args: `{"path":` + js(dir+"/b.txt") + `}`, failure: dir + "/b.txt is not a directory (5 bytes): read it instead"},
		{name: "missing", args: `{"path":` + js(dir+"/nope") + `}`, failure: dir + "/nope: no such file or directory: list its directory to see what is there"},
		{name: "outside", args: `{"path":"/"}`, failure: "/ is outside the directories this deployment grants (" + dir + ", " + other + "): give a path in one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, failure := call(f.list, tc.args)
			if failure != tc.failure {
				t.Fatalf("failure %q, want %q", failure, tc.failure)
			}
			if tc.failure != "" {
				return
			}
			var got listResult
			if err := json.Unmarshal([]byte(result), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestListBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range maxEntries + 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := files{roots: []string{dir}}.list(listArgs{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != maxEntries || !r.Truncated {
		t.Errorf("%d entries, truncated %v; want %d, true", len(r.Entries), r.Truncated, maxEntries)
	}
}

func TestSearch(t *testing.T) {
	dir := tree(t, map[string]string{
		"a.txt":        "one TODO\ntwo\nthree todo\r\n",
		"sub/b.md":     "- [ ] TODO: milk\n",
		"sub/deep/c":   "nothing here\n",
		"binary.bin":   "TODO\x00\x01",
		"long.txt":     strings.Repeat("é", 200) + " TODO\n",
		"huge-line":    strings.Repeat("x", maxLine+1) + "\nTODO after a line too long\n",
		"crlf/win.txt": "TODO\r\n",
	})
	f := files{roots: []string{dir}}
	for _, tc := range []struct {
		name, args string
		want       searchResult
		failure    string
	}{
		{name: "a directory", args: `{"path":` + js(dir) + `,"text":"TODO"}`, want: searchResult{Files: 6, Matches: []match{
			{Path: dir + "/a.txt", Line: 1, Text: "one TODO"},
			{Path: dir + "/crlf/win.txt", Line: 1, Text: "TODO"},
			{Path: dir + "/long.txt", Line: 1, Text: strings.Repeat("é", 150)},
			{Path: dir + "/sub/b.md", Line: 1, Text: "- [ ] TODO: milk"},
		}}},
		{name: "ignoring case", args: `{"path":` + js(dir+"/a.txt") + `,"text":"todo","ignore_case":true}`, want: searchResult{Files: 1, Matches: []match{
			{Path: dir + "/a.txt", Line: 1, Text: "one TODO"},
			{Path: dir + "/a.txt", Line: 3, Text: "three todo"},
		}}},
		{name: "bounded", args: `{"path":` + js(dir) + `,"text":"TODO","max_results":1}`, want: searchResult{Files: 2, Truncated: true, Stopped: "found 1 matches", Matches: []match{
			{Path: dir + "/a.txt", Line: 1, Text: "one TODO"},
		}}},
		{name: "no match", args: `{"path":` + js(dir) + `,"text":"absent"}`, want: searchResult{Files: 6, Matches: []match{}}},
		{name: "empty text", args: `{"path":` + js(dir) + `,"text":""}`, failure: `text is empty: say what to look for, as in {"path": "/notes", "text": "TODO"}`},
		{name: "two lines", args: `{"path":` + js(dir) + `,"text":"a\nb"}`, failure: "text holds a line break: search looks within one line"},
		{name: "missing", args: `{"path":` + js(dir+"/nope") + `,"text":"x"}`, failure: dir + "/nope: no such file or directory: list its directory to see what is there"},
		{name: "outside", args: `{"path":"/etc","text":"x"}`, failure: "/etc is outside the directories this deployment grants (" + dir + "): give a path in one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, failure := call(f.search, tc.args)
			if failure != tc.failure {
				t.Fatalf("failure %q, want %q", failure, tc.failure)
			}
			if tc.failure != "" {
				return
			}
			var got searchResult
			if err := json.Unmarshal([]byte(result), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	dir := tree(t, map[string]string{"old.txt": "old text", "sub/": ""})
	f := files{roots: []string{dir}}
	for _, tc := range []struct {
		name, args      string
		result, failure string
		file, text      string
	}{
		{name: "new", args: `{"path":` + js(dir+"/sub/new.txt") + `,"text":"héllo"}`,
			result: "wrote 6 bytes to " + dir + "/sub/new.txt", file: "sub/new.txt", text: "héllo"},
		{name: "replace", args: `{"path":` + js(dir+"/old.txt") + `,"text":"new"}`,
			result: "wrote 3 bytes to " + dir + "/old.txt", file: "old.txt", text: "new"},
		{name: "append", args: `{"path":` + js(dir+"/old.txt") + `,"text":"er","append":true}`,
			result: "appended 2 bytes to " + dir + "/old.txt", file: "old.txt", text: "newer"},
		{name: "no such directory", args: `{"path":` + js(dir+"/nope/x") + `,"text":"x"}`,
			failure: dir + "/nope/x: no such file or directory: list its directory to see what is there"},
		{name: "a directory", args: `{"path":` + js(dir+"/sub") + `,"text":"x"}`, failure: dir + "/sub is a directory"},
		{name: "outside", args: `{"path":` + js(dir+"/../escaped") + `,"text":"x"}`,
			failure: dir + "/../escaped is outside the directories this deployment grants (" + dir + "): give a path in one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, failure := call(f.write, tc.args)
			if result != tc.result || failure != tc.failure {
				t.Fatalf("write = %q, failure %q; want %q, %q", result, failure, tc.result, tc.failure)
			}
			if tc.file == "" {
				return
			}
			if b, err := os.ReadFile(filepath.Join(dir, tc.file)); err != nil || string(b) != tc.text {
				t.Errorf("%s holds %q (%v), want %q", tc.file, b, err, tc.text)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escaped")); err == nil {
		t.Error("write made a file outside the grant")
	}
}
