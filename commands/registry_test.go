package commands_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berm-dev/berm/internal/registrytest"
)

// These tests push to and deploy from real registries on loopback (see
// registry/registrytest), with the built binary.

// bermEnv runs berm with a root and a Docker config of its own.
func bermEnv(t *testing.T, root, dockerConfig string, args ...string) *exec.Cmd {
	cmd := bermCmd(t, root, args...)
	cmd.Env = append(cmd.Env, "DOCKER_CONFIG="+dockerConfig)
	return cmd
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

func fails(t *testing.T, cmd *exec.Cmd, words ...string) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("%s: %v, want exit 2\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	for _, w := range words {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s: output does not say %q:\n%s", strings.Join(cmd.Args, " "), w, out)
		}
	}
	return string(out)
}

// pushedDigests reads what berm push printed: the layer's digest and the
// manifest's.
func pushedDigests(t *testing.T, out string) (layer, manifest string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		switch f := strings.Fields(line); {
		case len(f) == 2 && f[0] == "digest":
			layer = f[1]
		case len(f) == 2 && f[0] == "manifest":
			manifest = f[1]
		}
	}
	if layer == "" || manifest == "" {
		t.Fatalf("berm push printed %q: no digest and manifest lines", out)
	}
	return layer, manifest
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestPushDeployRun(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker := t.TempDir(), t.TempDir()
	ref := host + "/demo/echo:v1"
	echo := fixturePath("echo.wasm")

	out := run(t, bermEnv(t, root, docker, "push", ref, echo))
	layer, manifestDigest := pushedDigests(t, out)
	if want := "digest    " + layer + "\nmanifest  " + manifestDigest + "\npinned    " + ref + "@" + manifestDigest + "\n"; out != want ||
		layer != sha256File(t, echo) || !strings.HasPrefix(manifestDigest, "sha256:") {
		t.Fatalf("push printed %q, want the file's sha256, the manifest digest and the pinned reference, labeled", out)
	}
	// The same file to the same reference: the same manifest.
	if again := run(t, bermEnv(t, root, docker, "push", ref, echo)); again != out {
		t.Fatalf("second push printed %q, want %q", again, out)
	}

	if out := run(t, bermEnv(t, root, docker, "inspect", ref)); !strings.Contains(out, "A fixture that echoes") || !strings.Contains(out, "source:    "+ref+"@"+manifestDigest) {
		t.Fatalf("inspect REF:\n%s", out)
	}
	if out := run(t, bermEnv(t, root, docker, "deploy", "e", ref)); strings.TrimSpace(out) != layer {
		t.Fatalf("deploy printed %q, want the layer digest", out)
	}
	if out := run(t, bermEnv(t, root, docker, "ls")); !strings.Contains(out, ref+"@"+manifestDigest) {
		t.Fatalf("ls does not show the source:\n%s", out)
	}
	if out := run(t, bermEnv(t, root, docker, "run", "e", "echo", `{"via":"registry"}`)); out != `{"via":"registry"}` {
		t.Fatalf("run = %q", out)
	}
	// A file runs from a reference without being deployed.
	if out := run(t, bermEnv(t, root, docker, "run", ref, "echo", `{"n":1}`)); out != `{"n":1}` {
		t.Fatalf("run REF = %q", out)
	}
	fails(t, bermEnv(t, root, docker, "deploy", "x", host+"/demo/nope:v1"), "not found", "hint:")
}

// TestDeployFetchesOnce: a digest the store holds is not fetched again.
func TestDeployFetchesOnce(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker := t.TempDir(), t.TempDir()
	run(t, bermEnv(t, root, docker, "push", host+"/demo/echo:v1", fixturePath("echo.wasm")))
	var blobs atomic.Int64
	proxy := proxyTo(t, host, func(r *http.Request, body []byte) []byte {
		if strings.Contains(r.URL.Path, "/blobs/") {
			blobs.Add(1)
		}
		return body
	})
	run(t, bermEnv(t, root, docker, "deploy", "a", proxy+"/demo/echo:v1"))
	first := blobs.Load()
	run(t, bermEnv(t, root, docker, "deploy", "b", proxy+"/demo/echo:v1"))
	if got := blobs.Load() - first; got != 0 {
		t.Fatalf("the second deploy fetched %d blobs, want 0 (the layer is in the store)", got)
	}
}

// TestRegistryThatLies: a registry serving wrong bytes is caught, and
// nothing is deployed or stored.
func TestRegistryThatLies(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker := t.TempDir(), t.TempDir()
	pushRoot := t.TempDir()
	run(t, bermEnv(t, pushRoot, docker, "push", host+"/demo/echo:v1", fixturePath("echo.wasm")))
	proxy := proxyTo(t, host, func(r *http.Request, body []byte) []byte {
		if strings.Contains(r.URL.Path, "/blobs/") && len(body) > 100 {
			body[len(body)/2] ^= 0xff
		}
		return body
	})
	fails(t, bermEnv(t, root, docker, "deploy", "e", proxy+"/demo/echo:v1"), "digest")
	if out := run(t, bermEnv(t, root, docker, "ls")); strings.Contains(out, "e ") {
		t.Fatalf("a lying registry's image was deployed:\n%s", out)
	}
	if images, _ := filepath.Glob(filepath.Join(root, "images", "sha256", "*")); len(images) != 0 {
		t.Fatalf("a lying registry's bytes were stored: %v", images)
	}
}

func TestOrasPushedDeploys(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	oras := registrytest.Oras(t)
	root, docker := t.TempDir(), t.TempDir()
	dir := t.TempDir()
	b, _ := os.ReadFile(fixturePath("echo.wasm"))
	os.WriteFile(filepath.Join(dir, "f.wasm"), b, 0o644)
	push := exec.Command(oras, "push", "--plain-http", host+"/plain/echo:v1", "f.wasm:application/wasm")
	push.Dir, push.Env = dir, append(os.Environ(), "DOCKER_CONFIG="+docker)
	run(t, push)
	run(t, bermEnv(t, root, docker, "deploy", "e", host+"/plain/echo:v1"))
	if out := run(t, bermEnv(t, root, docker, "run", "e", "echo", `{"from":"oras"}`)); out != `{"from":"oras"}` {
		t.Fatalf("run = %q", out)
	}
}

func TestLoginLogout(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, &registrytest.Options{User: "berm", Password: "s3cret"})
	root, docker := t.TempDir(), t.TempDir()
	ref := host + "/private/echo:v1"
	fails(t, bermEnv(t, root, docker, "push", ref, fixturePath("echo.wasm")), "unauthorized", "berm login")

	login := bermEnv(t, root, docker, "login", "--username", "berm", host)
	login.Stdin = strings.NewReader("wrong\n")
	fails(t, login, "unauthorized")
	login = bermEnv(t, root, docker, "login", "--username", "berm", "http://"+host+"/")
	login.Stdin = strings.NewReader("s3cret\n")
	if out := run(t, login); !strings.Contains(out, "logged in to "+host) {
		t.Fatalf("login: %s", out)
	}
	run(t, bermEnv(t, root, docker, "push", ref, fixturePath("echo.wasm")))
	run(t, bermEnv(t, root, docker, "deploy", "e", ref))

	run(t, bermEnv(t, root, docker, "logout", host))
	fails(t, bermEnv(t, t.TempDir(), docker, "deploy", "e", ref), "unauthorized")
}

// TestProjectFile pushes and deploys from berm.toml, locally and through a
// server that pulls with its own credentials.
func TestProjectFile(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, &registrytest.Options{User: "berm", Password: "s3cret"})
	docker := t.TempDir()
	login := bermEnv(t, t.TempDir(), docker, "login", "--username", "berm", host)
	login.Stdin = strings.NewReader("s3cret\n")
	run(t, login)

	project := t.TempDir()
	b, _ := os.ReadFile(fixturePath("echo.wasm"))
	os.WriteFile(filepath.Join(project, "example.wasm"), b, 0o644)
	os.WriteFile(filepath.Join(project, "berm.toml"), []byte("name = \"example\"\nimage = \""+host+"/org/example\"\n"), 0o644)
	inProject := func(cmd *exec.Cmd) *exec.Cmd { cmd.Dir = project; return cmd }

	root := t.TempDir()
	out := run(t, inProject(bermEnv(t, root, docker, "push")))
	if layer, _ := pushedDigests(t, out); layer != sha256File(t, filepath.Join(project, "example.wasm")) {
		t.Fatalf("push from berm.toml: %s", out)
	}
	run(t, inProject(bermEnv(t, root, docker, "deploy")))
	if out := run(t, bermEnv(t, root, docker, "ls")); !strings.Contains(out, "example") || !strings.Contains(out, "example.wasm") {
		t.Fatalf("deploy from berm.toml:\n%s", out)
	}

	// Through a server: the client pushes, the server pulls with its own
	// credentials (it shares the Docker config here; the client's root is
	// not involved).
	serverRoot := t.TempDir()
	base := startHTTPEnv(t, serverRoot, []string{"DOCKER_CONFIG=" + docker})
	run(t, inProject(bermEnv(t, t.TempDir(), docker, "deploy", "--server", base)))
	if out := run(t, bermEnv(t, serverRoot, docker, "ls")); !strings.Contains(out, host+"/org/example:latest@sha256:") {
		t.Fatalf("the server's deployment:\n%s", out)
	}
	// And NAME REF through the server, from a client with no credentials.
	run(t, bermEnv(t, t.TempDir(), t.TempDir(), "deploy", "--server", base, "again", host+"/org/example"))
	if out := run(t, bermEnv(t, serverRoot, docker, "ls")); !strings.Contains(out, "again") {
		t.Fatalf("deploy --server NAME REF:\n%s", out)
	}
	fails(t, bermEnv(t, t.TempDir(), t.TempDir(), "deploy", "--server", base, "x", host+"/org/nope:v1"), "pull failed", "not found")

	os.WriteFile(filepath.Join(project, "berm.toml"), []byte("name = \"Bad Name\"\n"), 0o644)
	fails(t, inProject(bermEnv(t, root, docker, "deploy")), "berm.toml", "program name")
	os.WriteFile(filepath.Join(project, "berm.toml"), []byte("name = \"x\"\nimgae = \"typo\"\n"), 0o644)
	fails(t, inProject(bermEnv(t, root, docker, "push")), "imgae")
}

// proxyTo serves a registry's API through a function that may rewrite
// response bodies, and returns its host:port.
func proxyTo(t *testing.T, host string, rewrite func(*http.Request, []byte) []byte) string {
	t.Helper()
	target, _ := url.Parse("http://" + host)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequest(r.Method, target.String()+r.URL.RequestURI(), r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		body = rewrite(r, body)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://")
}
