package commands_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// searchIndex makes an index repository of a few hundred generated
// programs plus extra, and returns its directory and files.
func searchIndex(t *testing.T, extra ...index.Entry) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 300)
	for _, e := range extra {
		indextest.Add(files, e)
	}
	indextest.Commit(t, dir, files)
	return dir, files
}

var searchReader = indextest.Entry("ghcr.io", "acme/slurp", "get",
	"Gives a model the text of documents on the host.\n\nMore here.",
	"Reads the contents of a file at a path and returns them as text.")

// searchResult is an element of search --json, decoded loosely so that a
// missing field shows.
type searchResult map[string]any

func TestSearchCommand(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, _ := searchIndex(t, searchReader)
	root := t.TempDir()
	var stdout bytes.Buffer
	code, stderr := mainIn(t, root, &stdout, "search", "--index", dir, "reading", "files")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines := strings.Split(stdout.String(), "\n")
	if !strings.HasPrefix(lines[0], "REFERENCE ") || !strings.Contains(lines[0], " TOOLS ") || !strings.HasSuffix(lines[0], " PUBLISHER") {
		t.Fatalf("header = %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], searchReader.Pinned()+" ") || !strings.Contains(lines[1], "indextest <indextest@example.com> (claimed)") {
		t.Fatalf("first row = %q, want %s pinned, publisher claimed", lines[1], searchReader.Reference)
	}
	if lines[2] != "    Gives a model the text of documents on the host." {
		t.Fatalf("usage line = %q", lines[2])
	}
	if len(lines) != 2*10+2 {
		t.Fatalf("%d lines, want 10 programs of two lines, a header and the end:\n%s", len(lines), stdout.String())
	}

	stdout.Reset()
	if code, stderr := mainIn(t, root, &stdout, "search", "--index", dir, "--json", "--limit", "3", "read a file"); code != 0 {
		t.Fatalf("--json: exit %d\n%s", code, stderr)
	}
	var results []searchResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 3 {
		t.Fatalf("--json: %v, %d results\n%s", err, len(results), stdout.String())
	}
	for _, field := range []string{"reference", "digest", "layer", "publisher", "published", "usage", "tools", "syscalls", "calls", "score", "deployed"} {
		if _, ok := results[0][field]; !ok {
			t.Errorf("--json lacks %q: %v", field, results[0])
		}
	}
	if results[0]["reference"] != searchReader.Reference || results[0]["deployed"] != nil {
		t.Errorf("first result = %v", results[0])
	}
	if results[0]["score"].(float64) < results[1]["score"].(float64) {
		t.Errorf("not best first: %v", results)
	}
}

func TestSearchNoMatchAndNoIndex(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, _ := searchIndex(t)
	root := t.TempDir()
	var stdout bytes.Buffer
	code, stderr := mainIn(t, root, &stdout, "search", "--index", dir, "zebra")
	if code != 0 || stdout.Len() != 0 || !strings.Contains(stderr, `berm: no program in file://`+filepath.ToSlash(dir)+` matches "zebra"`) {
		t.Fatalf("no match: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr)
	}
	code, stderr = mainIn(t, t.TempDir(), nil, "search", "zebra")
	if code != 2 || !strings.Contains(stderr, "berm: error: no index configured") || !strings.Contains(stderr, "berm config set index URL") {
		t.Fatalf("no index: exit %d\n%s", code, stderr)
	}
}

// TestSearchIndexPrecedence: --index over BERM_INDEX over config.toml.
func TestSearchIndexPrecedence(t *testing.T) {
	a, _ := searchIndex(t, indextest.Entry("ghcr.io", "acme/alpha", "a", "Alpha marker.", "A."))
	b, _ := searchIndex(t, indextest.Entry("ghcr.io", "acme/beta", "b", "Beta marker.", "B."))
	c, _ := searchIndex(t, indextest.Entry("ghcr.io", "acme/gamma", "c", "Gamma marker.", "C."))
	root := t.TempDir()
	if code, stderr := mainIn(t, root, nil, "config", "set", "index", a); code != 0 {
		t.Fatalf("config set: exit %d\n%s", code, stderr)
	}
	first := func(args ...string) string {
		t.Helper()
		var stdout bytes.Buffer
		code, stderr := mainIn(t, root, &stdout, append([]string{"search", "--json", "--limit", "1"}, append(args, "marker")...)...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var results []searchResult
		if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 1 {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		return results[0]["reference"].(string)
	}
	t.Setenv("BERM_INDEX", "")
	if got := first(); got != "ghcr.io/acme/alpha:v1" {
		t.Errorf("config.toml's index: %s", got)
	}
	t.Setenv("BERM_INDEX", b)
	if got := first(); got != "ghcr.io/acme/beta:v1" {
		t.Errorf("BERM_INDEX: %s", got)
	}
	if got := first("--index", c); got != "ghcr.io/acme/gamma:v1" {
		t.Errorf("--index: %s", got)
	}
}

// TestSearchMarksDeployed: a program deployed here, by its layer, is marked
// with the name it is deployed under.
func TestSearchMarksDeployed(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	listed := indextest.Entry("ghcr.io", "acme/echoer", "echo", "Echoes what it is given.", "Echoes its input.")
	listed.Layer = sha256File(t, fixturePath("echo.wasm"))
	dir, _ := searchIndex(t, listed)
	root := t.TempDir()
	if code, stderr := mainIn(t, root, nil, "deploy", "myecho", fixturePath("echo.wasm")); code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, stderr)
	}
	var stdout bytes.Buffer
	if code, stderr := mainIn(t, root, &stdout, "search", "--index", dir, "--limit", "1", "echoes"); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout.String(), "    [deployed as myecho] Echoes what it is given.") {
		t.Fatalf("not marked:\n%s", stdout.String())
	}
	stdout.Reset()
	mainIn(t, root, &stdout, "search", "--index", dir, "--json", "--limit", "1", "echoes")
	var results []searchResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 1 || results[0]["deployed"] != "myecho" {
		t.Fatalf("--json: %v %s", err, stdout.String())
	}
}

// TestSearchUnreachable: after a first clone, an index that cannot be
// reached is searched from the clone, and stderr says so with its age.
func TestSearchUnreachable(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, _ := searchIndex(t, searchReader)
	root := t.TempDir()
	if code, stderr := mainIn(t, root, nil, "search", "--index", dir, "read a file"); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	code, stderr := mainIn(t, root, &stdout, "search", "--refresh", "--index", dir, "read a file")
	if code != 0 || !strings.HasPrefix(strings.Split(stdout.String(), "\n")[1], searchReader.Pinned()) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr)
	}
	if !strings.Contains(stderr, "berm: warning: index file://") || !strings.Contains(stderr, "index unreachable") ||
		!strings.Contains(stderr, "searching the clone fetched under a minute ago") {
		t.Fatalf("stderr does not say the clone was searched:\n%s", stderr)
	}
	// Never cloned, and unreachable: an error.
	if code, stderr := mainIn(t, t.TempDir(), nil, "search", "--index", dir, "read a file"); code != 2 || !strings.Contains(stderr, "index unreachable") {
		t.Fatalf("never cloned: exit %d\n%s", code, stderr)
	}
}

// TestSearchWarnsOfBadLines: skipped lines are named by file and line, and
// the search goes on.
func TestSearchWarnsOfBadLines(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, files := searchIndex(t, searchReader)
	files["ghcr.io/acme/broken.jsonl"] = "{oops\n"
	files["../escape.jsonl"] = indextest.Line(searchReader)
	indextest.Commit(t, dir, files)
	code, stderr := mainIn(t, t.TempDir(), nil, "search", "--index", dir, "read a file")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"berm: warning: index: ../escape.jsonl: skipped: \"..\" escapes the index",
		"berm: warning: index: ghcr.io/acme/broken.jsonl:1: skipped: not JSON",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

func TestConfigCommand(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	var stdout bytes.Buffer
	if code, stderr := mainIn(t, root, &stdout, "config", "get", "index"); code != 0 || stdout.Len() != 0 {
		t.Fatalf("get unset: exit %d, %q\n%s", code, stdout.String(), stderr)
	}
	if _, err := os.Stat(root); err == nil {
		t.Fatalf("config get created the root")
	}
	local := t.TempDir()
	if code, stderr := mainIn(t, root, nil, "config", "set", "index", local); code != 0 {
		t.Fatalf("set: exit %d\n%s", code, stderr)
	}
	stdout.Reset()
	if mainIn(t, root, &stdout, "config", "get", "index"); stdout.String() != "file://"+filepath.ToSlash(local)+"\n" {
		t.Fatalf("get = %q", stdout.String())
	}
	stdout.Reset()
	if mainIn(t, root, &stdout, "config", "get"); !strings.Contains(stdout.String(), "index = 'file://") {
		t.Fatalf("get all = %q", stdout.String())
	}
	for name, args := range map[string][]string{
		"unknown key": {"config", "set", "colour", "blue"},
		"ssh":         {"config", "set", "index", "git@github.com:org/index.git"},
		"no verb":     {"config"},
		"bad verb":    {"config", "unset", "index"},
	} {
		if code, stderr := mainIn(t, root, nil, args...); code != 2 || !strings.Contains(stderr, "berm: error: ") {
			t.Errorf("%s: exit %d\n%s", name, code, stderr)
		}
	}
	// An empty value removes the key; a key a later berm wrote stays.
	if err := os.WriteFile(filepath.Join(root, "config.toml"), []byte("index = 'file:///x'\nlater = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stderr := mainIn(t, root, nil, "config", "set", "index", ""); code != 0 {
		t.Fatalf("set empty: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "config.toml")); string(b) != "later = 3\n" {
		t.Fatalf("config.toml = %q", b)
	}
}
