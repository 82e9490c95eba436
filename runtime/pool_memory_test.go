//go:build linux && (amd64 || arm64)

package runtime_test

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/berm-dev/berm/runtime"
)

// pagesImages are the two images of the pages fixture: one mapped into
// each instance (4 MiB), one copied (64 KiB).
var pagesImages = []string{"pages.wasm", "pages_small.wasm"}

// pageStates reads from the process's page map the state of each page of b:
// '.' not present, 'r' present and a file's (an image's page not written),
// 'w' present and the process's own (written, or read as zeros), 's' out in
// swap.
func pageStates(t *testing.T, b []byte) string {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no page map: %v", err)
	}
	defer f.Close()
	page := os.Getpagesize()
	n := len(b) / page
	raw := make([]byte, n*8)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if _, err := f.ReadAt(raw, int64(base/uintptr(page))*8); err != nil {
		t.Fatalf("page map: %v", err)
	}
	s := make([]byte, n)
	for i := range s {
		e := *(*uint64)(unsafe.Pointer(&raw[i*8]))
		switch {
		case e&(1<<63) == 0 && e&(1<<62) != 0:
			s[i] = 's'
		case e&(1<<63) == 0:
			s[i] = '.'
		case e&(1<<61) != 0:
			s[i] = 'r'
		default:
			s[i] = 'w'
		}
	}
	return string(s)
}

// idleStates returns the page states of p's one idle instance, and the
// length of its image in pages.
func idleStates(t *testing.T, p *runtime.Program) (string, int) {
	t.Helper()
	mems, image := runtime.IdleMemory(p)
	if len(mems) != 1 {
		t.Fatalf("%d idle instances, want 1", len(mems))
	}
	return pageStates(t, mems[0]), image / os.Getpagesize()
}

// differ describes where two page states differ, briefly.
func differ(want, got string) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d pages, want %d", len(got), len(want))
	}
	var b strings.Builder
	shown := 0
	for i := range want {
		if want[i] != got[i] && shown < 8 {
			fmt.Fprintf(&b, " page %d: %c, want %c;", i, got[i], want[i])
			shown++
		}
	}
	return b.String()
}

// A reset instance's pages are as a new instance's, page for page, whatever
// the call before read or wrote: which are present, which the file's, which
// its own. Otherwise a call could time its reads and writes page by page
// and learn which pages earlier calls touched (a fault costs microseconds,
// a present page nothing). A new instance has its whole image present, the
// mapped image's pages the file's (a write copies them), and nothing past
// it.
func TestPoolResetPages(t *testing.T) {
	if plainEnv {
		t.Skip("the plain path pools no instances")
	}
	ctx := context.Background()
	for _, file := range pagesImages {
		for _, tool := range []string{"none", "read", "write", "fill"} {
			t.Run(file+"/"+tool, func(t *testing.T) {
				rt := poolRuntime(t, runtime.Config{})
				p := deployPoolFile(t, rt, "pages", file, nil)
				if err := runtime.AddIdle(ctx, rt, p); err != nil {
					t.Fatal(err)
				}
				fresh, image := idleStates(t, p)
				if image == 0 {
					t.Fatal("no memory image: the test is void")
				}
				in := "w" // a copied image is the instance's own
				if file == "pages.wasm" {
					in = "r"
				}
				// Past the image, the region's kept prefix is present and
				// the instance's own; nothing is past that.
				kept := max(image, runtime.KeptPrefix/os.Getpagesize())
				want := strings.Repeat(in, image) + strings.Repeat("w", kept-image) + strings.Repeat(".", len(fresh)-kept)
				if fresh != want {
					t.Errorf("a new instance's pages:%s", differ(want, fresh))
				}
				for i := range 2 {
					before, _ := runtime.Reused(p)
					if out, err := rt.Call(ctx, "pages", tool, []byte(`{}`)); err != nil || string(out.Result) != "done" {
						t.Fatalf("%s: %q, %v", tool, out.Result, err)
					}
					if after, _ := runtime.Reused(p); after != before+1 {
						t.Fatal("the call did not run in the idle instance: the test is void")
					}
					if got, _ := idleStates(t, p); got != fresh {
						t.Fatalf("after %s (%d), the instance's pages differ from a new one's:%s", tool, i+1, differ(fresh, got))
					}
				}
			})
		}
	}
}

// vmRSS returns the process's resident memory, in bytes.
func vmRSS(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no process status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS: %q", rest)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// Idle instances hold none of the memory their calls wrote past the image
// nor the copies of a mapped image's pages: six programs, each called once
// to fill its 64 MiB, leave the process well under Limits.TotalMemory
// (they held 6 × 64 MiB when resets cleared pages in place).
func TestPoolIdleMemory(t *testing.T) {
	if plainEnv {
		t.Skip("the plain path pools no instances")
	}
	const total = 100 << 20
	rt := poolRuntime(t, runtime.Config{Limits: runtime.Limits{Memory: 64 << 20, TotalMemory: total}})
	ctx := context.Background()
	goruntime.GC()
	before := vmRSS(t)
	for i := range 6 {
		name := fmt.Sprintf("pages%d", i)
		p := deployPoolFile(t, rt, name, pagesImages[i%2], nil)
		if out, err := rt.Call(ctx, name, "fill", []byte(`{}`)); err != nil || string(out.Result) != "done" {
			t.Fatalf("%s.fill: %q, %v", name, out.Result, err)
		}
		if runtime.Idle(p) != 1 {
			t.Fatalf("%s: %d idle instances, want 1: the test is void", name, runtime.Idle(p))
		}
	}
	goruntime.GC()
	if grown := int64(vmRSS(t)) - int64(before); grown > total {
		t.Fatalf("six idle instances grew the process by %d MiB, over Limits.TotalMemory's %d MiB", grown>>20, total>>20)
	}
}

// A small memory (echo's 64 KiB, no image) is present and the instance's
// own throughout, new and after every reset, which clears it in place.
func TestPoolResetPagesSmall(t *testing.T) {
	if plainEnv {
		t.Skip("the plain path pools no instances")
	}
	ctx := context.Background()
	rt := poolRuntime(t, runtime.Config{})
	p, err := rt.Deploy(ctx, "echo", fixture(t, "echo.wasm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.AddIdle(ctx, rt, p); err != nil {
		t.Fatal(err)
	}
	fresh, _ := idleStates(t, p)
	if want := strings.Repeat("w", len(fresh)); fresh != want {
		t.Errorf("a new instance's pages:%s", differ(want, fresh))
	}
	args := []byte(`{"message":"` + strings.Repeat("x", 20000) + `"}`)
	for i := range 2 {
		before, _ := runtime.Reused(p)
		if out, err := rt.Call(ctx, "echo", "echo", args); err != nil || string(out.Result) != string(args) {
			t.Fatalf("echo: %d bytes, %v", len(out.Result), err)
		}
		if after, _ := runtime.Reused(p); after != before+1 {
			t.Fatal("the call did not run in the idle instance: the test is void")
		}
		if got, _ := idleStates(t, p); got != fresh {
			t.Fatalf("after echo (%d), the instance's pages differ from a new one's:%s", i+1, differ(fresh, got))
		}
	}
}

// A region kept for reuse is handed to the next instance as a new one is,
// whatever the instances that had it did: its first KeptPrefix bytes
// present, the process's own, zero and accessible, and past them no page
// present and nothing accessible. Otherwise a new instance could time its
// reads, writes and grows to learn what earlier calls touched. The regions
// come back from calls on the plain path, from instances discarded after a
// grow, and from idle instances closed when their program is removed, a
// mapped image's among them.
func TestRegionReuse(t *testing.T) {
	ctx := context.Background()
	page := os.Getpagesize()
	for _, c := range []struct{ file, tool string }{
		{"pages_small.wasm", "none"},  // the data segments' pages at most
		{"pages_small.wasm", "read"},  // a few pages read, in the prefix and past it
		{"pages_small.wasm", "write"}, // a few pages written
		{"pages_small.wasm", "fill"},  // all 64 MiB, the prefix with it
		{"pages.wasm", "none"},        // a mapped image over the prefix
		{"pages.wasm", "fill"},
		{"grow.wasm", "grow"}, // grown a page at a time to 64 MiB
		{"echo.wasm", "echo"}, // 64 KiB, less than the prefix
	} {
		t.Run(c.file+"/"+c.tool, func(t *testing.T) {
			for _, plain := range []bool{false, true} {
				rt := poolRuntime(t, runtime.Config{Plain: plain, Limits: runtime.Limits{Memory: 64 << 20}})
				name := strings.ReplaceAll(strings.TrimSuffix(c.file, ".wasm"), "_", "-")
				args := []byte(`{}`)
				if name == "echo" {
					if _, err := rt.Deploy(ctx, name, fixture(t, c.file), nil); err != nil {
						t.Fatal(err)
					}
					args = []byte(`{"message":"` + strings.Repeat("x", 20000) + `"}`)
				} else {
					deployPoolFile(t, rt, name, c.file, nil)
				}
				if _, err := rt.Call(ctx, name, c.tool, args); err != nil {
					t.Fatalf("%s.%s: %v", name, c.tool, err)
				}
				rt.Remove(name) // its idle instances give their regions back
				mems, accessible := runtime.FreeRegions(rt)
				if len(mems) == 0 {
					t.Fatal("no region kept for reuse: the test is void")
				}
				for i, mem := range mems {
					kept := min(runtime.KeptPrefix, len(mem))
					want := strings.Repeat("w", kept/page) + strings.Repeat(".", (len(mem)-kept)/page)
					if got := pageStates(t, mem); got != want {
						t.Errorf("plain %v: region %d's pages differ from a new one's:%s", plain, i, differ(want, got))
					}
					if accessible[i] != uint64(kept) {
						t.Errorf("plain %v: region %d accessible to %d bytes, want %d", plain, i, accessible[i], kept)
					}
					if !allZero(mem[:kept]) {
						t.Errorf("plain %v: region %d's kept prefix is not zero", plain, i)
					}
				}
			}
		})
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
