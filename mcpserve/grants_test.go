package mcpserve_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Grants travel through the control API: a deploy carries them, the list
// and inspect report them, and the served program has them. A grant the
// server cannot hold is refused as a grant, with the path named.
func TestControlAPIGrants(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{Token: "tok"})
	ctx := context.Background()
	client, err := control.NewClient(ts.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	image, _ := os.ReadFile("../testdata/echo.wasm")
	dir := t.TempDir()
	tz := "UTC"
	grants := &sandbox.Grants{
		Dirs:  []sandbox.Dir{{Host: dir, Guest: "/data", Write: true}},
		Env:   []sandbox.Env{{Name: "TZ", Value: &tz}},
		Hosts: []string{"api.example.com:8443"},
	}
	info, err := client.Deploy(ctx, "echo", image, "echo.wasm", grants)
	if err != nil || info.Grants == nil || info.Grants.Dirs[0].Host != dir || *info.Grants.Env[0].Value != "UTC" {
		t.Fatalf("Deploy = %+v, %v; want the grants back", info, err)
	}
	if p := h.svc.Program("echo"); p == nil || !p.Grants.Writable() || p.Grants.Hosts[0] != "api.example.com:8443" {
		t.Fatalf("served %+v, want the grants", p)
	}
	list, err := client.List(ctx)
	if err != nil || len(list) != 1 || list[0].Grants == nil || list[0].Grants.Hosts[0] != "api.example.com:8443" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	d, err := client.Inspect(ctx, "echo")
	if err != nil || d.Grants == nil || d.Grants.Dirs[0].Guest != "/data" {
		t.Fatalf("Inspect = %+v, %v", d.Grants, err)
	}

	gone := filepath.Join(dir, "gone")
	_, err = client.Deploy(ctx, "echo", image, "", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: gone, Guest: "/gone"}}})
	if !errors.Is(err, sandbox.ErrGrant) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("deploy with the server missing the directory = %v, want ErrGrant naming it", err)
	}
	for _, bad := range []string{"{", `{"dirs":[{"host":"/x","guest":"/x","mode":"rw"}]}`, `{"hosts":["HOST"]}`} {
		req, _ := http.NewRequest(http.MethodPut, ts.URL+"/v1/programs/echo?grants="+url.QueryEscape(bad), strings.NewReader(string(image)))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/wasm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, resp, http.StatusBadRequest, "grant")
	}
	if p := h.svc.Program("echo"); p == nil || !p.Grants.Writable() {
		t.Fatalf("a refused deploy changed what is served: %+v", p)
	}
}

// A tool's annotations follow from its deployment: read-only unless it may
// write (a read-write directory, berm.set or berm.delete, or a callee that
// may), open-world only when a network host is granted to it or a callee.
// They change when a callee is served or removed.
func TestAnnotationsFollowGrants(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	cs := h.connect(t, nil)
	ctx := context.Background()
	deploy := func(name, file string, g *sandbox.Grants) {
		t.Helper()
		image, err := os.ReadFile(filepath.Join("..", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Deploy(ctx, name, image, file, g); err != nil {
			t.Fatal(err)
		}
	}
	hints := func(tool string) (readOnly, openWorld bool) {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range res.Tools {
			if tt.Name == tool {
				a := tt.Annotations
				if a == nil || a.OpenWorldHint == nil {
					t.Fatalf("%s has annotations %+v, want both hints set", tool, a)
				}
				return a.ReadOnlyHint, *a.OpenWorldHint
			}
		}
		t.Fatalf("%s is not listed", tool)
		return
	}
	check := func(tool string, readOnly, openWorld bool) {
		t.Helper()
		if r, o := hints(tool); r != readOnly || o != openWorld {
			t.Errorf("%s: readOnlyHint %v openWorldHint %v, want %v %v", tool, r, o, readOnly, openWorld)
		}
	}
	deploy("echo", "echo.wasm", nil)
	check("echo_echo", true, false)
	deploy("echo", "echo.wasm", &sandbox.Grants{Hosts: []string{"api.example.com"}})
	check("echo_echo", false, true) // berm.http may POST
	deploy("echo", "echo.wasm", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: t.TempDir(), Guest: "/d", Write: true}}})
	check("echo_echo", false, false)
	deploy("kv", "kv.wasm", nil) // declares berm.set and berm.delete
	check("kv_get", false, false)

	// nest may call ghost.tool: read-only while ghost is not served, not once
	// a ghost that writes is, read-only again when it goes.
	deploy("nest", "nest.wasm", nil)
	check("nest_echo", true, false)
	deploy("ghost", "kv.wasm", &sandbox.Grants{Hosts: []string{"api.example.com"}})
	check("nest_echo", false, true)
	if err := h.svc.Remove(ctx, "ghost", false); err != nil {
		t.Fatal(err)
	}
	check("nest_echo", true, false)
}
