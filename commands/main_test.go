package commands_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berm-dev/berm/commands"
)

// mainIn runs the command line in this process, as berm with --root root.
func mainIn(t *testing.T, root string, stdout *bytes.Buffer, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	if stdout == nil {
		stdout = &bytes.Buffer{}
	}
	code := commands.Main(context.Background(), append([]string{"berm", "--root", root}, args...),
		strings.NewReader(""), stdout, &stderr)
	return code, stderr.String()
}

// fullWriter fails every write as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestOutputLost: output that cannot be written is a host error, exit 2,
// whatever the command; a caller reading stdout would otherwise take nothing,
// or half, for the result.
func TestOutputLost(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, name := range []string{"echo", "other"} {
		if code, stderr := mainIn(t, root, nil, "deploy", name, fixturePath("echo.wasm")); code != 0 {
			t.Fatalf("deploy: exit %d\n%s", code, stderr)
		}
	}
	for name, args := range map[string][]string{
		"run":           {"run", "echo", "echo", `{"message":"hi"}`},
		"run file":      {"run", fixturePath("core.wasm"), "echo", `{"a":1}`},
		"deploy":        {"deploy", "other", fixturePath("echo.wasm")},
		"deploy json":   {"deploy", "--json", "other", fixturePath("echo.wasm")},
		"ls":            {"ls"},
		"ls json":       {"ls", "--json"},
		"inspect":       {"inspect", "echo"},
		"inspect json":  {"inspect", "--json", "echo"},
		"rm":            {"rm", "other"},
		"syscalls":      {"syscalls"},
		"syscalls json": {"syscalls", "--json"},
		"version":       {"version"},
		"help":          {"--help"},
		"command help":  {"run", "--help"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := commands.Main(context.Background(), append([]string{"berm", "--root", root}, args...),
				strings.NewReader(""), fullWriter{}, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "berm: error: output: ") {
				t.Errorf("stderr does not say the output was lost:\n%s", stderr.String())
			}
			// The disk that is full is stdout's, not the root's.
			if strings.Contains(stderr.String(), "hint:") {
				t.Errorf("a hint for a lost output:\n%s", stderr.String())
			}
		})
	}
}

// TestRunToDevFull is `berm run ... >/dev/full`, in a real process.
func TestRunToDevFull(t *testing.T) {
	t.Parallel()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	cmd := bermCmd(t, t.TempDir(), "run", fixturePath("core.wasm"), "echo", `{"a":1}`)
	cmd.Stdout = full
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("berm run >/dev/full: %v, want exit 2\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no space left on device") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestBareCommands runs every command with no arguments and with too many:
// a usage error or what the command does without them, never a panic (which
// would end this test).
func TestBareCommands(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	for _, args := range [][]string{
		{"deploy"}, {"ls"}, {"inspect"}, {"run"}, {"rm"}, {"push"}, {"login"}, {"logout"},
		{"syscalls"}, {"version"},
		{"deploy", "a", "b", "c"}, {"ls", "a"}, {"inspect", "a", "b"}, {"run", "a", "b", "c", "d"},
		{"push", "a", "b", "c"}, {"login", "a", "b"}, {"logout", "a", "b"}, {"serve", "a"},
		{"run", ""}, {"run", "", ""}, {"inspect", ""}, {"rm", ""}, {"deploy", "", ""},
	} {
		code, stderr := mainIn(t, root, nil, args...)
		if code != 0 && code != 2 {
			t.Errorf("berm %q: exit %d\n%s", args, code, stderr)
		}
	}
}

// endless is stdin that never ends and holds no newline, as /dev/zero.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestLoginPasswordBounded: login reads a line of stdin for the password,
// and no more than a password could be, whatever stdin is.
func TestLoginPasswordBounded(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := commands.Main(context.Background(), []string{"berm", "login", "--username", "me", "localhost:1"},
		endless{}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "password on stdin: over") {
		t.Fatalf("exit %d, want 2 and the password refused\n%s", code, &stderr)
	}
}
