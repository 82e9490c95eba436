package commands_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A program whose _initialize cannot be snapshotted still deploys, and
// berm deploy, which takes the snapshot to check, warns that its
// _initialize runs at each call
// and why (here: it fills 20 MiB, more than a snapshot may hold), in text
// and in --json; with --init-each-call, which asks for that, it says
// nothing. Its calls answer either way.
func TestDeployWarnsInitEachCall(t *testing.T) {
	t.Parallel()
	if os.Getenv("BERM_PLAIN") == "1" {
		t.Skip("BERM_PLAIN=1 takes no snapshot")
	}
	root := t.TempDir()
	fat := filepath.Join("..", "runtime", "testdata", "init_fat.wasm")
	want := "berm: warning: fat: _initialize left more than 16 MiB of memory, the most a snapshot may hold (leave less, or build the rest in the tool); _initialize runs at each call instead"
	out := berm(t, root, "deploy", "fat", fat)
	if !strings.Contains(out, want) {
		t.Errorf("deploy output:\n%s\nwant the line %q", out, want)
	}
	if got := runTool(t, root, "fat", "t", `{}`); got != (outcome{result: "filled"}) {
		t.Errorf("berm run fat t = %+v, want filled", got)
	}
	out = berm(t, root, "deploy", "--json", "fat", fat)
	if !strings.Contains(out, want) || !strings.Contains(out, `"warnings": [`) {
		t.Errorf("deploy --json output:\n%s\nwant the warning on stderr and in the JSON", out)
	}
	out = berm(t, root, "deploy", "--init-each-call", "fat", fat)
	if strings.Contains(out, "warning") {
		t.Errorf("deploy --init-each-call warned:\n%s", out)
	}
	if got := runTool(t, root, "fat", "t", `{}`); got != (outcome{result: "filled"}) {
		t.Errorf("berm run fat t with --init-each-call = %+v, want filled", got)
	}
}

// berm run prints the runtime's note on why _initialize was not
// snapshotted as berm's own warning, not as a line of the program's log.
func TestRunWarnsInitEachCall(t *testing.T) {
	t.Parallel()
	if os.Getenv("BERM_PLAIN") == "1" {
		t.Skip("BERM_PLAIN=1 takes no snapshot")
	}
	fat := filepath.Join("..", "runtime", "testdata", "init_fat.wasm")
	out := berm(t, t.TempDir(), "run", fat, "t", `{}`)
	if !strings.Contains(out, "berm: warning: init-fat: _initialize left more than 16 MiB") || strings.Contains(out, "._initialize: berm:") {
		t.Errorf("berm run output:\n%s\nwant the note as a berm: warning: line", out)
	}
}

// berm serve logs why a program's _initialize was not snapshotted as its
// own warning, at the default level, and sends none of it to the client as
// the program's log.
func TestServeWarnsSnapshotRefused(t *testing.T) {
	t.Parallel()
	if os.Getenv("BERM_PLAIN") == "1" {
		t.Skip("BERM_PLAIN=1 takes no snapshot")
	}
	root := t.TempDir()
	berm(t, root, "deploy", "fat", filepath.Join("..", "runtime", "testdata", "init_fat.wasm"))
	var mu sync.Mutex
	var messages []string
	cs, _, stderr := connectStdio(t, root, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		mu.Lock()
		defer mu.Unlock()
		messages = append(messages, fmt.Sprint(req.Params.Data))
	}})
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fat_t", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("fat_t: %+v, %v", res, err)
	}
	want := `level=WARN msg="snapshot refused" program=fat why="_initialize left more than 16 MiB`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("serve's log:\n%s\nwant %s", stderr, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range messages {
		if strings.Contains(m, "snapshot") {
			t.Errorf("the client got %q as the program's log", m)
		}
	}
}
