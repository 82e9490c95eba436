package commands_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDevServe: berm dev in a project made by berm new, with berm serve
// running beside it: an edit is served with a list_changed, a broken edit
// prints its error and leaves the last good deployment served, a fix is
// served again.
func TestDevServe(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	if testing.Short() {
		t.Skip("builds the scaffold four times")
	}
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	root, dir := t.TempDir(), t.TempDir()
	newCmd := bermCmd(t, root, "new", "notes")
	newCmd.Dir = dir
	if out, err := newCmd.CombinedOutput(); err != nil {
		t.Fatalf("berm new: %v\n%s", err, out)
	}
	proj := filepath.Join(dir, "notes")

	dev := bermCmd(t, root, "dev")
	dev.Dir = proj
	devErr := &syncBuffer{}
	dev.Stdout, dev.Stderr = devErr, devErr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() {
		dev.Process.Kill()
		<-exited
	})
	waitFor := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for strings.Count(devErr.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("berm dev said %q fewer than %d times in 2 minutes:\n%s", what, n, devErr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("berm dev: deployed notes", 1)

	changed := make(chan struct{}, 16)
	cs, _, _ := connectStdio(t, root, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	description := func() string {
		t.Helper()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if tool.Name == "notes_count" {
				return tool.Description
			}
		}
		t.Fatalf("notes_count is not served")
		return ""
	}
	if d := description(); !strings.HasPrefix(d, "Counts the lines") {
		t.Fatalf("notes_count: %q", d)
	}
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(2 * time.Minute):
			t.Fatalf("no tools/list_changed:\n%s", devErr)
		}
	}
	main := filepath.Join(proj, "main.go")
	// edit replaces each from with its to, in one write.
	edit := func(fromTo ...string) {
		t.Helper()
		b, err := os.ReadFile(main)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for i := 0; i < len(fromTo); i += 2 {
			if !strings.Contains(s, fromTo[i]) {
				t.Fatalf("main.go has no %q", fromTo[i])
			}
			s = strings.Replace(s, fromTo[i], fromTo[i+1], 1)
		}
		if err := os.WriteFile(main, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// An edit.
	edit("Counts the lines", "Counts exactly the lines")
	waitChanged()
	waitFor("berm dev: deployed notes", 2)
	if d := description(); !strings.HasPrefix(d, "Counts exactly the lines") {
		t.Fatalf("after an edit, notes_count: %q", d)
	}

	// A broken edit: the error is printed, the last good deployment stays.
	edit("func main() {}", "func main() {")
	waitFor("berm: error: build", 1)
	waitFor("stays deployed", 1)
	if got := callText(t, cs, "notes_count", map[string]any{"text": "a b"}); got != `{"lines":1,"words":2,"chars":3}` {
		t.Errorf("notes_count after a broken edit = %q", got)
	}
	if d := description(); !strings.HasPrefix(d, "Counts exactly the lines") {
		t.Errorf("after a broken edit, notes_count: %q", d)
	}

	// A fix, with another change.
	edit("func main() {", "func main() {}", "Counts exactly the lines", "Counts precisely the lines")
	waitChanged()
	waitFor("berm dev: deployed notes", 3)
	if d := description(); !strings.HasPrefix(d, "Counts precisely the lines") {
		t.Fatalf("after a fix, notes_count: %q", d)
	}

	// Ctrl-C ends it, with 0.
	dev.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("berm dev after SIGINT: %v\n%s", err, devErr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("berm dev still runs 30 s after SIGINT")
	}
}
