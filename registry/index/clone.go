package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/berm-dev/berm/internal/httpbound"
)

// Bounds of a clone, checked before go-git reads what an index's server
// sent: go-git holds every object of a pack whole while it indexes it, a
// delta's bases with it, and a few bytes of a pack can inflate to
// gigabytes. A clone past one fails, naming the bound (ErrBound).
const (
	// MaxClone is the largest pack a clone receives: what the clone
	// stores. An index of 100,000 programs packs in a few tens of MiB.
	MaxClone = 512 << 20
	// MaxObject is the largest object of a clone once inflated, a delta's
	// result included: twice MaxFile, for trees of many files.
	MaxObject = 2 * MaxFile
	// MaxObjects is the most objects of a clone.
	MaxObjects = 1000000
	// maxChain bounds the sizes of a delta and its bases, which go-git
	// holds all at once to resolve it.
	maxChain = 4 * MaxObject
	// maxRefs bounds a server's list of references (GitHub lists every
	// pull request's).
	maxRefs = 32 << 20
	// objectCache is the cache of objects go-git keeps while an index is
	// read: its trees, mostly (96 MiB by default).
	objectCache = 4 << 20
	// largeObject is the size past which go-git reads an object from disk
	// as it is read instead of whole into memory.
	largeObject = 1 << 20
)

// ErrBound: an index past a bound of what a clone may hold.
var ErrBound = errors.New("index past a bound")

// cloneLimits are MaxClone, MaxObject, maxChain and MaxObjects: smaller in
// tests.
type cloneLimits struct {
	bytes, object, chain int64
	objects              uint32
}

var defaultCloneLimits = cloneLimits{bytes: MaxClone, object: MaxObject, chain: maxChain, objects: MaxObjects}

// openStorage is a clone's object storage at dot (its .git directory):
// a small object cache, and objects past largeObject read from disk.
func openStorage(dot billy.Filesystem) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(dot, cache.NewObjectLRU(objectCache), filesystem.Options{LargeObjectThreshold: largeObject})
}

// openClone opens the clone of a generation (repo, a working tree with
// nothing checked out) with openStorage.
func openClone(dir string) (*git.Repository, error) {
	if info, err := os.Stat(filepath.Join(dir, git.GitDirName)); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%s: %w", dir, git.ErrRepositoryNotExists)
	}
	wt := osfs.New(dir)
	dot, err := wt.Chroot(git.GitDirName)
	if err != nil {
		return nil, err
	}
	return git.Open(openStorage(dot), wt)
}

// guarded is a clone's storage whose packs packGuard checks before go-git
// reads them.
type guarded struct {
	*filesystem.Storage
	tmp string // where a pack waits for its check
	lim cloneLimits
}

func (g *guarded) PackfileWriter() (io.WriteCloser, error) {
	f, err := os.CreateTemp(g.tmp, ".tmp-pack-")
	if err != nil {
		return nil, err
	}
	return &packGuard{s: g.Storage, f: f, lim: g.lim}, nil
}

// packGuard spools a pack to a file, at most lim.bytes of it, checks every
// object's header and inflated size there (a delta's, from its own
// header), and only then gives the pack to go-git. go-git sees nothing of
// a pack past a bound.
type packGuard struct {
	s   storer.PackfileWriter
	f   *os.File
	lim cloneLimits
	n   int64
	err error
}

func (g *packGuard) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.n+int64(len(p)) > g.lim.bytes {
		g.err = fmt.Errorf("clone: a pack past the limit of %s: %w", size(g.lim.bytes), ErrBound)
		return 0, g.err
	}
	n, err := g.f.Write(p)
	g.n += int64(n)
	if err != nil {
		g.err = err
	}
	return n, err
}

func (g *packGuard) Close() error {
	defer os.Remove(g.f.Name())
	defer g.f.Close()
	if g.err != nil || g.n == 0 {
		return g.err
	}
	if _, err := g.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := checkPack(g.f, g.lim); err != nil {
		return err
	}
	if _, err := g.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	w, err := g.s.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, g.f); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// checkPack reads the pack r and refuses one past lim: its count of
// objects, an object's inflated size, a delta's result, or the sizes of a
// delta and all its bases, which go-git holds at once. Inflating costs a
// second pass over the pack, at most MaxClone, and holds nothing but two
// numbers an object.
func checkPack(r io.Reader, lim cloneLimits) error {
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return fmt.Errorf("clone: pack: %w", err)
	}
	if count > lim.objects {
		return fmt.Errorf("clone: %d objects, past the limit of %d objects: %w", count, lim.objects, ErrBound)
	}
	// What each object costs with its bases, by offset, in the pack's
	// order, which is the offsets'.
	offsets := make([]int64, 0, min(count, 1<<16))
	chains := make([]int64, 0, min(count, 1<<16))
	var head deltaHead
	for range count {
		oh, err := s.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("clone: pack: %w", err)
		}
		var obj, chain int64
		switch oh.Type {
		case plumbing.OFSDeltaObject, plumbing.REFDeltaObject:
			head.n = 0
			if _, _, err := s.NextObject(&head); err != nil {
				return fmt.Errorf("clone: pack: %w", err)
			}
			obj = head.target()
			if oh.Type == plumbing.REFDeltaObject {
				// Its base is known by hash alone: assume the largest.
				chain = lim.object + obj
			} else {
				i := sort.Search(len(offsets), func(i int) bool { return offsets[i] >= oh.OffsetReference })
				if i == len(offsets) || offsets[i] != oh.OffsetReference {
					return fmt.Errorf("clone: pack: a delta at %d of no object: %w", oh.Offset, packfile.ErrMalformedPackFile)
				}
				chain = chains[i] + obj
			}
		default:
			obj = oh.Length
			if obj > lim.object {
				break
			}
			if _, _, err := s.NextObject(io.Discard); err != nil {
				return fmt.Errorf("clone: pack: %w", err)
			}
			chain = obj
		}
		switch {
		case obj < 0 || obj > lim.object:
			return fmt.Errorf("clone: an object of %s, past the limit of %s an object: %w", size(obj), size(lim.object), ErrBound)
		case oh.Type.IsDelta() && chain > lim.chain:
			return fmt.Errorf("clone: a delta whose bases come to %s, past the limit of %s: %w", size(chain), size(lim.chain), ErrBound)
		}
		offsets = append(offsets, oh.Offset)
		chains = append(chains, chain)
	}
	if _, err := s.Checksum(); err != nil {
		return fmt.Errorf("clone: pack: %w", err)
	}
	return nil
}

// deltaHead keeps the start of a delta, which says the size of its base
// and of its result, and discards the rest.
type deltaHead struct {
	b [20]byte
	n int
}

func (d *deltaHead) Write(p []byte) (int, error) {
	d.n += copy(d.b[d.n:], p)
	return len(p), nil
}

// target is the size of the delta's result: the second of two base-128
// numbers, least significant group first; -1 when the delta is too short
// to say.
func (d *deltaHead) target() int64 {
	b := d.b[:d.n]
	var v int64
	for range 2 {
		v = 0
		i := 0
		for shift := uint(0); ; shift += 7 {
			if i == len(b) || shift > 56 {
				return -1
			}
			v |= int64(b[i]&0x7f) << shift
			i++
			if b[i-1]&0x80 == 0 {
				break
			}
		}
		b = b[i:]
	}
	return v
}

var transports sync.Once

// installTransports makes go-git serve file:// URLs in process, and read
// http and https with bounds on every request (boundedTransport). Without
// the first go-git runs the git binary's upload-pack, which berm must not
// need; without the second a server's list of references is read whole,
// whatever its size, and a server that trickles or never answers holds a
// search for ever. go-git keeps its transports in a package-level table,
// so this changes it for the whole process, once: berm uses go-git for
// indexes only.
func installTransports() {
	transports.Do(func() {
		client.InstallProtocol("file", server.NewServer(localLoader{}))
		h := githttp.NewClient(&http.Client{Transport: boundedTransport{http.DefaultTransport}})
		client.InstallProtocol("https", h)
		client.InstallProtocol("http", h)
	})
}

// limitsKey is the context key of the limits of a clone's requests, in
// place of httpbound's defaults (tests shorten them): go-git keeps one
// transport for the process, and gives each request the context of its
// clone.
type limitsKey struct{}

func withLimits(ctx context.Context, l httpbound.Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// slowKey is the context key of a clone's slowRecord.
type slowKey struct{}

// slowRecord keeps the first bound that ended a request of a clone, as
// go-git was told of it.
type slowRecord struct {
	mu  sync.Mutex
	err error
}

func (r *slowRecord) note(err error) {
	var slow *httpbound.Error
	if r == nil || !errors.As(err, &slow) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = slow
	}
}

// watchSlow returns ctx for the requests of a clone, and slow, which
// returns the bound (ErrSlow, naming the host) that ended one of them, or
// nil. go-git words some of its transport's errors afresh ("error decoding
// upload-pack response: %s"), losing the bound, so it is kept beside the
// error go-git returns; the bound is why that error came, since go-git
// gives up at its transport's first error.
func watchSlow(ctx context.Context) (_ context.Context, slow func() error) {
	r := &slowRecord{}
	return context.WithValue(ctx, slowKey{}, r), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	}
}

// boundedTransport bounds a request to a git server: its time and rate,
// by httpbound's defaults as a registry's are (the index is someone else's
// server too, and an honest pack of a few tens of MiB moves in minutes at
// the slowest rate allowed), past them ErrSlow; and its response's size,
// cut past what berm reads: maxRefs of references, MaxClone (and room for
// its framing) of a pack (ErrBound).
type boundedTransport struct{ next http.RoundTripper }

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	lim, ok := req.Context().Value(limitsKey{}).(httpbound.Limits)
	if !ok {
		lim = httpbound.Defaults()
	}
	rec, _ := req.Context().Value(slowKey{}).(*slowRecord)
	resp, err := (&httpbound.Transport{Next: t.next, Limits: lim, Err: ErrSlow}).RoundTrip(req)
	if err != nil {
		rec.note(err)
		return nil, err
	}
	limit, what := int64(MaxClone+MaxClone/64), "a pack"
	if strings.HasSuffix(req.URL.Path, "/info/refs") {
		limit, what = maxRefs, "a list of references"
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: limit, limit: limit, what: what, rec: rec}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left, limit int64
	what        string
	rec         *slowRecord
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%s past the limit of %s: %w", b.what, size(b.limit), ErrBound)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if err != nil && err != io.EOF {
		b.rec.note(err)
	}
	return n, err
}

// localLoader loads the repository at a file:// URL's path, bare or with a
// working tree (go-git's DefaultLoader takes a working tree's root for its
// .git directory), with the bounds of a clone's storage: go-git's server
// in process reads every object it sends whole.
type localLoader struct{}

func (localLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	p := ep.Path
	if runtime.GOOS == "windows" {
		p = strings.TrimPrefix(p, "/") // /C:/x
	}
	p = filepath.FromSlash(p)
	if info, err := os.Stat(filepath.Join(p, ".git")); err == nil && info.IsDir() {
		p = filepath.Join(p, ".git")
	} else if _, err := os.Stat(filepath.Join(p, "config")); err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return &boundedSource{Storage: openStorage(osfs.New(p)), max: MaxObject, reads: sourceReads}, nil
}

// sourceReads bounds the objects go-git's server reads to make one pack
// (each a few times over): it holds a little of each, and the clone would
// refuse a pack past MaxObjects only once made.
const sourceReads = 8 * MaxObjects

// boundedSource serves no object past max, and no more than reads in
// all: the server would read it whole, and the clone refuse it.
type boundedSource struct {
	*filesystem.Storage
	max   int64
	reads int64
	n     atomic.Int64
}

func (s *boundedSource) check(o plumbing.EncodedObject, err error) (plumbing.EncodedObject, error) {
	if err != nil {
		return o, err
	}
	if s.n.Add(1) > s.reads {
		return nil, fmt.Errorf("clone: more than %d objects read to serve it, past the limit of %d objects: %w", s.reads, MaxObjects, ErrBound)
	}
	if o.Size() > s.max {
		return nil, fmt.Errorf("clone: object %s of %s, past the limit of %s an object: %w", o.Hash(), size(o.Size()), size(s.max), ErrBound)
	}
	return o, nil
}

func (s *boundedSource) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.check(s.Storage.EncodedObject(t, h))
}

func (s *boundedSource) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.check(s.Storage.DeltaObject(t, h))
}
