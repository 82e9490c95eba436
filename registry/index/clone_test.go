package index

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/berm-dev/berm/internal/httpbound"
)

// pack is a pack file by hand, objects appended in order.
type pack struct {
	objects [][]byte
}

// header is a pack object's type and size, as a pack writes them.
func objectHeader(typ plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(typ)<<4 | byte(size&0x0f)}
	for size >>= 4; size > 0; size >>= 7 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
	}
	return b
}

func deflate(b []byte) []byte {
	var out bytes.Buffer
	w := zlib.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func varint(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		if v >>= 7; v > 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// bytes is the pack of p's objects: header, objects, checksum.
func (p *pack) bytes() []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(p.objects)))
	for _, o := range p.objects {
		b.Write(o)
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// blob adds a blob and returns its offset.
func (p *pack) blob(content []byte) int64 {
	off := p.offset()
	p.objects = append(p.objects, append(objectHeader(plumbing.BlobObject, int64(len(content))), deflate(content)...))
	return off
}

// delta adds an offset delta against the object at base whose result is
// target bytes, copied from base's first byte over and over: a few bytes
// of pack, target bytes once go-git resolves it.
func (p *pack) delta(base, baseSize, target int64) int64 {
	off := p.offset()
	d := append(varint(baseSize), varint(target)...)
	for left := target; left > 0; {
		// Copy from the base's start (no offset bytes), two size bytes.
		n := min(left, baseSize, 0xffff)
		d = append(d, 0x80|0x10|0x20, byte(n), byte(n>>8))
		left -= n
	}
	rel := off - base
	enc := []byte{byte(rel & 0x7f)}
	for rel >>= 7; rel > 0; rel >>= 7 {
		rel--
		enc = append([]byte{0x80 | byte(rel&0x7f)}, enc...)
	}
	o := append(objectHeader(plumbing.OFSDeltaObject, int64(len(d))), enc...)
	p.objects = append(p.objects, append(o, deflate(d)...))
	return off
}

func (p *pack) offset() int64 {
	off := int64(12)
	for _, o := range p.objects {
		off += int64(len(o))
	}
	return off
}

// TestCheckPack: a pack's objects are checked by their headers before
// go-git reads them: an object or a delta's result past the bound, a chain
// of deltas whose sizes come past it, too many objects.
func TestCheckPack(t *testing.T) {
	t.Parallel()
	lim := cloneLimits{bytes: 1 << 30, object: 1 << 20, chain: 3 << 20, objects: 100}
	base := bytes.Repeat([]byte("a"), 64<<10)

	bomb := &pack{}
	b := bomb.blob(base)
	bomb.delta(b, int64(len(base)), 1<<30) // 1 GiB from 64 KiB, in a few KiB of pack

	chain := &pack{}
	at := chain.blob(base)
	at = chain.delta(at, 64<<10, 1<<20)
	for range 3 {
		at = chain.delta(at, 1<<20, 1<<20) // 1 MiB each, four deep: 4 MiB with the base
	}

	ok := &pack{}
	at = ok.blob(base)
	ok.delta(at, 64<<10, 1<<20)

	many := &pack{}
	for i := range 101 {
		many.blob([]byte{byte(i)})
	}

	for _, tc := range []struct {
		name string
		pack []byte
		want string
	}{
		{"delta bomb", bomb.bytes(), "clone: an object of 1 GiB, past the limit of 1 MiB an object"},
		{"chain", chain.bytes(), "clone: a delta whose bases come to 3.1 MiB, past the limit of 3 MiB"},
		{"objects", many.bytes(), "clone: 101 objects, past the limit of 100 objects"},
		{"within", ok.bytes(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPack(bytes.NewReader(tc.pack), lim)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBound) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkPack = %v, want ErrBound saying %q", err, tc.want)
			}
		})
	}

	// The guard gives go-git nothing of a pack past a bound, and all of
	// one within them.
	for _, tc := range []struct {
		name   string
		pack   []byte
		stored bool
	}{{"bomb", bomb.bytes(), false}, {"within", ok.bytes(), true}} {
		s := memory.NewStorage()
		f, err := os.CreateTemp(t.TempDir(), "pack")
		if err != nil {
			t.Fatal(err)
		}
		g := &packGuard{s: memoryPacks{s}, f: f, lim: lim}
		_, werr := g.Write(tc.pack)
		err = errors.Join(werr, g.Close())
		if stored := len(s.Objects) == 2; stored != tc.stored || (err == nil) != tc.stored {
			t.Errorf("%s: stored %v, err %v", tc.name, stored, err)
		}
	}
}

// memoryPacks stores a pack in a memory storage, as go-git's filesystem
// storage does on disk: parsed, its deltas resolved.
type memoryPacks struct{ s *memory.Storage }

func (m memoryPacks) PackfileWriter() (io.WriteCloser, error) {
	return &memoryPack{s: m.s}, nil
}

type memoryPack struct {
	bytes.Buffer
	s *memory.Storage
}

func (p *memoryPack) Close() error {
	return packfile.UpdateObjectStorage(p.s, bytes.NewReader(p.Bytes()))
}

func TestDeltaHead(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want int64
	}{
		{append(varint(10), varint(1<<30)...), 1 << 30},
		{append(varint(1<<40), varint(3)...), 3},
		{varint(10), -1},
		{[]byte{0x80, 0x80}, -1},
		{nil, -1},
	} {
		var d deltaHead
		d.Write(tc.b)
		if got := d.target(); got != tc.want {
			t.Errorf("target(%x) = %d, want %d", tc.b, got, tc.want)
		}
	}
}

// gitBinary is the git binary's path; without one the test is skipped:
// berm never needs it, but its server is the real one.
func gitBinary(t *testing.T) string {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git binary to serve an index over HTTP with")
	}
	return git
}

// gitIndex makes an index of n programs, one of which reads files, in a
// repository at dir made by the git binary.
func gitIndex(t *testing.T, dir string, n int) {
	t.Helper()
	git := gitBinary(t)
	for i := range n {
		ref := fmt.Sprintf("ghcr.io/acme/p%d:v1", i)
		usage, tool := fmt.Sprintf("Converts images, %d at a time.", i), Tool{Name: "convert", Description: "Converts an image."}
		if i == 0 {
			usage, tool = "Reads files.", Tool{Name: "get", Description: "Reads a file at a path."}
		}
		e := Entry{Reference: ref, Digest: "sha256:" + strings.Repeat(fmt.Sprintf("%x", i%16), 64),
			Layer: "sha256:" + strings.Repeat(fmt.Sprintf("%x", (i+1)%16), 64), Usage: usage, Tools: []Tool{tool},
			Published: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Syscalls: []string{}, Calls: []string{}}
		p, err := Path(ref)
		if err != nil {
			t.Fatal(err)
		}
		line, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, line, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "index"}} {
		cmd := exec.Command(git, append([]string{"-C", dir, "-c", "gc.auto=0"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// gitServer serves the repositories under a directory over git's smart
// HTTP with the git binary's own server, http-backend, as a forge would,
// each request as mode says: the first element of a request's path is
// given to mode, the rest names the repository, so that one server serves
// an index honestly at /ok/NAME and hostile at /HOSTILE/NAME.
type gitServer struct {
	*httptest.Server
	host string
	stop chan struct{} // closed when the test ends
}

// serveMode is how a gitServer answers a request.
type serveMode int

const (
	honest  serveMode = iota
	silent            // accepts, and never answers
	trickle           // a byte at a time, 4 a second
)

// serveGit starts a gitServer of the repositories under root; mode says how
// to serve a request whose path starts with first, of kind "refs" (the
// list of references) or "pack".
func serveGit(t *testing.T, root string, mode func(first, kind string) serveMode) *gitServer {
	t.Helper()
	backend := &cgi.Handler{
		Path: gitBinary(t), Args: []string{"http-backend"},
		Env:        []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
		InheritEnv: []string{"PATH"},
		Logger:     log.New(io.Discard, "", 0), // the requests the bounds cut
		Stderr:     io.Discard,
	}
	s := &gitServer{stop: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		kind := "pack"
		if strings.HasSuffix(rest, "/info/refs") {
			kind = "refs"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		switch mode(first, kind) {
		case silent:
			select {
			case <-r.Context().Done():
			case <-s.stop:
			}
		case trickle:
			backend.ServeHTTP(&trickleWriter{ResponseWriter: w, ctx: r.Context(), stop: s.stop}, r2)
		default:
			backend.ServeHTTP(w, r2)
		}
	}))
	s.host = strings.TrimPrefix(s.URL, "http://")
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.stop) }) // before Close, which waits for the requests
	return s
}

// trickleWriter sends a response a byte at a time, four a second, until
// the client or the test gives up.
type trickleWriter struct {
	http.ResponseWriter
	ctx  context.Context
	stop <-chan struct{}
}

func (w *trickleWriter) Write(p []byte) (int, error) {
	for i := range p {
		select {
		case <-w.ctx.Done():
			return i, w.ctx.Err()
		case <-w.stop:
			return i, io.ErrClosedPipe
		case <-time.After(250 * time.Millisecond):
		}
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		http.NewResponseController(w.ResponseWriter).Flush()
	}
	return len(p), nil
}

// within runs f and fails the test if it has not returned after two
// minutes: before the bounds, a trickling index held a search for hours, and
// a silent one for ever.
func within(t *testing.T, what string, f func() error) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: still waiting after two minutes", what)
		return nil, 0
	}
}

// TestSlowIndex: an index's server that answers nothing, sends its list
// of references or its pack a byte at a time, or keeps the rate past the
// request timeout ends the clone with a bound (ErrSlow), and the error
// names the host and the bound; with a clone already made, that clone is
// searched. An honest server's clone passes.
func TestSlowIndex(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	gitIndex(t, filepath.Join(root, "idx"), 30)
	var later atomic.Bool // the index at /later/ turns silent
	srv := serveGit(t, root, func(first, kind string) serveMode {
		switch {
		case first == "silent", first == "pack-silent" && kind == "pack", first == "later" && later.Load():
			return silent
		case first == "refs-trickle" && kind == "refs", first == "pack-trickle" && kind == "pack":
			return trickle
		}
		return honest
	})
	// A window short enough for a quick test: 512 bytes in each.
	rate := httpbound.Limits{MinRate: 1 << 10, Window: 500 * time.Millisecond}

	t.Run("honest", func(t *testing.T) {
		t.Parallel()
		ix, err := Open(withLimits(t.Context(), rate), t.TempDir(), srv.URL+"/ok/idx", nil)
		if err != nil {
			t.Fatal(err)
		}
		if hits, _ := ix.Search("read a file", 1); len(hits) != 1 || ix.Len() != 30 {
			t.Fatalf("%d programs, hits %v", ix.Len(), hits)
		}
	})
	for _, tc := range []struct {
		name, mode string
		lim        httpbound.Limits
		want       string
	}{
		// The defaults, a window of 20 s, are commands' TestSearchSlowIndex's.
		{"silent", "silent", rate, "no answer in 500ms (the minimum rate's window)"},
		{"references a byte at a time", "refs-trickle", rate, "transferred in 500ms, below the minimum rate of 1 KiB/s"},
		// The request's own bytes count: not "no answer".
		{"pack unanswered", "pack-silent", rate, "bytes transferred in 500ms, below the minimum rate of 1 KiB/s"},
		{"pack a byte at a time", "pack-trickle", rate, "transferred in 500ms, below the minimum rate of 1 KiB/s"},
		{"past the request timeout", "refs-trickle", httpbound.Limits{Timeout: time.Second},
			"a request ran past the request timeout of 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := srv.URL + "/" + tc.mode + "/idx"
			ctx := withLimits(t.Context(), tc.lim)
			err, took := within(t, tc.name, func() error {
				_, err := Open(ctx, t.TempDir(), url, nil)
				return err
			})
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if prefix := "index " + url + ": " + srv.host + ": "; !errors.Is(err, ErrSlow) || errors.Is(err, ErrUnreachable) ||
				!strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want+": index too slow") {
				t.Errorf("Open = %v, want ErrSlow saying %q and %q", err, prefix, tc.want)
			}
			// The bound is kept whatever go-git words its error as.
			ctx, slow := watchSlow(ctx)
			_, err = update(ctx, t.TempDir(), url, nil, time.Now(), nil)
			if err == nil || !errors.Is(slow(), ErrSlow) || !strings.Contains(slow().Error(), tc.want) {
				t.Errorf("update = %v, its bound %v; want the bound", err, slow())
			}
		})
	}

	t.Run("offline", func(t *testing.T) {
		t.Parallel()
		clones, url := t.TempDir(), srv.URL+"/later/idx"
		ctx := withLimits(t.Context(), rate)
		if _, err := Open(ctx, clones, url, nil); err != nil {
			t.Fatal(err)
		}
		later.Store(true)
		ix, err := Open(ctx, clones, url, &Options{Refresh: true})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(ix.Offline, ErrSlow) || !strings.Contains(fmt.Sprint(ix.Offline), "no answer in 500ms") || ix.Len() != 30 {
			t.Fatalf("Offline = %v with %d programs, want the bound named and the last clone searched", ix.Offline, ix.Len())
		}
	})
}
