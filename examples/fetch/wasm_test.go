//go:build !wasip1

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// TestImage runs the committed image in the real runtime over the real
// berm.http, against a loopback server granted by address: net/http in the
// program, bermhttp's transport, the host's request and its refusal.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 10 MB image")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("from the server"))
	}))
	defer srv.Close()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{
		Syscalls:     []runtime.Syscall{host.HTTP(host.HTTPConfig{})},
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	image, err := os.ReadFile("fetch.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "fetch", image, &sandbox.Grants{Hosts: []string{srv.Listener.Addr().String()}}); err != nil {
		t.Fatal(err)
	}

	out, err := rt.Call(ctx, "fetch", "fetch", []byte(`{"url":"`+srv.URL+`/x"}`))
	if err != nil || out.Failed {
		t.Fatalf("fetch: %v, failure %q", err, out.Failure)
	}
	var got fetchResult
	if err := json.Unmarshal(out.Result, &got); err != nil {
		t.Fatal(err)
	}
	if want := (fetchResult{URL: srv.URL + "/x", Status: 200, ContentType: "text/plain", Body: "from the server", Bytes: 15}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}

	out, err = rt.Call(ctx, "fetch", "fetch", []byte(`{"url":"http://example.com/"}`))
	if err != nil || !out.Failed || !strings.HasPrefix(string(out.Failure), "berm.http: GET example.com:80: the host is not granted") {
		t.Errorf("fetch of a host not granted: %v, %q, %q; want the host's refusal", err, out.Result, out.Failure)
	}
}
