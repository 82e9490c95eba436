package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/httpbound"
)

// gitCommit commits a change to the repository at dir (a file beside the
// listings, so the programs stay the same) and returns the new head.
func gitCommit(t *testing.T, dir, what string) string {
	t.Helper()
	git := gitBinary(t)
	if err := os.WriteFile(filepath.Join(dir, "NOTES"), []byte(what), 0o644); err != nil {
		t.Fatal(err)
	}
	var head string
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", what}, {"rev-parse", "HEAD"}} {
		cmd := exec.Command(git, append([]string{"-C", dir, "-c", "gc.auto=0"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		head = strings.TrimSpace(string(out))
	}
	return head
}

// gate holds the requests for an index's list of references (its pack,
// with pack) while it is shut, until it opens or the test ends, and counts
// them.
type gate struct {
	pack    bool // set before shut
	shut    atomic.Bool
	open    chan struct{}
	stop    chan struct{}
	once    sync.Once
	held    atomic.Int64
	arrived chan struct{} // a value for each request held
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), stop: make(chan struct{}), arrived: make(chan struct{}, 64)}
}

func (g *gate) hold(kind string) {
	if !g.shut.Load() || (kind == "pack") != g.pack {
		return
	}
	g.held.Add(1)
	g.arrived <- struct{}{}
	select {
	case <-g.open:
	case <-g.stop:
	}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// fetchOf is the fetch of the clone of url under root under way, or nil.
func fetchOf(root, url string) *fetch {
	fetches.Lock()
	defer fetches.Unlock()
	return fetches.dirs[filepath.Join(root, Dir, key(url))]
}

// waitFetches waits for the fetches under way of the clones under root to
// end, failing the test past two minutes.
func waitFetches(t *testing.T, root string) {
	t.Helper()
	var under []*fetch
	fetches.Lock()
	for dir, f := range fetches.dirs {
		if strings.HasPrefix(dir, root+string(filepath.Separator)) {
			under = append(under, f)
		}
	}
	fetches.Unlock()
	for _, f := range under {
		within(t, "a fetch", func() error { <-f.done; return nil })
	}
}

// TestSlowFetch: a search with a clone answers from it, Offline saying so
// (ErrFetching), while the fetch of an index whose server trickles or
// holds it goes on, one at a time; the fetch ends within its own bound,
// whoever waits for it, and the searches after it see what it fetched. A
// search with no clone waits for the first.
func TestSlowFetch(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	gitIndex(t, filepath.Join(root, "idx"), 30)
	// The requests' own bounds pass a trickle of four bytes a second, as
	// the attacker's of 5 KB/s passes the default's 4 KiB/s: only the
	// fetch's bound ends it.
	ctx := withLimits(t.Context(), httpbound.Limits{MinRate: 1, Window: 2 * time.Second})

	// slowIndex is a root for clones, and a server of the indexes under
	// root whose list of references its gate holds while shut; a request
	// for one counts in refs. When the test ends the gate lets go, then
	// the server's requests end, then the fetches of the clones, then the
	// root goes.
	slowIndex := func(t *testing.T, refs *atomic.Int64, trickling *atomic.Bool) (string, *gitServer, *gate) {
		t.Helper()
		dir := t.TempDir()
		t.Cleanup(func() { waitFetches(t, dir) })
		g := newGate()
		srv := serveGit(t, root, func(_, kind string) serveMode {
			if kind == "refs" {
				refs.Add(1)
			}
			g.hold(kind)
			if kind == "refs" && trickling.Load() {
				return trickle
			}
			return honest
		})
		t.Cleanup(func() { close(g.stop) })
		return dir, srv, g
	}
	// answered is a search answered from the clone while the fetch went on.
	answered := func(t *testing.T, ix *Index, err error, commit string) {
		t.Helper()
		if err != nil {
			t.Error(err)
			return
		}
		if !errors.Is(ix.Offline, ErrFetching) || !strings.Contains(ix.Offline.Error(), ": still fetching after ") ||
			ix.Commit != commit || ix.Len() != 30 {
			t.Errorf("Offline %v, commit %s (want %s), %d programs: want the clone searched, the fetch under way", ix.Offline, ix.Commit, commit, ix.Len())
		}
	}
	commitOf := func(t *testing.T, dir, url string) string {
		t.Helper()
		cur, err := readCurrent(filepath.Join(dir, Dir, key(url)))
		if err != nil {
			t.Fatal(err)
		}
		return cur.Commit
	}

	t.Run("trickle", func(t *testing.T) {
		// The attack: three searches at once of a clone past its age,
		// the index's server trickling its list of references.
		t.Parallel()
		var refs atomic.Int64
		var trickling atomic.Bool
		dir, srv, _ := slowIndex(t, &refs, &trickling)
		url := srv.URL + "/ok/idx"
		if _, err := Open(ctx, dir, url, nil); err != nil {
			t.Fatal(err)
		}
		commit := commitOf(t, dir, url)
		trickling.Store(true)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				ix, err := Open(ctx, dir, url, &Options{Refresh: true, Wait: 200 * time.Millisecond, Detach: true})
				answered(t, ix, err, commit)
			})
		}
		within(t, "three searches", func() error { wg.Wait(); return nil })
		// Still trickling: a byte of its first response a quarter second.
		if f := fetchOf(dir, url); f == nil || refs.Load() != 3 {
			t.Fatalf("fetch under way %v, %d lists of references asked for (the clone's two and one fetch's): want one fetch, still trickling",
				f != nil, refs.Load())
		}
	})

	t.Run("released", func(t *testing.T) {
		// Released, the fetch the searches left goes on and the next
		// search sees its commit.
		t.Parallel()
		repo := filepath.Join(root, "released")
		gitIndex(t, repo, 30)
		var refs atomic.Int64
		dir, srv, g := slowIndex(t, &refs, new(atomic.Bool))
		url := srv.URL + "/ok/released"
		if _, err := Open(ctx, dir, url, nil); err != nil {
			t.Fatal(err)
		}
		old := commitOf(t, dir, url)
		head := gitCommit(t, repo, "a second commit")
		g.shut.Store(true)
		within(t, "three searches", func() error {
			for range 3 {
				ix, err := Open(t.Context(), dir, url, &Options{Refresh: true, Wait: time.Millisecond, Detach: true})
				answered(t, ix, err, old)
			}
			return nil
		})
		// The fetch the searches left may reach the server after they
		// answered: wait for it to arrive, then count.
		within(t, "the fetch held", func() error { <-g.arrived; return nil })
		if g.held.Load() != 1 {
			t.Fatalf("%d fetches held, want one for the three searches", g.held.Load())
		}
		g.release()
		waitFetches(t, dir)
		ix, err := Open(t.Context(), dir, url, &Options{Wait: time.Millisecond})
		if err != nil || ix.Offline != nil || ix.Commit != head || ix.Len() != 30 {
			t.Fatalf("after the fetch: %v, Offline %v, commit %s (want %s)", err, ix.Offline, ix.Commit, head)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		// Not let go on, a fetch ends with the last search waiting for
		// it, and what it fetched goes: a process about to exit left a
		// clone half made at each search.
		t.Parallel()
		repo := filepath.Join(root, "stopped")
		gitIndex(t, repo, 30)
		dir, srv, g := slowIndex(t, new(atomic.Int64), new(atomic.Bool))
		url := srv.URL + "/ok/stopped"
		if _, err := Open(ctx, dir, url, nil); err != nil {
			t.Fatal(err)
		}
		clone := filepath.Join(dir, Dir, key(url))
		old := commitOf(t, dir, url)
		gitCommit(t, repo, "a second commit")
		g.pack = true // a clone under way
		g.shut.Store(true)
		stop, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := Open(stop, dir, url, &Options{Refresh: true})
			done <- err
		}()
		<-g.arrived
		cancel()
		if err, _ := within(t, "a search cancelled", func() error { return <-done }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Open cancelled = %v", err)
		}
		entries, _ := os.ReadDir(clone)
		if f := fetchOf(dir, url); f != nil || len(entries) != 2 || commitOf(t, dir, url) != old {
			t.Fatalf("fetch left under way %v; %d entries in the clone's directory, want current and its generation", f != nil, len(entries))
		}
		// Past the wait: the clone searched, saying the fetch stopped.
		ix, err := Open(ctx, dir, url, &Options{Refresh: true, Wait: time.Millisecond})
		if err != nil || !errors.Is(ix.Offline, ErrFetching) || !strings.Contains(ix.Offline.Error(), ": fetch stopped after 1ms: ") || ix.Commit != old {
			t.Fatalf("Open = %v, Offline %v, commit %s (want %s)", err, ix.Offline, ix.Commit, old)
		}
		entries, _ = os.ReadDir(clone)
		if f := fetchOf(dir, url); f != nil || len(entries) != 2 {
			t.Fatalf("fetch left under way %v; %d entries in the clone's directory, want 2", f != nil, len(entries))
		}
	})

	t.Run("no clone", func(t *testing.T) {
		// Nothing to answer from: the search waits for the first clone,
		// whatever its Wait.
		t.Parallel()
		dir, srv, g := slowIndex(t, new(atomic.Int64), new(atomic.Bool))
		url := srv.URL + "/ok/idx"
		g.shut.Store(true)
		done := make(chan error, 1)
		go func() {
			ix, err := Open(t.Context(), dir, url, &Options{Wait: time.Millisecond})
			if err == nil && (ix.Offline != nil || ix.Len() != 30) {
				err = fmt.Errorf("Offline %v, %d programs", ix.Offline, ix.Len())
			}
			done <- err
		}()
		<-g.arrived
		g.release()
		if err, _ := within(t, "the first clone", func() error { return <-done }); err != nil {
			t.Fatalf("the first clone: %v", err)
		}
	})

	t.Run("bound", func(t *testing.T) {
		// A fetch held past its bound ends with it (index too slow),
		// naming the host and the bound, with a clone or without.
		t.Parallel()
		dir, srv, g := slowIndex(t, new(atomic.Int64), new(atomic.Bool))
		url := srv.URL + "/ok/idx"
		if _, err := Open(ctx, dir, url, nil); err != nil {
			t.Fatal(err)
		}
		g.shut.Store(true)
		want := "index " + url + ": " + srv.host + ": the fetch ran past its bound of 1s: index too slow"
		bounded := &Options{Refresh: true, fetch: time.Second}
		// No bound of a request, to show the fetch's alone.
		ctx := withLimits(t.Context(), httpbound.Limits{})
		err, _ := within(t, "a fetch held with no clone", func() error {
			_, err := Open(ctx, t.TempDir(), url, bounded)
			return err
		})
		if !errors.Is(err, ErrSlow) || errors.Is(err, ErrUnreachable) || err == nil || err.Error() != want {
			t.Errorf("Open with no clone = %v, want %q", err, want)
		}
		var ix *Index
		err, _ = within(t, "a fetch held", func() (err error) {
			ix, err = Open(ctx, dir, url, bounded)
			return err
		})
		if err != nil || !errors.Is(ix.Offline, ErrSlow) || ix.Offline.Error() != want || ix.Len() != 30 {
			t.Fatalf("Open = %v, Offline %v; want the clone searched, Offline %q", err, ix.Offline, want)
		}
	})
}
