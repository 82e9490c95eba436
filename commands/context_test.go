package commands_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/commands"
)

// ctxMain runs berm in this process with --root root and stdin, returning
// the exit code, stdout and stderr. BERM_SERVER, BERM_CONTEXT and
// BERM_TOKEN are the test's to set (t.Setenv), cleared here first.
func ctxMain(t *testing.T, root, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := commands.Main(context.Background(), append([]string{"berm", "--root", root}, args...),
		strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// clearServerEnv leaves the environment as a user without any would have it.
func clearServerEnv(t *testing.T) {
	for _, v := range []string{"BERM_SERVER", "BERM_CONTEXT", "BERM_TOKEN"} {
		t.Setenv(v, "")
	}
}

func mustCtx(t *testing.T, root, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := ctxMain(t, root, stdin, args...)
	if code != 0 {
		t.Fatalf("berm %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

type shown struct {
	Context, Server, Root, From, Token string
}

func show(t *testing.T, root string, args ...string) shown {
	t.Helper()
	var s shown
	if err := json.Unmarshal([]byte(mustCtx(t, root, "", append([]string{"context", "show", "--json"}, args...)...)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContextPrecedence: each level beats the ones after it, the token
// given beats the context's, and no level prints a token.
func TestContextPrecedence(t *testing.T) {
	clearServerEnv(t)
	root := t.TempDir()
	mustCtx(t, root, "stored-flag-secret\n", "context", "add", "flagctx", "http://127.0.0.1:2", "--token-stdin")
	mustCtx(t, root, "stored-env-secret\n", "context", "add", "envctx", "http://127.0.0.1:4", "--token-stdin")
	mustCtx(t, root, "stored-current-secret\n", "context", "add", "cur", "http://127.0.0.1:5", "--token-stdin")
	mustCtx(t, root, "", "context", "use", "cur")

	flags := []string{"--server", "http://127.0.0.1:1", "--context", "flagctx"}
	env := [][2]string{{"BERM_SERVER", "http://127.0.0.1:3"}, {"BERM_CONTEXT", "envctx"}}
	for _, tc := range []struct {
		name                string
		flags               []string
		env                 [][2]string
		server, from, token string
	}{
		{"--server beats --context", flags, env, "http://127.0.0.1:1", "--server", "none"},
		{"--context beats BERM_SERVER", flags[2:], env, "http://127.0.0.1:2", "--context", "the context's"},
		{"BERM_SERVER beats BERM_CONTEXT", nil, env, "http://127.0.0.1:3", "BERM_SERVER", "none"},
		{"BERM_CONTEXT beats the current context", nil, env[1:], "http://127.0.0.1:4", "BERM_CONTEXT", "the context's"},
		{"the current context beats the local root", nil, nil, "http://127.0.0.1:5", "the current context (berm context use)", "the context's"},
		{"--context local beats BERM_SERVER", []string{"--context", "local"}, env, "", "--context", "none"},
		{"BERM_CONTEXT=local beats the current context", nil, [][2]string{{"BERM_CONTEXT", "local"}}, "", "BERM_CONTEXT", "none"},
		{"--token beats the stored token", []string{"--context", "flagctx", "--token", "given"}, nil, "http://127.0.0.1:2", "--context", "--token or BERM_TOKEN"},
		{"BERM_TOKEN beats the stored token", nil, [][2]string{{"BERM_TOKEN", "given"}}, "http://127.0.0.1:5", "the current context (berm context use)", "--token or BERM_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearServerEnv(t)
			for _, kv := range tc.env {
				t.Setenv(kv[0], kv[1])
			}
			got := show(t, root, tc.flags...)
			if got.Server != tc.server || got.From != tc.from || got.Token != tc.token {
				t.Errorf("got server %q from %q, token %q; want %q from %q, token %q", got.Server, got.From, got.Token, tc.server, tc.from, tc.token)
			}
			if tc.server == "" && (got.Context != "local" || got.Root != root) {
				t.Errorf("the local root: got %+v", got)
			}
			_, stdout, stderr := ctxMain(t, root, "", append([]string{"context", "show"}, tc.flags...)...)
			if strings.Contains(stdout+stderr, "secret") {
				t.Errorf("context show printed a token:\n%s%s", stdout, stderr)
			}
		})
	}

	t.Run("the local root", func(t *testing.T) {
		clearServerEnv(t)
		mustCtx(t, root, "", "context", "use", "local")
		if got := show(t, root); got.Server != "" || got.Context != "local" || got.From != "nothing given" {
			t.Errorf("got %+v, want the local root", got)
		}
	})
	// --server and BERM_SERVER never read contexts.toml: a damaged one
	// stands in the way of nothing that does not need it.
	t.Run("--server ignores a damaged contexts.toml", func(t *testing.T) {
		clearServerEnv(t)
		damaged := t.TempDir()
		if err := os.WriteFile(filepath.Join(damaged, "contexts.toml"), []byte("current = [\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := show(t, damaged, "--server", "http://127.0.0.1:1"); got.Server != "http://127.0.0.1:1" {
			t.Errorf("got %+v", got)
		}
		code, _, stderr := ctxMain(t, damaged, "", "ls")
		if code != 2 || !strings.Contains(stderr, "contexts.toml") {
			t.Errorf("ls with a damaged contexts.toml: exit %d\n%s", code, stderr)
		}
	})
}

// TestContextCommands: add, ls, use, rm; what each refuses, and that a
// refusal changes nothing.
func TestContextCommands(t *testing.T) {
	clearServerEnv(t)
	root := filepath.Join(t.TempDir(), "root")
	file := filepath.Join(root, "contexts.toml")

	// Reading creates nothing.
	if out := mustCtx(t, root, "", "context", "ls"); !strings.Contains(out, "* local") {
		t.Errorf("ls of no contexts:\n%s", out)
	}
	mustCtx(t, root, "", "context", "use", "local")
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("reading created the root: %v", err)
	}

	mustCtx(t, root, "tok-0123456789\n", "context", "add", "prod", "https://berm.example.com/", "--token-stdin")
	mustCtx(t, root, "", "context", "add", "ci", "http://127.0.0.1:7777")
	if goruntime.GOOS != "windows" {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("contexts.toml: mode %v, want 0600", fi.Mode().Perm())
		}
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "tok-0123456789") {
		t.Fatalf("the token is not kept: %v\n%s", err, b)
	}
	// Temporary files are renamed away.
	if left, _ := filepath.Glob(filepath.Join(root, ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	mustCtx(t, root, "", "context", "use", "prod")
	out := mustCtx(t, root, "", "context", "ls")
	if !strings.Contains(out, "* prod") || !strings.Contains(out, "https://berm.example.com ") || strings.Contains(out, "* local") {
		t.Errorf("ls does not mark prod current:\n%s", out)
	}
	jsonOut := mustCtx(t, root, "", "context", "ls", "--json")
	for _, o := range []string{out, jsonOut} {
		if strings.Contains(o, "tok-0123456789") {
			t.Errorf("ls printed the token:\n%s", o)
		}
	}
	var lines []struct {
		Name     string
		URL      string
		HasToken bool `json:"has_token"`
		Current  bool
	}
	if err := json.Unmarshal([]byte(jsonOut), &lines); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[0].Name != "local" || lines[1].Name != "ci" || lines[2].Name != "prod" ||
		!lines[2].Current || !lines[2].HasToken || lines[1].HasToken || lines[2].URL != "https://berm.example.com" {
		t.Errorf("ls --json: %+v", lines)
	}

	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		stderr string
	}{
		{"use of an unknown name", "", []string{"use", "nope"}, `context "nope": no such context (known: local, ci, prod)`},
		{"rm of an unknown name", "", []string{"rm", "ci", "nope"}, `(known: local, ci, prod)`},
		{"rm of local", "", []string{"rm", "local"}, "cannot be removed"},
		{"add of an existing name", "", []string{"add", "ci", "http://127.0.0.1:1"}, "already exists"},
		{"add of local", "", []string{"add", "local", "http://127.0.0.1:1"}, "the name of the local root"},
		{"add of a bad name", "", []string{"add", "-x", "http://127.0.0.1:1"}, ""},
		{"add of a name with a slash", "", []string{"add", "a/b", "http://127.0.0.1:1"}, "want 1 to 63"},
		{"a URL without a scheme", "", []string{"add", "x", "127.0.0.1:7777"}, "want http:// or https://"},
		{"a URL of another scheme", "", []string{"add", "x", "ftp://example.com"}, "want http:// or https://"},
		{"a URL without a host", "", []string{"add", "x", "http://"}, "want http:// or https://"},
		{"a URL with a password", "", []string{"add", "x", "https://me:pw@example.com"}, "carries a user or password"},
		{"a URL with a query", "", []string{"add", "x", "https://example.com?a=b"}, "no query"},
		{"a URL of the MCP endpoint", "", []string{"add", "x", "http://127.0.0.1:7777/mcp"}, "without /mcp"},
		{"an empty token", "\n", []string{"add", "x", "http://127.0.0.1:1", "--token-stdin"}, "no token on stdin"},
		{"add without a URL", "", []string{"add", "x"}, "takes NAME URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := ctxMain(t, root, tc.stdin, append([]string{"context"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want 2 and %q\n%s", code, tc.stderr, stderr)
			}
			if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
				t.Errorf("a refusal changed contexts.toml:\n%s", after)
			}
		})
	}

	// Removing the current context makes the local root current.
	code, stdout, stderr := ctxMain(t, root, "", "context", "rm", "prod")
	if code != 0 || !strings.Contains(stdout, "removed context prod") || !strings.Contains(stderr, "the local root is current now") {
		t.Fatalf("rm prod: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), "tok-0123456789") || strings.Contains(string(b), "prod") {
		t.Errorf("rm left prod or its token:\n%s", b)
	}
	if out := mustCtx(t, root, "", "context", "ls"); !strings.Contains(out, "* local") || strings.Contains(out, "prod") {
		t.Errorf("ls after rm:\n%s", out)
	}
	// An unknown --context fails the command, naming the known ones.
	code, _, stderr = ctxMain(t, root, "", "ls", "--context", "prod")
	if code != 2 || !strings.Contains(stderr, `context "prod": no such context (known: local, ci)`) {
		t.Errorf("ls --context prod: exit %d\n%s", code, stderr)
	}
	t.Setenv("BERM_CONTEXT", "gone")
	code, _, stderr = ctxMain(t, root, "", "deploy", "echo", fixturePath("echo.wasm"))
	if code != 2 || !strings.Contains(stderr, `context "gone": no such context`) {
		t.Errorf("deploy with BERM_CONTEXT=gone: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "deployments")); !os.IsNotExist(err) {
		t.Errorf("deploy under an unknown context deployed here: %v", err)
	}
}

// TestContextServe: a context drives a real berm serve over HTTP with its
// stored token: deploy, ls, inspect and rm, as --context and as the
// current context; --context local and a given token beat it.
func TestContextServe(t *testing.T) {
	clearServerEnv(t)
	serverRoot, root := t.TempDir(), t.TempDir()
	base := startHTTP(t, serverRoot, "--token", "tok")
	mustCtx(t, root, "tok\n", "context", "add", "srv", base, "--token-stdin")

	if out := mustCtx(t, root, "", "deploy", "--context", "srv", "echo", fixturePath("echo.wasm")); !strings.HasPrefix(out, "sha256:") {
		t.Fatalf("deploy --context srv printed %q", out)
	}
	if out := berm(t, serverRoot, "ls"); !strings.Contains(out, "echo") {
		t.Fatalf("the server's root lacks the deployment:\n%s", out)
	}
	if out := mustCtx(t, root, "", "ls"); strings.Contains(out, "echo") {
		t.Fatalf("the local root got the deployment:\n%s", out)
	}
	if out := mustCtx(t, root, "", "ls", "--context", "srv"); !strings.Contains(out, "echo") {
		t.Fatalf("ls --context srv:\n%s", out)
	}
	// A token given beats the stored one, here to be refused.
	code, _, stderr := ctxMain(t, root, "", "ls", "--context", "srv", "--token", "wrong")
	if code != 2 || !strings.Contains(stderr, "bearer token") {
		t.Fatalf("ls --context srv --token wrong: exit %d\n%s", code, stderr)
	}

	mustCtx(t, root, "", "context", "use", "srv")
	if out := mustCtx(t, root, "", "ls"); !strings.Contains(out, "echo") {
		t.Fatalf("ls under the current context srv:\n%s", out)
	}
	if out := mustCtx(t, root, "", "inspect", "echo"); !strings.Contains(out, "A fixture that echoes") {
		t.Fatalf("inspect under the current context:\n%s", out)
	}
	if out := mustCtx(t, root, "", "ls", "--context", "local"); strings.Contains(out, "echo") {
		t.Fatalf("ls --context local listed the server's:\n%s", out)
	}
	mustCtx(t, root, "", "rm", "echo")
	if out := berm(t, serverRoot, "ls"); strings.Contains(out, "echo") {
		t.Fatalf("rm under the current context left the deployment:\n%s", out)
	}
}

// TestBermd: the binary run as bermd (a link or a copy, .exe or not) is
// berm serve.
func TestBermd(t *testing.T) {
	t.Parallel()
	bin := bermBinary(t)
	dir := t.TempDir()
	copied := filepath.Join(dir, "bermd.exe")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, b, 0o755); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "bermd")
	if err := os.Symlink(bin, linked); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	berm(t, root, "deploy", "echo", fixturePath("echo.wasm"))
	bermd := func(path string, args ...string) *exec.Cmd {
		cmd := exec.Command(path, args...)
		cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_CONTEXT=", "BERM_TOKEN=")
		return cmd
	}

	for _, path := range []string{linked, copied} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out, err := bermd(path, "--help").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "berm serve - serve every deployed program's tools") || !strings.Contains(string(out), "--stdio") {
				t.Fatalf("bermd --help: %v\n%s", err, out)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
				&mcp.CommandTransport{Command: bermd(path, "--stdio")}, nil)
			if err != nil {
				t.Fatalf("bermd --stdio: %v", err)
			}
			defer cs.Close()
			if got := callText(t, cs, "echo_echo", map[string]any{"message": "hi"}); got != `{"message":"hi"}` {
				t.Fatalf("echo_echo over bermd --stdio = %q", got)
			}
		})
	}

	// bermd --addr serves HTTP, and --root works as for berm.
	cmd := exec.Command(linked, "--root", root, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BERM_ROOT=", "BERM_SERVER=", "BERM_TOKEN=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if m := listenURL.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			if out := berm(t, t.TempDir(), "ls", "--server", m[1]); !strings.Contains(out, "echo") {
				t.Fatalf("ls --server of bermd:\n%s", out)
			}
			return
		}
	}
	t.Fatal("bermd --addr never said where it listens")
}
