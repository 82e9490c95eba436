package commands

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime/sandbox"
)

// lockedBuffer is a buffer berm dev's loop writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// One save that reaches berm dev as more than one burst of events (an
// editor that writes the file twice, or touches it after) is built once,
// so a broken save says once that the last good deployment stays; a real
// change after it is built.
func TestDevBuildsOneSaveOnce(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, root := scaffoldProject(t, "c", "wc")
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, &env{stdout: io.Discard, stderr: stderr}, devOptions{root: root, debounce: 100 * time.Millisecond}, dir)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for strings.Count(stderr.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("berm dev said %q fewer than %d times in 2 minutes:\n%s", what, n, stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("berm dev: deployed wc", 1)

	tools := filepath.Join(dir, "tools.c")
	good := readTestFile(t, tools)
	broken := append(append([]byte(nil), good...), "this is not C\n"...)
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(tools, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(broken)
	waitFor("stays deployed", 1)
	// The same save again, as its own burst, and a touch: nothing to build.
	// (Spaced out so that, were they built, each would be a cycle.)
	write(broken)
	time.Sleep(time.Second)
	now := time.Now()
	if err := os.Chtimes(tools, now, now); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	// A real change is built, after everything above.
	write([]byte(strings.Replace(string(good), "text is empty", "the text is empty", 1)))
	waitFor("berm dev: deployed wc", 2)

	out := stderr.String()
	if n := strings.Count(out, "stays deployed"); n != 1 {
		t.Errorf("berm dev said %d times that wc stays deployed, for one broken save:\n%s", n, out)
	}
	if n := strings.Count(out, "berm: error: "); n != 1 {
		t.Errorf("berm dev printed %d errors, for one broken save:\n%s", n, out)
	}
}

// berm dev after a deploy that granted what berm.toml does not: the warning
// that the grants are dropped comes with the [sandbox] lines that keep
// them, and those lines, added to berm.toml, grant exactly what was
// dropped.
func TestDevHintsDroppedGrants(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, root := scaffoldProject(t, "c", "wc")
	notes, outside := filepath.Join(dir, "notes"), t.TempDir()
	for _, d := range []string{notes, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mode := "fast \"and\" <odd>"
	granted := &sandbox.Grants{
		Dirs:  []sandbox.Dir{{Host: notes, Guest: "/data"}, {Host: outside, Guest: "/out", Write: true}},
		Env:   []sandbox.Env{{Name: "TZ"}, {Name: "MODE", Value: &mode}},
		Hosts: []string{"api.example.com"},
		Args:  []string{"-v"},
		Cwd:   "/data",
	}
	ctx := context.Background()
	built, err := buildProject(ctx, buildOptions{root: root}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := runDeploy(ctx, &env{stdout: io.Discard, stderr: io.Discard}, deployOptions{root: root, grants: granted}, []string{"wc", built.Path}); err != nil {
		t.Fatal(err)
	}

	var stderr strings.Builder
	if _, err := devCycle(ctx, &env{stdout: io.Discard, stderr: &stderr}, devOptions{root: root}, dir, ""); err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	_, hint, ok := strings.Cut(out, "berm: hint: berm dev grants what "+filepath.Join(dir, "berm.toml")+" grants, no more: to keep them, add these lines to it:\n")
	if !strings.Contains(out, "berm: warning: wc had grants") || !ok {
		t.Fatalf("no warning with the hint:\n%s", out)
	}
	lines, _, _ := strings.Cut(hint, "berm dev: deployed")
	for _, want := range []string{`    host_path  = "./notes"`, `    host_path  = "` + outside + `"`, `    perms      = "read_write"`} {
		if !strings.Contains(lines, want+"\n") {
			t.Errorf("no line %q in the hint:\n%s", want, lines)
		}
	}

	// The lines, as they are, grant what was dropped.
	toml := filepath.Join(dir, "berm.toml")
	writeTestFile(t, toml, string(readTestFile(t, toml))+"\n"+lines)
	p, err := readProject(dir)
	if err != nil {
		t.Fatalf("berm.toml with the hint's lines: %v\n%s", err, lines)
	}
	got, err := p.grants(false)
	if err != nil {
		t.Fatal(err)
	}
	if gj, wj := mustJSON(t, got), mustJSON(t, granted); gj != wj {
		t.Errorf("the hint's lines grant\n%s\nwant\n%s", gj, wj)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
