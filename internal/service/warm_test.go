package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/service"
)

// A started service compiles its programs without running their
// _initialize, which each program's first call runs: six programs whose
// _initialize takes 2 s by the clock (past the snapshot's 1 s, which each
// spent at start before the snapshot was lazy, one after the other) hold
// up neither the load nor a program beside them.
func TestStartRunsNoInitialize(t *testing.T) {
	e := newEnv(t)
	slow := fixture(t, "runtime/testdata/init_slow.wasm")
	names := []string{"slow1", "slow2", "slow3", "slow4", "slow5", "slow6"}
	for _, name := range names {
		e.record(t, name, slow)
	}
	e.record(t, "zecho", fixture(t, "testdata/echo.wasm")) // loaded last
	svc := service.New(e.rt, e.st, nil)
	begun := time.Now()
	start(t, svc, nil)
	<-svc.Loaded()
	if took := time.Since(begun); took >= 5*time.Second {
		t.Errorf("the first load took %s, want it well under the 6 s the snapshots would take", took)
	}
	out, err := e.rt.Call(context.Background(), "zecho", "echo", []byte(`{"message":"hi"}`))
	if err != nil || string(out.Result) != `{"message":"hi"}` {
		t.Errorf("zecho.echo: %q, %v; want its arguments back", out.Result, err)
	}
}

// Deploy takes the snapshot to warn of a refused one, with why.
func TestDeployWarnsRefusedSnapshot(t *testing.T) {
	e := newEnv(t)
	svc := service.New(e.rt, e.st, nil)
	info, err := svc.Deploy(context.Background(), "fat", fixture(t, "runtime/testdata/init_fat.wasm"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "fat: _initialize left more than 16 MiB of memory, the most a snapshot may hold (leave less, or build the rest in the tool); _initialize runs at each call instead"
	if w := strings.Join(info.Warnings, "\n"); !strings.Contains(w, want) {
		t.Errorf("warnings %q, want %q", info.Warnings, want)
	}
}
