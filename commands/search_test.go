package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
		"berm: warning: index: ../escape.jsonl: \"..\" escapes the index",
		"berm: warning: index: ghcr.io/acme/broken.jsonl:1: not JSON",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

// TestSearchHostileIndex: an index of 8 MiB of junk lines is searched
// (the bound it is past named, once, and the rest counted), and one past a
// bound of a clone says which, with what to do.
func TestSearchHostileIndex(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, files := searchIndex(t, searchReader)
	files["ghcr.io/acme/junk.jsonl"] = strings.Repeat("x\n", index.MaxFile/2)
	files["ghcr.io/acme/lines.jsonl"] = strings.Repeat("{junk\n", 200)
	indextest.Commit(t, dir, files)
	var stdout bytes.Buffer
	code, stderr := mainIn(t, t.TempDir(), &stdout, "search", "--index", dir, "read a file")
	if code != 0 || !strings.HasPrefix(strings.Split(stdout.String(), "\n")[1], searchReader.Pinned()) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr)
	}
	want := "berm: warning: index: ghcr.io/acme/junk.jsonl: past the limit of 10000 lines a file: skipped\n" +
		"berm: warning: index: ghcr.io/acme/lines.jsonl:1: not JSON: invalid character 'j' looking for beginning of object key string: skipped\n"
	if !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "berm: warning: index: 196 more lines or files skipped\n") {
		t.Fatalf("stderr:\n%s\nwant it to start:\n%s", stderr, want)
	}

	files["docs/huge.bin"] = strings.Repeat("\x00", index.MaxObject+1)
	indextest.Commit(t, dir, files)
	code, stderr = mainIn(t, t.TempDir(), nil, "search", "--index", dir, "read a file")
	if code != 2 || !strings.Contains(stderr, "past the limit of 16 MiB an object") ||
		!strings.Contains(stderr, "berm: hint: the index holds more than berm reads") {
		t.Fatalf("an index past a bound of a clone: exit %d\n%s", code, stderr)
	}
}

// TestSearchSlowIndex: an index's server that accepts and never answers
// ends the search after the minimum rate's window of 20 s, naming the
// host and the bound, where it held it for ever.
func TestSearchSlowIndex(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // accepts, and never answers
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the requests
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(done)
		code, stderr = mainIn(t, t.TempDir(), nil, "search", "--index", srv.URL+"/idx", "read a file")
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("berm search still waiting after two minutes")
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	want := "berm: error: index " + srv.URL + "/idx: " + host + ": no answer in 20s (the minimum rate's window): index too slow\n" +
		"berm: hint: the index's server sends too little or nothing: try again later, or clone it with git (git clone " + srv.URL + "/idx DIR) and search the clone with --index DIR\n"
	if code != 2 || stderr != want {
		t.Fatalf("exit %d\n%s\nwant exit 2 and:\n%s", code, stderr, want)
	}
}

// heldGit serves the repositories under a directory over git's smart HTTP
// with the git binary's own server, http-backend, holding each request for
// a list of references (for a pack, with pack) while shut, until the test
// ends or release: an index's server that trickles, or a slow one, as a
// search sees it.
type heldGit struct {
	*httptest.Server
	pack bool // set before shut
	shut atomic.Bool
	held atomic.Int64
	open chan struct{}
	once sync.Once
}

func serveHeldGit(t *testing.T, root string) *heldGit {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary to serve an index over HTTP with")
	}
	backend := &cgi.Handler{
		Path: git, Args: []string{"http-backend"},
		Env:        []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
		InheritEnv: []string{"PATH"},
		Logger:     log.New(io.Discard, "", 0),
		Stderr:     io.Discard,
	}
	g := &heldGit{open: make(chan struct{})}
	stop := make(chan struct{})
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.shut.Load() && strings.HasSuffix(r.URL.Path, "/info/refs") != g.pack {
			g.held.Add(1)
			select {
			case <-g.open:
			case <-stop:
				return
			case <-r.Context().Done():
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the requests
	return g
}

func (g *heldGit) release() { g.once.Do(func() { close(g.open) }) }

// ageClones makes every clone under root 3 hours old, as if fetched then.
func ageClones(t *testing.T, root string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, index.Dir, "*", "current"))
	if len(files) == 0 {
		t.Fatal("no clone to age")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur map[string]any
		if err := json.Unmarshal(b, &cur); err != nil {
			t.Fatal(err)
		}
		cur["fetched"] = time.Now().Add(-3 * time.Hour)
		if b, err = json.Marshal(cur); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// inTime runs f, failing the test if it has not returned after two
// minutes: a slow index held a search for up to 15 minutes a request.
func inTime(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: still waiting after two minutes", what)
	}
}

// TestSearchSlowRefresh: a clone past its age whose index's server holds
// the fetch (or trickles it) is searched after searchWait, stderr saying
// the fetch was stopped and the flag that waits for it, and nothing of the
// fetch is left; --refresh waits for the fetch.
func TestSearchSlowRefresh(t *testing.T) {
	t.Parallel()
	dir, files := searchIndex(t, searchReader)
	root := t.TempDir()
	srv := serveHeldGit(t, filepath.Dir(dir))
	url := srv.URL + "/" + filepath.Base(dir)
	if code, stderr := mainIn(t, root, nil, "search", "--index", url, "read a file"); code != 0 {
		t.Fatalf("first clone: exit %d\n%s", code, stderr)
	}
	ageClones(t, root)
	// A new commit, so that the fetch clones it: its pack held.
	indextest.Add(files, indextest.Entry("ghcr.io", "acme/newcomer", "hello", "Greets newcomers.", "Says hello."))
	indextest.Commit(t, dir, files)
	srv.pack = true
	srv.shut.Store(true)
	var stdout bytes.Buffer
	var code int
	var stderr string
	inTime(t, "a search of a clone", func() { code, stderr = mainIn(t, root, &stdout, "search", "--index", url, "read a file") })
	want := "berm: warning: index " + url + ": fetch stopped after 5s: index not fetched in time; searching the clone fetched 3 hours ago\n" +
		"berm: hint: berm search --refresh waits for the fetch (up to 15 minutes)\n"
	if code != 0 || !strings.HasPrefix(strings.Split(stdout.String(), "\n")[1], searchReader.Pinned()) || stderr != want {
		t.Fatalf("exit %d\n%s\n%s\nwant stderr:\n%s", code, stdout.String(), stderr, want)
	}
	// The search exits: the clone it stopped is removed, not left for
	// every search after to add another.
	if gens, _ := filepath.Glob(filepath.Join(root, index.Dir, "*", "g-*")); srv.held.Load() != 1 || len(gens) != 1 {
		t.Fatalf("%d fetches held, want 1; clones %v, want only the first", srv.held.Load(), gens)
	}
	// --refresh waits for the fetch.
	stdout.Reset()
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, stderr = mainIn(t, root, &stdout, "search", "--refresh", "--index", url, "--limit", "1", "greets newcomers")
	}()
	srv.release()
	inTime(t, "berm search --refresh", func() { <-done })
	if code != 0 || stderr != "" || !strings.Contains(stdout.String(), "acme/newcomer") {
		t.Fatalf("--refresh: exit %d\n%s\n%s", code, stdout.String(), stderr)
	}
}

// TestServeSearchSlowRefresh: under serve, searches of a clone past its age
// whose index's server holds the fetch answer from the clone after
// searchWait, with offline and fetching set, and a single fetch goes on:
// three berm_search calls at once, then berm search --server.
func TestServeSearchSlowRefresh(t *testing.T) {
	t.Parallel()
	dir, _ := searchIndex(t, searchReader)
	root := t.TempDir()
	srv := serveHeldGit(t, filepath.Dir(dir))
	url := srv.URL + "/" + filepath.Base(dir)
	if code, stderr := mainIn(t, root, nil, "config", "set", "index", url); code != 0 {
		t.Fatalf("config set: exit %d\n%s", code, stderr)
	}
	if code, stderr := mainIn(t, root, nil, "search", "read a file"); code != 0 {
		t.Fatalf("first clone: exit %d\n%s", code, stderr)
	}
	ageClones(t, root)
	srv.shut.Store(true)
	base := startHTTP(t, root, "--catalog")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	var wg sync.WaitGroup
	texts := make([]string, 3)
	for i := range texts {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "berm_search", Arguments: map[string]any{"query": "read a file"}})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Errorf("berm_search: %+v, %v", res, err)
				return
			}
			texts[i] = res.Content[0].(*mcp.TextContent).Text
		})
	}
	inTime(t, "three berm_search calls", wg.Wait)
	for _, text := range texts {
		var r struct {
			Offline  string
			Fetching bool
			Results  []searchResult
		}
		if err := json.Unmarshal([]byte(text), &r); err != nil || !r.Fetching || len(r.Results) == 0 || r.Results[0]["reference"] != searchReader.Reference ||
			!strings.HasPrefix(r.Offline, "index "+url+": still fetching after ") || !strings.HasSuffix(r.Offline, ": index not fetched in time") {
			t.Errorf("berm_search: %v\n%.400s", err, text)
		}
	}
	var stdout bytes.Buffer
	var code int
	var stderr string
	inTime(t, "berm search --server", func() { code, stderr = mainIn(t, t.TempDir(), &stdout, "search", "--server", base, "read a file") })
	if code != 0 || !strings.HasPrefix(strings.Split(stdout.String(), "\n")[1], searchReader.Pinned()) ||
		!strings.Contains(stderr, "berm: warning: index "+url+": still fetching after ") || !strings.Contains(stderr, "berm search --refresh waits for the fetch") {
		t.Errorf("berm search --server: exit %d\n%s\n%s", code, stdout.String(), stderr)
	}
	if held := srv.held.Load(); held != 1 {
		t.Errorf("%d fetches held, want the one still under way", held)
	}
}

func TestConfigCommand(t *testing.T) {
	t.Parallel()
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
