package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// TestInspectEscapes: an image's manifest is the author's text, and inspect
// prints it to a terminal; the escape sequences in it are shown, not obeyed.
func TestInspectEscapes(t *testing.T) {
	t.Parallel()
	echo, err := os.ReadFile(filepath.Join("..", "testdata", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	image, err := manifest.Attach(echo, []byte(`{"abi_version": 0,
		"usage": "clear \u001b[2J\u001b]52;c;cHduZWQ=\u0007 and \u009b31m, tab\tok",
		"tools": [{"name": "echo", "description": "back\rspace\u0008",
			"parameters": {"type": "object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "evil.wasm")
	if err := os.WriteFile(file, image, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	if err := runInspect(context.Background(), e, inspectOptions{root: t.TempDir()}, file); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, c := range []string{"\x1b", "\x07", "\r", "\b", "\u009b"} {
		if strings.Contains(out, c) {
			t.Errorf("inspect printed %q raw:\n%s", c, out)
		}
	}
	for _, shown := range []string{`clear \x1b[2J\x1b]52;c;cHduZWQ=\a and \u009b31m, tab` + "\tok", `back\rspace\b`} {
		if !strings.Contains(out, shown) {
			t.Errorf("inspect does not show %q:\n%s", shown, out)
		}
	}
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text\nline\ttab": "plain text\nline\ttab",
		"é 日本 🙂":                "é 日本 🙂",
		"\x1b[31mred":           `\x1b[31mred`,
		"nul\x00del\x7f":        `nul\x00del\x7f`,
		"bad \xff utf-8":        "bad \uFFFD utf-8",
		"c1 \u0085":             `c1 \u0085`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInspectImportsOnce: Go's linker imports some WASI functions twice
// (files.wasm: fd_write, fd_prestat_get, path_filestat_get); inspect lists
// each once with its count, and says "1 page", not "1 pages".
func TestInspectImportsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file      string
		want      []string
		wantCount map[string]int // lines that start so, and how many
	}{
		{
			file: filepath.Join("..", "examples", "files", "files.wasm"),
			want: []string{"  wasi_snapshot_preview1.fd_write [i32 i32 i32 i32] -> [i32] (imported 2 times)\n"},
			wantCount: map[string]int{
				"  wasi_snapshot_preview1.fd_write ":       1,
				"  wasi_snapshot_preview1.fd_prestat_get ": 1,
			},
		},
		{
			file: filepath.Join("..", "testdata", "echo.wasm"),
			want: []string{"memory:    at least 1 page of 64 KiB\n"},
		},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			if err := runInspect(context.Background(), e, inspectOptions{root: t.TempDir()}, tc.file); err != nil {
				t.Fatal(err)
			}
			out := stdout.String()
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("inspect lacks %q:\n%s", want, out)
				}
			}
			for prefix, n := range tc.wantCount {
				got := 0
				for _, line := range strings.Split(out, "\n") {
					if strings.HasPrefix(line, prefix) {
						got++
					}
				}
				if got != n {
					t.Errorf("inspect lists %q %d times, want %d:\n%s", prefix, got, n, out)
				}
			}
		})
	}
}

// TestReachCounts: what deploy prints of a program's reach is in proper
// English for one, and lists a non-WASI import once however often the
// module imports it.
func TestReachCounts(t *testing.T) {
	t.Parallel()
	got := reachFor(nil, nil, []string{"env.f", "env.f", "wasi_snapshot_preview1.clock_time_get", "wasi_snapshot_preview1.clock_time_get"})
	want := []string{"import env.f", "WASI 1 more function"}
	if !slices.Equal(got, want) {
		t.Errorf("reachFor = %q, want %q", got, want)
	}
	if got := formatSize(1); got != "1 byte" {
		t.Errorf("formatSize(1) = %q, want 1 byte", got)
	}
}
