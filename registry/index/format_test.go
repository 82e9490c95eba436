package index

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPath(t *testing.T) {
	for _, tc := range []struct {
		ref, want string
		err       error
	}{
		{"ghcr.io/org/example:v1", "ghcr.io/org/example.jsonl", nil},
		{"ghcr.io/org/example", "ghcr.io/org/example.jsonl", nil},
		{"ghcr.io/org/sub/example@sha256:" + strings.Repeat("a", 64), "ghcr.io/org/sub/example.jsonl", nil},
		{"localhost:5000/demo/echo:v1", "localhost_5000/demo/echo.jsonl", nil},
		{"GHCR.io/org/example:v1", "ghcr.io/org/example.jsonl", nil},
		{"127.0.0.1:5000/a_b/c__d:v1", "127.0.0.1_5000/a_b/c__d.jsonl", nil},
		{"[::1]:5000/demo/echo:v1", "", ErrReference},
		{"ghcr.io/org/con:v1", "", ErrReference},
		{"ghcr.io/nul.x/y:v1", "", ErrReference},
		{"example", "", ErrReference},
		{"ghcr.io/Org/x", "", ErrReference},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := Path(tc.ref)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("Path(%q) = %q, %v; want %q, %v", tc.ref, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	for _, p := range []string{
		"ghcr.io/org/x.jsonl",
		"localhost_5000/demo/echo.jsonl",
	} {
		if err := checkPath(p); err != nil {
			t.Errorf("checkPath(%q) = %v", p, err)
		}
	}
	for _, p := range []string{
		"../evil.jsonl",
		"ghcr.io/../../etc/x.jsonl",
		"/etc/x.jsonl",
		`C:\x\y.jsonl`,
		"C:/x/y.jsonl",
		"ghcr.io/./x.jsonl",
		"ghcr.io//x.jsonl",
		"x.jsonl",
		"GHCR.io/org/x.jsonl",
		"ghcr.io/org/x y.jsonl",
		"ghcr.io/org/con.jsonl",
	} {
		if err := checkPath(p); !errors.Is(err, ErrPath) {
			t.Errorf("checkPath(%q) = %v, want ErrPath", p, err)
		}
	}
}

func TestParse(t *testing.T) {
	good := func(tag, digestSeed string) string {
		e := Entry{
			Reference: "ghcr.io/org/x:" + tag,
			Digest:    "sha256:" + strings.Repeat(digestSeed, 64),
			Layer:     "sha256:" + strings.Repeat("f", 64),
			Published: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Tools:     []Tool{{Name: "t"}},
		}
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	data := good("v1", "a") +
		"{not json\n" +
		"\n" +
		`{"reference":"ghcr.io/other/y:v1","digest":"sha256:` + strings.Repeat("a", 64) + `","layer":"sha256:` + strings.Repeat("b", 64) + `","published":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"reference":"ghcr.io/org/x:v2","digest":"sha256:short","layer":"sha256:` + strings.Repeat("b", 64) + `","published":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"reference":"ghcr.io/org/x:v2","digest":"sha256:` + strings.Repeat("a", 64) + `","layer":"sha256:` + strings.Repeat("b", 64) + `"}` + "\n" +
		`{"reference":"ghcr.io/org/x","digest":"sha256:` + strings.Repeat("a", 64) + `","layer":"sha256:` + strings.Repeat("b", 64) + `","published":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"usage":"` + strings.Repeat("x", MaxLine) + `"}` + "\n" +
		good("v1", "c") // no newline at the end
	entries, warnings := Parse("ghcr.io/org/x.jsonl", []byte(data))
	if len(entries) != 2 || entries[0].Digest == entries[1].Digest || entries[1].Digest != "sha256:"+strings.Repeat("c", 64) {
		t.Fatalf("entries = %+v, want the two good lines in order", entries)
	}
	wantLines := []string{
		"ghcr.io/org/x.jsonl:2: not JSON",
		"ghcr.io/org/x.jsonl:4: reference \"ghcr.io/other/y:v1\" belongs in ghcr.io/other/y.jsonl",
		"ghcr.io/org/x.jsonl:5: digest",
		"ghcr.io/org/x.jsonl:6: published: missing",
		"ghcr.io/org/x.jsonl:7: reference \"ghcr.io/org/x\": no tag",
		"ghcr.io/org/x.jsonl:8: 65548 bytes, past the limit of 64 KiB a line: skipped",
	}
	if len(warnings) != len(wantLines) {
		t.Fatalf("warnings = %v, want %d", warnings, len(wantLines))
	}
	for i, w := range warnings {
		if !strings.HasPrefix(w.String(), wantLines[i]) {
			t.Errorf("warning %d = %q, want it to start %q", i, w, wantLines[i])
		}
	}

	if entries, warnings := Parse("../x.jsonl", []byte(good("v1", "a"))); len(entries) != 0 || len(warnings) != 1 || warnings[0].Line != 0 {
		t.Errorf("an escaping path: %v, %v; want one warning for the file", entries, warnings)
	}
	if entries, warnings := Parse("ghcr.io/org/x.jsonl", make([]byte, MaxFile+1)); len(entries) != 0 || len(warnings) != 1 || warnings[0].String() != "ghcr.io/org/x.jsonl: 8388609 bytes, past the limit of 8 MiB a file: skipped" {
		t.Errorf("an oversized file: %v, %v; want one warning", entries, warnings)
	}
}

func TestMarshalRefusesOversizedLine(t *testing.T) {
	e := Entry{Reference: "ghcr.io/org/x:v1", Usage: strings.Repeat("x", MaxLine)}
	if _, err := e.Marshal(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Marshal = %v, want ErrInvalid", err)
	}
}

func TestTerms(t *testing.T) {
	got := strings.Join(terms("Reads the contents of a FILE; reading files, read_file file-reader", nil, nil), " ")
	want := "read content file read file read file file reader"
	if got != want {
		t.Fatalf("terms = %q, want %q", got, want)
	}
}

// TestSnapshotFile: a corpus written to a snapshot file ranks as it did in
// memory, and a file of another version is refused.
func TestSnapshotFile(t *testing.T) {
	b := newBuilder(&bytes.Buffer{})
	for i, words := range []string{"read a file", "write a file", "convert images", "read images", "zebra"} {
		e := Entry{
			Reference: "ghcr.io/org/p" + string(rune('a'+i)) + ":v1",
			Digest:    "sha256:" + strings.Repeat("a", 64), Layer: "sha256:" + strings.Repeat("b", 64),
			Published: time.Unix(0, 0), Usage: words, Tools: []Tool{{Name: "t", Description: words + " quickly"}},
		}
		if err := b.add(&e, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := b.corpus()
	path := t.TempDir() + "/snapshot"
	if err := writeSnapshot(path, &snapshot{Version: snapshotVersion, Commit: "c", Corpus: *c, Warnings: []Warning{{File: "f", Line: 2, Err: "x"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := openSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.len() != 5 || d.h.Commit != "c" || len(d.h.Warnings) != 1 {
		t.Fatalf("header = %+v", d.h)
	}
	for _, q := range []string{"read a file", "images", "quickly", "zebra", "nothing"} {
		mem, err1 := search(c, q, 0)
		disk, err2 := search(d, q, 0)
		if err1 != nil || err2 != nil || len(mem) != len(disk) {
			t.Fatalf("%q: %v %v, %d and %d hits", q, err1, err2, len(mem), len(disk))
		}
		for i := range mem {
			if mem[i].Reference != disk[i].Reference || mem[i].Score != disk[i].Score {
				t.Fatalf("%q: hit %d: %v in memory, %v on disk", q, i, mem[i], disk[i])
			}
		}
	}
	if err := os.WriteFile(path, []byte("bermix00........"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openSnapshot(path); !errors.Is(err, errVersion) {
		t.Fatalf("another version: %v", err)
	}
}

// FuzzParse: whatever a file of an index holds, Parse neither panics nor
// gives more than a line's worth of results, and every entry it gives is
// one the file may hold, within MaxLine.
func FuzzParse(f *testing.F) {
	e := Entry{
		Reference: "ghcr.io/org/x:v1", Digest: "sha256:" + strings.Repeat("a", 64), Layer: "sha256:" + strings.Repeat("b", 64),
		Published: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Tools: []Tool{{Name: "t", Description: "d"}},
	}
	line, err := e.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{string(line), string(line) + "{not json\n\n" + string(line[:len(line)-1]), "x\nx\n", "\r\n\t{}\n", `{"reference":"ghcr.io/other/y:v1"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		entries, warnings := Parse("ghcr.io/org/x.jsonl", []byte(data))
		lines := strings.Count(data, "\n") + 1
		if len(entries)+len(warnings) > lines+1 {
			t.Fatalf("%d entries and %d warnings from %d lines", len(entries), len(warnings), lines)
		}
		for _, e := range entries {
			if err := e.check("ghcr.io/org/x.jsonl"); err != nil {
				t.Fatalf("entry %+v: %v", e, err)
			}
			if _, err := e.Marshal(); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("entry %+v: %v", e, err)
			}
		}
	})
}
