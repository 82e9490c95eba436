package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// TestInspectEscapes: an image's manifest is the author's text, and inspect
// prints it to a terminal; the escape sequences in it are shown, not obeyed.
func TestInspectEscapes(t *testing.T) {
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
