package service_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Grants are recorded with the deployment, listed, and served: a redeploy
// of the same image with other grants is a change another process's sync
// picks up, and the program it then runs has the new grants.
func TestGrantsRecordedAndServed(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	svc := service.New(e.rt, e.st, &service.Options{PollInterval: time.Hour})
	start(t, svc, nil)
	echo := fixture(t, "testdata/echo.wasm")
	granted := &sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data"}}, Hosts: []string{"api.example.com"}}
	info, err := svc.Deploy(context.Background(), "echo", echo, "", granted)
	if err != nil {
		t.Fatal(err)
	}
	if info.Grants == nil || info.Grants.Dirs[0].Host != dir {
		t.Fatalf("Deploy reports grants %+v, want the directory", info.Grants)
	}
	// echo imports no WASI and declares no berm.http: both grants are unusable.
	warnings := strings.Join(info.Warnings, "\n")
	for _, want := range []string{"granted directories but imports no WASI file functions", "granted network hosts but does not declare berm.http"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings)
		}
	}
	loop, err := svc.Deploy(context.Background(), "loop", echo, "", &sandbox.Grants{Hosts: []string{"localhost:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(loop.Warnings, "\n"); !strings.Contains(w, "loop is granted localhost:8080, which resolves to a loopback address") {
		t.Errorf("a grant of localhost warns %q, want that it resolves to loopback", w)
	}
	if err := svc.Remove(context.Background(), "loop", false); err != nil {
		t.Fatal(err)
	}
	if p := e.rt.Program("echo"); p == nil || len(p.Grants.Dirs) != 1 || p.Grants.Hosts[0] != "api.example.com" {
		t.Fatalf("runtime program grants = %+v", p)
	}
	list, err := svc.List(context.Background())
	if err != nil || len(list) != 1 || list[0].Grants == nil || list[0].Grants.Hosts[0] != "api.example.com" {
		t.Fatalf("List = %+v, %v; want the grants", list, err)
	}
	details, err := svc.Inspect(context.Background(), "echo")
	if err != nil || details.Grants == nil || details.Grants.Dirs[0].Guest != "/data" {
		t.Fatalf("Inspect = %+v, %v; want the grants", details.Grants, err)
	}

	// Another process redeploys the same image without grants: it says they
	// are dropped, and the sync serves the program without them.
	other, err := service.New(newRuntime(t, e.st), e.st, nil).Deploy(context.Background(), "echo", echo, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(other.Warnings, "\n"), "had grants (ro:/data,net:api.example.com) and this deployment grants nothing: they are dropped") {
		t.Errorf("redeploy without grants warns %q, want that they are dropped", other.Warnings)
	}
	if err := svc.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := e.rt.Program("echo"); p == nil || !p.Grants.IsZero() {
		t.Fatalf("after a redeploy of the same image without grants the runtime runs %+v, want no grants", p.Grants)
	}
	if p := svc.Program("echo"); p == nil || !p.Grants.IsZero() {
		t.Fatalf("served %+v, want no grants", p)
	}

	// --init-each-call is a setting, not a grant: dropping it drops none,
	// and says so.
	if _, err := svc.Deploy(context.Background(), "echo", echo, "", &sandbox.Grants{InitEachCall: true}); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Deploy(context.Background(), "echo", echo, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(again.Warnings, "\n"); strings.Contains(w, "had grants") ||
		!strings.Contains(w, "echo ran _initialize at every call (--init-each-call) and this deployment does not") {
		t.Errorf("a redeploy without --init-each-call warns %q, want that it is dropped, and no word of grants", w)
	}
}

// A grant whose directory is missing is refused at deploy, naming it, and
// changes nothing; one that goes missing later stops the program from being
// served again (a restart) rather than serving it with less.
func TestGrantOfMissingDirectory(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	svc := service.New(e.rt, e.st, nil)
	echo := fixture(t, "testdata/echo.wasm")
	if _, err := svc.Deploy(context.Background(), "echo", echo, "", nil); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	_, err := svc.Deploy(context.Background(), "echo", echo, "", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: gone, Guest: "/gone"}}})
	if !errors.Is(err, sandbox.ErrGrant) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("deploy with a missing directory = %v, want ErrGrant naming %s", err, gone)
	}
	if d, err := e.st.Deployment("echo"); err != nil || d.Grants != nil {
		t.Fatalf("a refused deploy changed the record: %+v, %v", d, err)
	}

	// Granted, then the directory goes: a restarted server does not serve
	// the program (its calls would see less than was granted, or another
	// directory put in its place).
	granted := filepath.Join(dir, "data")
	if err := os.Mkdir(granted, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Deploy(context.Background(), "echo", echo, "", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: granted, Guest: "/data"}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(granted); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, e.st)
	restarted := service.New(rt, e.st, &service.Options{PollInterval: time.Hour})
	start(t, restarted, nil)
	<-restarted.Loaded()
	if p := rt.Program("echo"); p != nil {
		t.Fatalf("a program whose granted directory is gone runs after a restart: %+v", p.Grants)
	}
}
