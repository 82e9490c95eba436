package mcpserve_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/internal/mcpservice"
	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

// blackout is a State whose table and images go unavailable on demand, as
// a database does when it stops.
type blackout struct {
	store.State
	down atomic.Bool
}

var errBlackout = fmt.Errorf("postgres at db.internal:5432: %w: connection refused", store.ErrUnavailable)

func (b *blackout) Deployments() ([]store.Deployment, []store.Damaged, error) {
	if b.down.Load() {
		return nil, nil, errBlackout
	}
	return b.State.Deployments()
}

func (b *blackout) Deployment(name string) (store.Deployment, error) {
	if b.down.Load() {
		return store.Deployment{}, errBlackout
	}
	return b.State.Deployment(name)
}

// The control API answers a state it cannot reach with 503 and the kind
// "unavailable", which a client may try again on, and names nothing of where
// the database is.
func TestControlStateUnavailable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Limits{}, nil)
	h.deploy(t, "echo", "echo.wasm")
	state := &blackout{State: h.st}
	h.svc = service.New(h.rt, state, nil)
	h.srv = mcpserve.New(mcpservice.New(h.svc), nil)
	ts := h.serveHTTP(t, mcpserve.HTTPConfig{})
	state.down.Store(true)
	for _, path := range []string{"/v1/programs", "/v1/programs/echo"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body control.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || body.Kind != "unavailable" {
			t.Errorf("GET %s = %d %+v, want 503 unavailable", path, resp.StatusCode, body)
		}
		if strings.Contains(body.Error, "db.internal") {
			t.Errorf("GET %s names the database: %q", path, body.Error)
		}
	}
}
