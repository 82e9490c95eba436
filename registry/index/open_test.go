package index_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// clock is a staleness clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// upstream makes an index repository of a few hundred generated programs
// plus extra, and returns its directory and file URL.
func upstream(t *testing.T, extra ...index.Entry) (string, string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 300)
	for _, e := range extra {
		indextest.Add(files, e)
	}
	indextest.Commit(t, dir, files)
	return dir, "file://" + filepath.ToSlash(dir), files
}

func references(hits []index.Hit) []string {
	var refs []string
	for _, h := range hits {
		refs = append(refs, h.Reference)
	}
	return refs
}

// Programs whose ranking a substring match gets wrong.
var (
	reader = indextest.Entry("ghcr.io", "acme/slurp", "get",
		"Gives a model the text of documents on the host.",
		"Reads the contents of a file at a path and returns them as text.")
	fileNamed = indextest.Entry("ghcr.io", "acme/file-utils", "stat",
		"Utilities.", "Returns the size and mode of a path.")
	cat = indextest.Entry("ghcr.io", "acme/cat", "run",
		"Prints what it is given.", "Echoes its input.")
	concat = indextest.Entry("ghcr.io", "acme/joiner", "join",
		"Concatenates lists; locates duplicates; categorizes them.", "Joins arrays end to end.")
)

func TestRanking(t *testing.T) {
	_, url, _ := upstream(t, reader, fileNamed, cat, concat)
	ix, err := index.Open(context.Background(), t.TempDir(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 304 {
		t.Fatalf("Len = %d, want 304", ix.Len())
	}
	for _, tc := range []struct {
		name, query string
		// first is the reference that must come first; absent must not
		// be found at all.
		first, absent string
	}{
		// Field weights and saturation: two words of a tool's description
		// over one word of a name.
		{"read a file", "read a file", reader.Reference, ""},
		// Stems: "reading" and "files" are "reads" and "file".
		{"stems", "reading files", reader.Reference, ""},
		// A word of the name alone; "concatenates", "locates" and
		// "categorizes" hold "cat" as a substring, not as a word.
		{"name only", "cat", cat.Reference, concat.Reference},
		// A generated program by its verb and object.
		{"generated", "compress pdf", "ghcr.io/gen41/pdf-compress-41:v1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := ix.Search(tc.query, 10)
			if err != nil {
				t.Fatal(err)
			}
			refs := references(hits)
			if len(refs) == 0 || refs[0] != tc.first {
				t.Fatalf("Search(%q) = %v, want %s first", tc.query, refs, tc.first)
			}
			for _, r := range refs {
				if r == tc.absent {
					t.Fatalf("Search(%q) found %s, which holds the word only inside others", tc.query, r)
				}
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Fatalf("scores out of order: %v", hits)
				}
			}
		})
	}
	if hits, _ := ix.Search("read a file", 0); len(hits) < 2 || references(hits)[1] == reader.Reference {
		t.Errorf("file-utils should follow: %v", references(hits))
	}
	if hits, _ := ix.Search("zebra the of", 10); len(hits) != 0 {
		t.Errorf("no match: %v", references(hits))
	}
	// The first MaxQueryTerms distinct terms are searched, no more.
	var long []string
	for i := range index.MaxQueryTerms {
		long = append(long, fmt.Sprintf("nosuchword%d", i))
	}
	if hits, _ := ix.Search(strings.Join(long, " ")+" cat", 10); len(hits) != 0 {
		t.Errorf("a term past MaxQueryTerms was searched: %v", references(hits))
	}
	if hits, _ := ix.Search(strings.Join(long[1:], " ")+" cat", 10); len(hits) == 0 {
		t.Errorf("the last of MaxQueryTerms terms was not searched")
	}
}

func TestNewestLineWins(t *testing.T) {
	v1 := indextest.Entry("ghcr.io", "acme/tool", "t", "Old words.", "Old.")
	v2 := v1
	v2.Digest = indextest.Digest("second")
	v2.Usage = "New words."
	v2.Tools = []index.Tool{{Name: "t", Description: "New."}}
	_, url, _ := upstream(t, v1, v2)
	ix, err := index.Open(context.Background(), t.TempDir(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ := ix.Search("old", 10); len(hits) != 0 {
		t.Fatalf("the older line was searched: %v", references(hits))
	}
	hits, _ := ix.Search("new words", 10)
	if len(hits) != 1 || hits[0].Digest != v2.Digest {
		t.Fatalf("Search = %+v, want v2's line", hits)
	}
}

func TestRefreshAndStaleness(t *testing.T) {
	dir, url, files := upstream(t)
	root := t.TempDir()
	clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	opts := &index.Options{Now: clk.Now}
	ctx := context.Background()
	ix, err := index.Open(ctx, root, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	first := ix.Commit

	added := indextest.Entry("ghcr.io", "acme/newcomer", "hello", "Greets newcomers warmly.", "Says hello.")
	indextest.Add(files, added)
	second := indextest.Commit(t, dir, files)

	find := func(ix *index.Index) bool {
		hits, err := ix.Search("newcomers", 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(hits) == 1
	}
	// Within DefaultMaxAge: the clone is searched as it is.
	clk.advance(index.DefaultMaxAge - time.Second)
	if ix, err = index.Open(ctx, root, url, opts); err != nil || ix.Commit != first || find(ix) {
		t.Fatalf("fresh clone: commit %s (want %s), err %v", ix.Commit, first, err)
	}
	// --refresh fetches whatever the age.
	if ix, err = index.Open(ctx, root, url, &index.Options{Now: clk.Now, Refresh: true}); err != nil || ix.Commit != second || !find(ix) {
		t.Fatalf("refresh: commit %s (want %s), err %v", ix.Commit, second, err)
	}
	// Past DefaultMaxAge a search fetches by itself.
	third := indextest.Commit(t, dir, indextest.Generate("ghcr.io", 10))
	clk.advance(index.DefaultMaxAge)
	if ix, err = index.Open(ctx, root, url, opts); err != nil || ix.Commit != third || find(ix) || ix.Len() != 10 {
		t.Fatalf("stale clone: commit %s (want %s), %d programs, err %v", ix.Commit, third, ix.Len(), err)
	}
	if !ix.Fetched.Equal(clk.Now()) {
		t.Errorf("Fetched = %v, want %v", ix.Fetched, clk.Now())
	}
	// Up to date: only the time is noted.
	clk.advance(index.DefaultMaxAge)
	if ix, err = index.Open(ctx, root, url, opts); err != nil || ix.Commit != third || !ix.Fetched.Equal(clk.Now()) {
		t.Fatalf("unchanged: commit %s, fetched %v, err %v", ix.Commit, ix.Fetched, err)
	}
	if ix.Offline != nil {
		t.Fatalf("Offline = %v", ix.Offline)
	}
}

func TestUnreachable(t *testing.T) {
	dir, url, _ := upstream(t, reader)
	root := t.TempDir()
	clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	if _, err := index.Open(ctx, root, url, &index.Options{Now: clk.Now}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	clk.advance(3 * time.Hour)
	ix, err := index.Open(ctx, root, url, &index.Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("Open of an unreachable index with a clone: %v", err)
	}
	if !errors.Is(ix.Offline, index.ErrUnreachable) {
		t.Fatalf("Offline = %v, want ErrUnreachable", ix.Offline)
	}
	if age := clk.Now().Sub(ix.Fetched); age != 3*time.Hour {
		t.Errorf("age = %v, want 3h", age)
	}
	if hits, _ := ix.Search("read a file", 1); len(hits) != 1 || hits[0].Reference != reader.Reference {
		t.Fatalf("the last clone was not searched: %v", references(hits))
	}
	// Never cloned: an error.
	if _, err := index.Open(ctx, t.TempDir(), url, nil); !errors.Is(err, index.ErrUnreachable) {
		t.Fatalf("Open with no clone = %v, want ErrUnreachable", err)
	}
}

// TestHostileIndex: what someone else's index holds that must not stop a
// search: a path that escapes, a corrupt line, an oversized line, a line
// in another program's file, a symlink.
func TestHostileIndex(t *testing.T) {
	dir, _, files := upstream(t, reader)
	good := indextest.Line(cat)
	files["../evil.jsonl"] = good
	files["ghcr.io/../../evil.jsonl"] = good
	files["ghcr.io/acme/corrupt.jsonl"] = "{\"reference\": \n" + indextest.Line(indextest.Entry("ghcr.io", "acme/corrupt", "fine", "Still listed.", "Fine."))
	files["ghcr.io/acme/big.jsonl"] = `{"usage":"` + strings.Repeat("x", index.MaxLine) + "\"}\n"
	files["ghcr.io/acme/liar.jsonl"] = indextest.Line(cat)
	files["README.md"] = "not a listing"
	indextest.Commit(t, dir, files)
	ix, err := index.Open(context.Background(), t.TempDir(), "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ix.Warnings {
		got = append(got, w.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"../evil.jsonl: \"..\" escapes the index",
		"ghcr.io/acme/corrupt.jsonl:1: not JSON",
		"ghcr.io/acme/big.jsonl:1: 65548 bytes, past the limit of 64 KiB a line: skipped",
		"ghcr.io/acme/liar.jsonl:1: reference \"ghcr.io/acme/cat:v1\" belongs in ghcr.io/acme/cat.jsonl",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings do not say %q:\n%s", want, all)
		}
	}
	if hits, _ := ix.Search("still listed", 1); len(hits) != 1 {
		t.Errorf("the good line after a corrupt one was skipped too")
	}
	if hits, _ := ix.Search("echoes", 10); len(hits) != 0 {
		t.Errorf("a line from an escaping path or another's file was listed: %v", references(hits))
	}
	if ix.Len() != 302 {
		t.Errorf("Len = %d, want 302", ix.Len())
	}
}

// TestRacingFirstClone: searches racing the first clone into one root all
// succeed, and within a process clone it once: a server's models
// searching at once would otherwise each clone and read the index.
func TestRacingFirstClone(t *testing.T) {
	_, url, _ := upstream(t, reader)
	root := t.TempDir()
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix, err := index.Open(context.Background(), root, url, nil)
			if err == nil {
				var hits []index.Hit
				hits, err = ix.Search("read a file", 1)
				if err == nil && (len(hits) != 1 || hits[0].Reference != reader.Reference) {
					err = errors.New("wrong hit")
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("search %d: %v", i, err)
		}
	}
	if gens, _ := filepath.Glob(filepath.Join(root, index.Dir, "*", "g-*")); len(gens) != 1 {
		t.Errorf("%d clones made, want 1: %v", len(gens), gens)
	}
}

func TestExpected(t *testing.T) {
	v2 := reader
	v2.Reference = "ghcr.io/acme/slurp:v2"
	v2.Digest = indextest.Digest("v2 manifest")
	v2.Layer = indextest.Digest("v2 layer")
	_, url, _ := upstream(t, reader, v2)
	root := t.TempDir()

	// Nothing cloned: nothing expected.
	if _, found, err := index.Expected(root, reader.Pinned(), ""); found || err != nil {
		t.Fatalf("Expected before a clone = %v, %v", found, err)
	}
	if _, err := index.Open(context.Background(), root, url, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ref, digest, layer string
		found                    bool
	}{
		{"pinned", reader.Pinned(), "", reader.Layer, true},
		{"apart", reader.Reference, reader.Digest, reader.Layer, true},
		{"older line", "ghcr.io/acme/slurp:v1@" + reader.Digest, "", reader.Layer, true},
		{"another tag, same digest", "ghcr.io/acme/slurp:latest@" + v2.Digest, "", v2.Layer, true},
		{"by digest alone", "ghcr.io/acme/slurp@" + v2.Digest, "", v2.Layer, true},
		{"unlisted digest", "ghcr.io/acme/slurp:v1@" + indextest.Digest("other"), "", "", false},
		{"no digest", "ghcr.io/acme/slurp:v1", "", "", false},
		{"unlisted program", "ghcr.io/acme/nope:v1@" + reader.Digest, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layer, found, err := index.Expected(root, tc.ref, tc.digest)
			if err != nil || found != tc.found || layer != tc.layer {
				t.Fatalf("Expected = %q, %v, %v; want %q, %v", layer, found, err, tc.layer, tc.found)
			}
		})
	}
	if err := index.Verify(root, reader.Pinned(), reader.Layer); err != nil {
		t.Errorf("Verify of the listed layer: %v", err)
	}
	if err := index.Verify(root, reader.Pinned(), v2.Layer); !errors.Is(err, index.ErrLayer) {
		t.Errorf("Verify of another layer = %v, want ErrLayer", err)
	}
	if err := index.Verify(root, "ghcr.io/acme/nope:v1@"+reader.Digest, v2.Layer); err != nil {
		t.Errorf("Verify of an unlisted reference: %v", err)
	}

	// A second index that disagrees on the same pinned reference.
	liar := reader
	liar.Layer = indextest.Digest("liar layer")
	_, url2, _ := upstream(t, liar)
	if _, err := index.Open(context.Background(), root, url2, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := index.Expected(root, reader.Pinned(), ""); !errors.Is(err, index.ErrConflict) {
		t.Errorf("Expected with two indexes disagreeing = %v, want ErrConflict", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/org/index":  "https://github.com/org/index",
		"https://github.com/org/index/": "https://github.com/org/index",
		"file:///srv/index/":            "file:///srv/index",
		"/srv/index":                    "file:///srv/index",
	} {
		if got, err := index.NormalizeURL(in); err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ssh://git@github.com/org/index", "git@github.com:org/index.git", "https://", "file://host/x"} {
		if _, err := index.NormalizeURL(in); !errors.Is(err, index.ErrURL) {
			t.Errorf("NormalizeURL(%q) = %v, want ErrURL", in, err)
		}
	}
}
