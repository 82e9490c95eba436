package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// rssChild is set in the process TestResidentMemoryBound starts.
const rssChild = "BERM_TEST_RSS_CHILD"

// TestResidentMemoryBound grows one instance's memory a page at a time to the
// default limit, writing every page, and checks that the process's peak
// resident memory rose by little more than the limit: growing must not copy.
// It measures in a process of its own, which nothing else has touched.
func TestResidentMemoryBound(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	if os.Getenv(rssChild) != "" {
		measureGrowth(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestResidentMemoryBound$", "-test.v")
	cmd.Env = append(os.Environ(), rssChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var peak, limit uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if _, err := fmt.Sscanf(strings.TrimSpace(sc.Text()), "peak growth %d of a limit of %d", &peak, &limit); err == nil {
			break
		}
	}
	if limit == 0 {
		t.Fatalf("the child reported no figure:\n%s", out)
	}
	t.Logf("resident memory rose by %d MiB growing to a limit of %d MiB", peak>>20, limit>>20)
	if peak > limit*3/2 {
		t.Errorf("resident memory rose by %d MiB, over 1.5 × the limit of %d MiB", peak>>20, limit>>20)
	}
}

func measureGrowth(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, nil)
	deployLocal(t, rt, "grow", "grow.wasm")
	goruntime.GC()
	debug.FreeOSMemory()
	// Writing 5 resets the peak to the current figure (Linux 4.0 on); where
	// refused, the peak so far still bounds the growth from above.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	before := procStatus(t, "VmRSS")
	out, err := rt.Call(ctx, "grow", "grow", []byte(`{}`))
	limit := rt.Limits().Memory
	check(t, out, err, want{result: strconv.FormatUint(limit/runtime.PageSize, 10)})
	peak := procStatus(t, "VmHWM")
	fmt.Printf("peak growth %d of a limit of %d (resident %d before, peak %d)\n", peak-min(peak, before), limit, before, peak)
}

// procStatus reads a figure of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func TestTotalMemory(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, &runtime.Config{Limits: runtime.Limits{Memory: 8 << 20, TotalMemory: 4 << 20}})
	// One instance alone stops at TotalMemory, under its own limit, less
	// the program's image, which the budget holds for the program's life.
	held, _ := runtime.ImageBytes(deployLocal(t, rt, "grow", "grow.wasm"))
	pages := strconv.FormatUint((4<<20-held)/runtime.PageSize, 10)
	out, err := rt.Call(ctx, "grow", "grow", []byte(`{}`))
	check(t, out, err, want{result: pages})
	// What it held is given back when the call ends: the same again.
	out, err = rt.Call(ctx, "grow", "grow", []byte(`{}`))
	check(t, out, err, want{result: pages})
	// A nested call whose instance would pass it is refused to its caller
	// as the host's, not as a trap of the callee.
	out, err = rt.Call(ctx, "grow", "grow_call", []byte(`{}`))
	check(t, out, err, want{result: "refused:berm.call grow.grow: host error: memory: an instance takes 64 KiB (its memory and what wazero builds for it), more than is left of the limit of 4096 KiB on all instances together"})

	// A top-level call likewise, with ErrHost.
	tiny := newRuntime(t, &runtime.Config{Limits: runtime.Limits{TotalMemory: 32 << 10}})
	deployLocal(t, tiny, "grow", "grow.wasm")
	_, err = tiny.Call(ctx, "grow", "grow", []byte(`{}`))
	if !errors.Is(err, runtime.ErrHost) || errors.Is(err, runtime.ErrTrap) {
		t.Fatalf("an instance past TotalMemory: %v, want ErrHost and no trap", err)
	}

	// Without TotalMemory, each instance has its own limit.
	free := newRuntime(t, &runtime.Config{Limits: runtime.Limits{Memory: 8 << 20}})
	deployLocal(t, free, "grow", "grow.wasm")
	out, err = free.Call(ctx, "grow", "grow_call", []byte(`{}`))
	check(t, out, err, want{result: "128"})
}

// TestMemoryIsFresh checks that an instance never sees what an earlier one
// wrote, whether its memory was zeroed in place (a small one) or replaced.
func TestMemoryIsFresh(t *testing.T) {
	ctx := context.Background()
	for _, limit := range []uint64{256 << 10, 8 << 20} {
		rt := newRuntime(t, &runtime.Config{Limits: runtime.Limits{Memory: limit}})
		deployLocal(t, rt, "grow", "grow.wasm")
		for range 3 {
			out, err := rt.Call(ctx, "grow", "fresh", []byte(`{}`))
			check(t, out, err, want{result: strconv.FormatUint(limit/runtime.PageSize, 10)})
		}
		// Nested, two instances at once.
		out, err := rt.Call(ctx, "grow", "grow_call", []byte(`{}`))
		check(t, out, err, want{result: strconv.FormatUint(limit/runtime.PageSize, 10)})
		out, err = rt.Call(ctx, "grow", "fresh", []byte(`{}`))
		check(t, out, err, want{result: strconv.FormatUint(limit/runtime.PageSize, 10)})
	}
}
