package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
)

// The official MCP Inspector CLI, from npm, drives the built berm binary over
// both transports: what a person debugging a server sees is what these tests
// check. package.json in testdata/npm pins it.

const npmInstall = "npm ci --prefix mcpserve/testdata/npm"

// npmBin is the path of a binary that testdata/npm installs. Without the
// install the test is skipped under -short and fails otherwise, saying how to
// install.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if testing.Short() {
			t.Skipf("%s is not installed (run %s at the module root)", name, npmInstall)
		}
		t.Fatalf("%s is not installed: run %s at the module root (make deps does)", name, npmInstall)
	}
	return path
}

// buildBerm builds the berm binary into dir.
func buildBerm(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "berm")
	out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// bermEnv is the environment of a berm process on root, with nothing of the
// caller's berm settings.
func bermEnv(root string) []string {
	return append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
}

// inspectorRun is one run of the Inspector CLI.
type inspectorRun struct {
	stdout, stderr string
	exit           int
}

// inspect runs the Inspector CLI with args and returns what it printed and
// its exit code.
func inspect(t *testing.T, inspector string, args ...string) inspectorRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, inspector, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := inspectorRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		run.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("inspector %s: %v\nstderr:\n%s", strings.Join(args, " "), err, run.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("inspector %s: timed out\nstderr:\n%s", strings.Join(args, " "), run.stderr)
	}
	return run
}

// decode parses the JSON the Inspector printed on success.
func (r inspectorRun) decode(t *testing.T, v any) {
	t.Helper()
	if r.exit != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("inspector output: %v\n%s", err, r.stdout)
	}
}

// startBermHTTP starts berm serve on a port of its choosing and returns its
// /mcp URL, read from the log line it writes on listening; flags go to serve.
func startBermHTTP(t *testing.T, berm, root string, flags ...string) string {
	t.Helper()
	cmd := exec.Command(berm, append([]string{"serve", "--addr", "127.0.0.1:0"}, flags...)...)
	cmd.Env = bermEnv(root)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log stderrLog
	done := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			log.add(line)
			if strings.Contains(line, "msg=listen ") {
				for _, f := range strings.Fields(line) {
					if u, ok := strings.CutPrefix(f, "url="); ok {
						urls <- u
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { <-done; exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("berm serve after SIGTERM: %v\nstderr:\n%s", err, log.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("berm serve did not exit within 10s of SIGTERM\nstderr:\n%s", log.String())
		}
	})
	select {
	case u := <-urls:
		return u
	case <-done:
		t.Fatalf("berm serve exited before listening\nstderr:\n%s", log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("berm serve did not listen within 30s\nstderr:\n%s", log.String())
	}
	return ""
}

// stderrLog is a server's stderr, read while it runs.
type stderrLog struct {
	mu    sync.Mutex
	lines strings.Builder
}

func (l *stderrLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines.WriteString(line + "\n")
}

func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines.String()
}

func TestInspector(t *testing.T) {
	t.Parallel()
	inspector := npmBin(t, "mcp-inspector")
	berm := buildBerm(t, t.TempDir())
	root := t.TempDir()
	for _, d := range []struct{ name, file string }{{"echo", "echo.wasm"}, {"core", "core.wasm"}} {
		cmd := exec.Command(berm, "deploy", d.name, filepath.Join("..", "testdata", d.file))
		cmd.Env = bermEnv(root)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("berm deploy %s: %v\n%s", d.name, err, out)
		}
	}
	image, err := os.ReadFile(filepath.Join("..", "testdata", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	echo, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}

	transports := []struct {
		name string
		// target is the Inspector's arguments that name the server.
		target func(t *testing.T) []string
	}{
		{"stdio", func(t *testing.T) []string {
			return []string{"--cli", "-e", "BERM_ROOT=" + root, berm, "--", "serve", "--stdio"}
		}},
		{"http", func(t *testing.T) []string {
			return []string{"--cli", startBermHTTP(t, berm, root), "--transport", "http"}
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			target := tr.target(t)
			run := func(args ...string) inspectorRun {
				t.Helper()
				return inspect(t, inspector, append(append([]string(nil), target...), args...)...)
			}

			t.Run("tools/list", func(t *testing.T) {
				var res struct {
					Tools []struct {
						Name        string          `json:"name"`
						Description string          `json:"description"`
						InputSchema json.RawMessage `json:"inputSchema"`
					} `json:"tools"`
				}
				run("--method", "tools/list").decode(t, &res)
				schemas := map[string]json.RawMessage{}
				for _, tool := range res.Tools {
					schemas[tool.Name] = tool.InputSchema
				}
				for _, name := range []string{"echo_echo", "core_echo", "core_fail", "core_trap", "core_strict"} {
					if _, ok := schemas[name]; !ok {
						t.Errorf("tools/list lacks %s; got %d tools", name, len(res.Tools))
					}
				}
				var schema struct {
					Properties map[string]struct {
						Type string `json:"type"`
					} `json:"properties"`
				}
				json.Unmarshal(schemas["echo_echo"], &schema)
				if schema.Properties["message"].Type != "string" {
					t.Errorf("echo_echo input schema = %s, want the manifest's (message: string)", schemas["echo_echo"])
				}
			})

			t.Run("tools/call result", func(t *testing.T) {
				var res toolCallResult
				run("--method", "tools/call", "--tool-name", "echo_echo", "--tool-arg", "message=hi").decode(t, &res)
				if res.IsError || res.text() != `{"message":"hi"}` {
					t.Errorf("echo_echo = %+v, want the text {\"message\":\"hi\"}", res)
				}
			})

			t.Run("tools/call failure", func(t *testing.T) {
				var res toolCallResult
				run("--method", "tools/call", "--tool-name", "core_fail").decode(t, &res)
				if !res.IsError || !strings.Contains(res.text(), "it failed on purpose") {
					t.Errorf("core_fail = %+v, want isError with \"it failed on purpose\"", res)
				}
			})

			t.Run("tools/call trap", func(t *testing.T) {
				r := run("--method", "tools/call", "--tool-name", "core_trap")
				want := fmt.Sprintf("MCP error %d:", mcpserve.CodeTrap)
				if r.exit != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "trapped") {
					t.Errorf("core_trap: exit %d, stderr:\n%s\nwant exit 1 and %q with \"trapped\"", r.exit, r.stderr, want)
				}
			})

			t.Run("resources/read", func(t *testing.T) {
				var res struct {
					Contents []struct {
						URI  string `json:"uri"`
						Text string `json:"text"`
					} `json:"contents"`
				}
				run("--method", "resources/read", "--uri", "berm://echo/usage").decode(t, &res)
				// The manifest's usage, then what the deployment grants: nothing.
				want := echo.Usage + "\n\n## What this deployment grants\n\nNothing beyond its arguments and its own key-value data: no files, no environment variables, no network.\n"
				if len(res.Contents) != 1 || res.Contents[0].URI != "berm://echo/usage" || res.Contents[0].Text != want {
					t.Errorf("berm://echo/usage = %+v, want %q", res.Contents, want)
				}
			})
		})
	}
}

// toolCallResult is a tools/call result as the Inspector prints it.
type toolCallResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (r toolCallResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}
