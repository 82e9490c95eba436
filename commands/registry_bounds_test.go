package commands_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/registrytest"
)

// trickleTo serves a registry's API, sending the bodies of manifests a
// byte every 50 ms, and returns its host:port.
func trickleTo(t *testing.T, host string) string {
	t.Helper()
	stop := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequest(r.Method, "http://"+host+r.URL.RequestURI(), r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/manifests/") {
			w.Write(body)
			return
		}
		for _, c := range body {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := w.Write([]byte{c}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the handlers
	return strings.TrimPrefix(ts.URL, "http://")
}

// A registry that trickles is cut off at --registry-timeout, with an
// error that names it and the bound, and a hint naming the flags.
func TestDeployFromTricklingRegistry(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker := t.TempDir(), t.TempDir()
	run(t, bermEnv(t, root, docker, "push", host+"/demo/echo:v1", fixturePath("echo.wasm")))
	slow := trickleTo(t, host)
	start := time.Now()
	fails(t, bermEnv(t, root, docker, "deploy", "--registry-timeout", "2s", "--registry-min-rate", "0", "e", slow+"/demo/echo:v1"),
		"berm: error: "+slow+"/demo/echo:v1: manifest: "+slow+": a request ran past the request timeout of 2s: registry too slow",
		"hint:", "--registry-timeout", "--registry-min-rate")
	t.Logf("cut off after %s", time.Since(start).Round(10*time.Millisecond))
	fails(t, bermEnv(t, root, docker, "deploy", "--registry-min-rate", "fast", "e", slow+"/demo/echo:v1"), "--registry-min-rate", `"fast"`)
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A registry that is not there is named unreachable, with a hint, for a
// push and a deploy alike.
func TestUnreachableRegistry(t *testing.T) {
	t.Parallel()
	root, docker := t.TempDir(), t.TempDir()
	ref := closedPort(t) + "/demo/echo:v1"
	for _, args := range [][]string{{"push", ref, fixturePath("echo.wasm")}, {"deploy", "e", ref}} {
		fails(t, bermEnv(t, root, docker, args...), "berm: error: "+ref+": registry unreachable: ", "connection refused",
			"hint: check the host and port the reference starts with")
	}
}

// berm serve's control API pulls a reference under serve's own registry
// bounds: a trickling registry is cut off at its --registry-timeout.
func TestServePullFromTricklingRegistry(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	serverRoot, clientRoot, docker := t.TempDir(), t.TempDir(), t.TempDir()
	run(t, bermEnv(t, clientRoot, docker, "push", host+"/demo/echo:v1", fixturePath("echo.wasm")))
	slow := trickleTo(t, host)
	base := startHTTPEnv(t, serverRoot, []string{"DOCKER_CONFIG=" + docker},
		"--token", "tok", "--registry-timeout", "2s", "--registry-min-rate", "0")
	fails(t, bermEnv(t, clientRoot, docker, "deploy", "--server", base, "--token", "tok", "e", slow+"/demo/echo:v1"),
		"pull failed", "request timeout of 2s")
}
