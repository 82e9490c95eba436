package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/runtime/store"
)

// A throwaway deployment is installed, never recorded, and calls the
// deployed programs it names as a served one would: nest's image run as
// "outer" reaches the deployed nest through berm.call.
func TestThrowawayCallsDeployed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nest := fixture(t, "testdata/nest.wasm")
	svc := service.New(e.rt, e.st, nil)
	outer, err := svc.Throwaway(ctx, "outer", nest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if outer.Manifest == nil || len(outer.Manifest.Calls) == 0 {
		t.Fatalf("Throwaway returned %+v, want nest's program", outer)
	}
	if _, err := e.st.Deployment("outer"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("the throwaway's record: %v, want ErrNotDeployed", err)
	}
	out, err := svc.Call(ctx, "outer", "call_echo", []byte("{}"))
	if err != nil || !strings.HasPrefix(string(out.Result), "refused:") {
		t.Fatalf("call_echo with nest not deployed = %q, %v; want the callee refused", out.Result, err)
	}

	if _, err := svc.Deploy(ctx, "nest", nest, "nest.wasm", nil); err != nil {
		t.Fatal(err)
	}
	fresh := service.New(newRuntime(t, e.st), e.st, nil)
	if _, err := fresh.Throwaway(ctx, "outer", nest, nil); err != nil {
		t.Fatal(err)
	}
	out, err = fresh.Call(ctx, "outer", "call_echo", []byte("{}"))
	if err != nil || out.Failed || !strings.Contains(string(out.Result), `"via":"nest"`) {
		t.Fatalf("call_echo with nest deployed = %q (failed %v: %s), %v; want nest.echo's result", out.Result, out.Failed, out.Failure, err)
	}
}
