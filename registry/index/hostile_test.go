package index_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// junkFiles adds n files of 8 MiB of junk lines each to files, the
// issue's hostile index: "x\n" over and over (then "y\n", ...), each
// line a warning before the bounds.
func junkFiles(files map[string]string, n int) {
	for i := range n {
		files[fmt.Sprintf("ghcr.io/acme/junk%d.jsonl", i)] = strings.Repeat(string(rune('x'+i))+"\n", index.MaxFile/2)
	}
}

// junkIndex is an index of a few good programs, the reader among them,
// and n files of junk.
func junkIndex(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 20)
	indextest.Add(files, reader)
	junkFiles(files, n)
	indextest.Commit(t, dir, files)
	return "file://" + filepath.ToSlash(dir)
}

// TestJunkFile: a file of 8 MiB of junk lines is skipped whole at
// MaxLines, with one warning naming the bound, and counts once; the rest
// of the index is searched.
func TestJunkFile(t *testing.T) {
	t.Parallel()
	ix, err := index.Open(context.Background(), t.TempDir(), junkIndex(t, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ix.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		"ghcr.io/acme/junk0.jsonl: past the limit of 10000 lines a file: skipped",
		"ghcr.io/acme/junk1.jsonl: past the limit of 10000 lines a file: skipped",
		"ghcr.io/acme/junk2.jsonl: past the limit of 10000 lines a file: skipped",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || ix.Skipped != 3 {
		t.Fatalf("warnings (%d skipped):\n%s\nwant:\n%s", ix.Skipped, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if hits, _ := ix.Search("read a file", 1); len(hits) != 1 || hits[0].Reference != reader.Reference || ix.Len() != 21 {
		t.Fatalf("the good programs: %v of %d", references(hits), ix.Len())
	}
}

// TestWarningsKept: an index keeps MaxWarnings warnings and counts the
// rest, half for whole files and half for lines, so that one file of junk
// lines does not hide another past a bound.
func TestWarningsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 20)
	// 5,000 junk lines and one good one, in a file before the others.
	files["ghcr.io/aaa/lines.jsonl"] = strings.Repeat("{junk\n", 5000) +
		indextest.Line(indextest.Entry("ghcr.io", "aaa/lines", "t", "Survives its junk.", "Fine."))
	files["ghcr.io/aab/big.jsonl"] = strings.Repeat("x", index.MaxFile+1)
	for i := range 79 {
		files[fmt.Sprintf("ghcr.io/zzz/Bad%d.jsonl", i)] = "{}\n" // no reference's path
	}
	indextest.Commit(t, dir, files)
	ix, err := index.Open(context.Background(), t.TempDir(), "file://"+filepath.ToSlash(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Skipped != 5080 || len(ix.Warnings) != index.MaxWarnings {
		t.Fatalf("%d skipped, %d warnings kept; want 5080 and %d", ix.Skipped, len(ix.Warnings), index.MaxWarnings)
	}
	if w := ix.Warnings[0].String(); w != "ghcr.io/aab/big.jsonl: 8388609 bytes, past the limit of 8 MiB a file: skipped" {
		t.Errorf("first warning = %q", w)
	}
	if w := ix.Warnings[1].String(); !strings.HasPrefix(w, "ghcr.io/zzz/Bad0.jsonl: not the path of a reference") {
		t.Errorf("second warning = %q", w)
	}
	if w := ix.Warnings[index.MaxWarnings/2].String(); !strings.HasPrefix(w, "ghcr.io/aaa/lines.jsonl:1: not JSON") {
		t.Errorf("first line's warning = %q", w)
	}
	if hits, _ := ix.Search("survives", 1); len(hits) != 1 {
		t.Errorf("the good line after 5,000 junk ones was not listed")
	}
}

// TestIndexBounds: past MaxFiles, MaxRead or MaxHeld the rest of the index
// is skipped, with one warning, first, that names the bound and counts the
// files after it.
func TestIndexBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	indextest.Commit(t, dir, indextest.Generate("ghcr.io", 30))
	url := "file://" + filepath.ToSlash(dir)
	for _, tc := range []struct {
		name       string
		opts       *index.Options
		listed     int
		warning    string
		skipped    int
		nowarnings bool
	}{
		{"files", index.WithLimits(index.Options{}, 10, index.MaxRead, index.MaxHeld), 10,
			"past the limit of 10 files an index, as are the 19 files after it: skipped", 20, false},
		{"read", index.WithLimits(index.Options{}, index.MaxFiles, 4<<10, index.MaxHeld), 7,
			"past the limit of 4 KiB read an index, as are the 22 files after it: skipped", 23, false},
		{"held", index.WithLimits(index.Options{}, index.MaxFiles, index.MaxRead, 8<<10), 0,
			"past the limit of 8 KiB held in reading an index (its words and pins), as are the", 0, false},
		{"none", nil, 30, "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := index.Open(context.Background(), t.TempDir(), url, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.nowarnings {
				if len(ix.Warnings) != 0 || ix.Skipped != 0 || ix.Len() != tc.listed {
					t.Fatalf("%d listed, warnings %v", ix.Len(), ix.Warnings)
				}
				return
			}
			if len(ix.Warnings) != 1 || !strings.Contains(ix.Warnings[0].String(), tc.warning) {
				t.Fatalf("warnings = %v, want one saying %q", ix.Warnings, tc.warning)
			}
			if tc.listed > 0 && (ix.Len() != tc.listed || ix.Skipped != tc.skipped) {
				t.Fatalf("%d listed, %d skipped; want %d and %d", ix.Len(), ix.Skipped, tc.listed, tc.skipped)
			}
			if ix.Len()+ix.Skipped != 30 {
				t.Fatalf("%d listed and %d skipped of 30", ix.Len(), ix.Skipped)
			}
		})
	}
}

// TestCloneBounds: a clone past MaxObjects, MaxClone or MaxObject fails,
// naming the bound (ErrBound, not ErrUnreachable), before go-git reads
// what is past it; with a clone already made, that clone is searched.
func TestCloneBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 30)
	indextest.Add(files, reader)
	indextest.Commit(t, dir, files)
	url := "file://" + filepath.ToSlash(dir)
	for _, tc := range []struct {
		name, want string
		opts       *index.Options
	}{
		{"objects", "clone: 65 objects, past the limit of 10 objects", index.WithCloneLimits(index.Options{}, index.MaxClone, index.MaxObject, 4*index.MaxObject, 10)},
		{"pack", "clone: a pack past the limit of 4 KiB", index.WithCloneLimits(index.Options{}, 4<<10, index.MaxObject, 4*index.MaxObject, index.MaxObjects)},
		{"object", "clone: an object of ", index.WithCloneLimits(index.Options{}, index.MaxClone, 100, 400, index.MaxObjects)},
		{"chain", "clone: a delta whose bases come to ", index.WithCloneLimits(index.Options{}, index.MaxClone, index.MaxObject, 600, index.MaxObjects)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := index.Open(context.Background(), t.TempDir(), url, tc.opts)
			if !errors.Is(err, index.ErrBound) || errors.Is(err, index.ErrUnreachable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want ErrBound saying %q", err, tc.want)
			}
		})
	}

	// A blob past MaxObject: go-git's server in process would read it
	// whole; it is refused as it is served.
	root := t.TempDir()
	if _, err := index.Open(context.Background(), root, url, nil); err != nil {
		t.Fatal(err)
	}
	files["docs/huge.bin"] = strings.Repeat("\x00", index.MaxObject+1)
	indextest.Commit(t, dir, files)
	ix, err := index.Open(context.Background(), root, url, &index.Options{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ix.Offline, index.ErrBound) || !strings.Contains(ix.Offline.Error(), "16777217 bytes, past the limit of 16 MiB an object") {
		t.Fatalf("Offline = %v, want the object past MaxObject named", ix.Offline)
	}
	if hits, _ := ix.Search("read a file", 1); len(hits) != 1 {
		t.Fatalf("the last clone was not searched")
	}
}

// TestRefsBound: a server whose list of references never ends is read up
// to maxRefs, and the clone fails naming the bound.
func TestRefsBound(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info/refs") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		var body bytes.Buffer
		pkt := func(s string) { fmt.Fprintf(&body, "%04x%s", len(s)+4, s) }
		hash := strings.Repeat("1", 40)
		pkt("# service=git-upload-pack\n")
		body.WriteString("0000")
		pkt(hash + " HEAD\x00symref=HEAD:refs/heads/main\n")
		for i := 0; sent.Load() < index.MaxRefs+8<<20; i++ {
			for j := 0; j < 1000; j++ {
				pkt(fmt.Sprintf("%s refs/heads/b%d-%d\n", hash, i, j))
			}
			n, err := w.Write(body.Bytes())
			sent.Add(int64(n))
			if err != nil {
				return
			}
			body.Reset()
		}
	}))
	defer ts.Close()
	_, err := index.Open(context.Background(), t.TempDir(), ts.URL+"/index", nil)
	if !errors.Is(err, index.ErrBound) || !strings.Contains(err.Error(), "a list of references past the limit of 32 MiB") {
		t.Fatalf("Open = %v, want ErrBound naming the list of references", err)
	}
}

// TestGenerationsBounded: an index whose head changes at every search
// leaves at most three clones, however young.
func TestGenerationsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 5)
	url := "file://" + filepath.ToSlash(dir)
	root := t.TempDir()
	for i := range 6 {
		indextest.Add(files, indextest.Entry("ghcr.io", fmt.Sprintf("acme/new%d", i), "t", "New.", "New."))
		indextest.Commit(t, dir, files)
		if _, err := index.Open(context.Background(), root, url, &index.Options{Refresh: true}); err != nil {
			t.Fatal(err)
		}
	}
	gens, _ := filepath.Glob(filepath.Join(root, index.Dir, "*", "g-*"))
	if len(gens) != 3 {
		t.Fatalf("%d generations kept, want 3: %v", len(gens), gens)
	}
	if _, err := os.Stat(filepath.Join(root, index.Dir)); err != nil {
		t.Fatal(err)
	}
}

// TestPublishRefusesPastMaxLines: a line that would take its file past
// MaxLines is refused, as readers would skip the file whole.
func TestPublishRefusesPastMaxLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	e := indextest.Entry("ghcr.io", "acme/many", "t", "Many versions.", "Many.")
	p, err := index.Path(e.Reference)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(strings.Repeat("\n", index.MaxLines)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = index.Publish(dir, e, index.Author{Name: "a", Email: "a@example.com"})
	if !errors.Is(err, index.ErrInvalid) || !strings.Contains(err.Error(), "10001 lines with this one, past the limit of 10000 lines a file: remove old lines first") {
		t.Fatalf("Publish = %v, want ErrInvalid naming MaxLines", err)
	}
}

// TestLineGrowsWhenListed: a line under MaxLine whose bytes are not UTF-8
// comes out of the decoder three times longer (U+FFFD), past MaxLine when
// listed again. Its file is skipped with a warning; the index still opens
// (that line made Open fail, "index unreachable").
func TestLineGrowsWhenListed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 5)
	line := indextest.Line(indextest.Entry("ghcr.io", "acme/grow", "t", "x", "d"))
	line = strings.Replace(line, `"usage":"x"`, `"usage":"`+strings.Repeat("\xff", 30000)+`"`, 1)
	if len(line) > index.MaxLine {
		t.Fatalf("the line is %d bytes, want it under MaxLine", len(line))
	}
	files["ghcr.io/acme/grow.jsonl"] = line
	indextest.Commit(t, dir, files)
	ix, err := index.Open(context.Background(), t.TempDir(), "file://"+filepath.ToSlash(dir), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(ix.Warnings) != 1 || !strings.Contains(ix.Warnings[0].String(), "ghcr.io/acme/grow.jsonl") || ix.Len() != 5 {
		t.Fatalf("%d programs, warnings %v; want the 5 good ones and one warning naming the file", ix.Len(), ix.Warnings)
	}
}
