package registrytest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// needTool returns the path of a tool the integration tests need: skipped
// under -short when missing, a failure otherwise.
func needTool(t testing.TB, path, hint string) string {
	t.Helper()
	if path != "" {
		return path
	}
	if testing.Short() {
		t.Skipf("-short: %s", hint)
	}
	t.Fatal(hint)
	return ""
}

// DockerRegistry finds Debian's registry binary.
func DockerRegistry(t testing.TB) string {
	t.Helper()
	p, _ := exec.LookPath("docker-registry")
	return needTool(t, p, "docker-registry not found: install it with `apt-get install -y docker-registry`")
}

// Oras finds the oras CLI in PATH or in $(go env GOPATH)/bin.
func Oras(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("oras")
	if err != nil {
		p = ""
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
				if c := filepath.Join(dir, "bin", "oras"); isExecutable(c) {
					p = c
					break
				}
			}
		}
	}
	return needTool(t, p, "oras not found: install it with `go install oras.land/oras/cmd/oras@v1.3.6`")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Options describe a registry to start.
type Options struct {
	// User and Password, when set, turn on htpasswd (basic) auth.
	User, Password string
}

// Start runs a docker-registry on 127.0.0.1, its storage in a temporary
// directory, until the test ends, and returns its host:port. opts may be nil.
func Start(t testing.TB, opts *Options) string {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	bin := DockerRegistry(t)
	dir := t.TempDir()
	auth := ""
	if opts.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, fmt.Appendf(nil, "%s:%s\n", opts.User, hash), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: berm-test\n    path: %s\n", htpasswd)
	}
	// A free port can be taken between probing and binding: try a few.
	var lastErr error
	for range 5 {
		host, err := tryRegistry(t, bin, dir, auth)
		if err == nil {
			return host
		}
		lastErr = err
	}
	t.Fatalf("docker-registry: %v", lastErr)
	return ""
}

func tryRegistry(t testing.TB, bin, dir, auth string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	host := l.Addr().String()
	l.Close()
	storage, err := os.MkdirTemp(dir, "storage")
	if err != nil {
		return "", err
	}
	config := filepath.Join(storage, "config.yml")
	yml := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(storage, "data"), host, auth)
	if err := os.WriteFile(config, []byte(yml), 0o600); err != nil {
		return "", err
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return "", fmt.Errorf("exited (%v): %s", err, logs.String())
		default:
		}
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			// 200, or 401 with auth on: either way it serves.
			t.Cleanup(stop)
			return host, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", fmt.Errorf("not serving after 10s: %s", logs.String())
}
