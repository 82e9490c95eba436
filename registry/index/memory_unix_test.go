//go:build unix

package index_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berm-dev/berm/registry/index"
)

// maxPeak bounds the peak RSS of a process that opens and searches a
// hostile index: the test binary and go-git, with room. Before the bounds
// one 8 MiB file of junk lines took 3.4 GB, three 8.6 GB, and every later
// search 2 GB.
const maxPeak = 256 << 20

// TestHostileIndexMemory: opening and searching the hostile
// indexes, first (clone and read) and later (the snapshot), peaks under
// maxPeak, each measured as a process of its own.
func TestHostileIndexMemory(t *testing.T) {
	if os.Getenv("BERM_INDEX_CHILD") != "" {
		t.Skip("the child runs TestHostileIndexChild")
	}
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files int
	}{{"one file", 1}, {"three files", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, root := junkIndex(t, tc.files), t.TempDir()
			for _, run := range []string{"first", "later"} {
				if peak := childPeak(t, url, root); peak > maxPeak {
					t.Errorf("%s search: peak RSS %d MiB, past %d MiB", run, peak>>20, maxPeak>>20)
				} else {
					t.Logf("%s search: peak RSS %d MiB", run, peak>>20)
				}
			}
		})
	}
}

// childPeak runs TestHostileIndexChild on url under root in a process of
// its own and returns the peak RSS it reports, in bytes.
func childPeak(t *testing.T, url, root string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileIndexChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "BERM_INDEX_CHILD="+url, "BERM_INDEX_CHILD_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "peak bytes: ")
	peak, err := strconv.ParseInt(strings.Fields(after + " ")[0], 10, 64)
	if !ok || err != nil {
		t.Fatalf("child said no peak:\n%s", out)
	}
	return peak
}

// TestHostileIndexChild is TestHostileIndexMemory's child: it opens the
// index BERM_INDEX_CHILD under BERM_INDEX_CHILD_ROOT, searches it, and logs
// its peak RSS.
func TestHostileIndexChild(t *testing.T) {
	url := os.Getenv("BERM_INDEX_CHILD")
	if url == "" {
		t.Skip("run by TestHostileIndexMemory")
	}
	ix, err := index.Open(context.Background(), os.Getenv("BERM_INDEX_CHILD_ROOT"), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := ix.Search("read a file", 10); err != nil || len(hits) == 0 {
		t.Fatalf("search: %v, %d hits", err, len(hits))
	}
	t.Logf("peak bytes: %d", peakRSS(t))
}

// peakRSS is this process's peak RSS: Linux's VmHWM, which a fork's
// getrusage would report as its parent's, else getrusage's.
func peakRSS(t *testing.T) int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		_, after, ok := strings.Cut(string(b), "VmHWM:")
		if kb, err := strconv.ParseInt(strings.Fields(after + " ")[0], 10, 64); ok && err == nil {
			return kb << 10
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes there, kilobytes elsewhere
	}
	return ru.Maxrss << 10
}
