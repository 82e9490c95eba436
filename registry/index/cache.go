package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	neturl "net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/berm-dev/berm/internal/httpbound"
)

// DefaultMaxAge is how old a clone may be before a search fetches the index
// again: an index changes by reviewed pull requests, not by the minute, and
// a search should not wait on the network every time.
const DefaultMaxAge = 5 * time.Minute

// Dir is the directory of the root that holds the clones of indexes.
const Dir = "index"

// FetchTimeout bounds a whole fetch of an index: the list of references,
// then a clone's list and pack, and the reading of the clone. Each request
// is bounded by httpbound too, but a server that keeps each just within its
// bounds would otherwise hold a fetch for three request timeouts.
const FetchTimeout = httpbound.DefaultTimeout

// ErrFetching: Open searched the clone because the fetch of the index was
// still under way past Options.Wait (or the caller's deadline).
var ErrFetching = errors.New("index not fetched in time")

// Layout of a clone's directory, Dir/<key>/: current names the generation
// searched; each generation is a clone of its own, never changed once
// current names it. A refresh clones a new generation beside it and points
// current at it (a file renamed into place), so that a search never reads a
// clone half fetched, and two processes cloning at once both succeed: the
// last to finish is current.
const (
	currentFile  = "current"
	genPrefix    = "g-"
	repoDir      = "repo"
	snapshotFile = "snapshot"
	pinsFile     = "pins"
	// maxCurrent bounds the pointer file: it is a few lines of JSON.
	maxCurrent = 16 << 10
	// genGrace is how long a generation that is no longer current is kept:
	// a search that read current just before it changed is still reading.
	genGrace = 10 * time.Minute
	// maxOldGens bounds the generations kept beside current, however
	// young: what an index stores is at most this many clones and one.
	maxOldGens = 2
)

// Options tune Open; nil means the defaults.
type Options struct {
	// MaxAge is how old the clone may be before it is fetched again; zero
	// means DefaultMaxAge.
	MaxAge time.Duration
	// Refresh fetches whatever the clone's age.
	Refresh bool
	// Now is the clock the age is told by; nil means time.Now.
	Now func() time.Time
	// Wait is how long Open waits for a fetch of an index it has a clone
	// of, counted from the fetch's start: past it Open searches the clone,
	// Offline saying the fetch is still under way (ErrFetching), and the
	// fetch goes on without it, for the searches after. Zero waits for the
	// fetch. With no clone Open waits for the first, whatever Wait says;
	// every fetch ends within FetchTimeout.
	Wait time.Duration
	// Detach lets a fetch that Open stops waiting for (past Wait, or at
	// its context's end) go on, for the searches after, as a server's
	// does. Otherwise the last search to stop waiting for a fetch ends it,
	// and Open returns once what it fetched is removed: a process about to
	// exit would leave a clone half made, up to MaxClone of it.
	Detach bool

	// lim and clone replace the bounds of an index and of a clone, fetch
	// FetchTimeout, in tests.
	lim   *limits
	clone *cloneLimits
	fetch time.Duration
}

func (o *Options) limits() limits {
	if o == nil || o.lim == nil {
		return defaultLimits
	}
	return *o.lim
}

func (o *Options) cloneLimits() cloneLimits {
	if o == nil || o.clone == nil {
		return defaultCloneLimits
	}
	return *o.clone
}

func (o *Options) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o *Options) wait() time.Duration {
	if o == nil {
		return 0
	}
	return o.Wait
}

func (o *Options) detach() bool { return o != nil && o.Detach }

func (o *Options) fetchTimeout() time.Duration {
	if o == nil || o.fetch <= 0 {
		return FetchTimeout
	}
	return o.fetch
}

func (o *Options) maxAge() time.Duration {
	if o == nil || o.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return o.MaxAge
}

// Index is an index as cloned into a root, ready to search.
type Index struct {
	// URL is the index's URL, normalized (a local path as file://).
	URL string
	// Dir is the clone, nothing checked out: `git -C DIR show HEAD:PATH`
	// reads a file of it.
	Dir string
	// Commit is the commit searched.
	Commit string
	// Fetched is when the clone was last found up to date.
	Fetched time.Time
	// Offline is why the index could not be fetched when Open searched the
	// last clone instead (ErrFetching when the fetch was still under way);
	// nil when it is up to date.
	Offline error
	// Warnings are the lines and files of the index that were skipped:
	// the first MaxWarnings, the one that stopped the reading of the index
	// first (past MaxFiles, MaxRead or MaxHeld).
	Warnings []Warning
	// Skipped counts every line and file skipped, Warnings' and the rest.
	Skipped int

	corpus searchable
}

// current is the pointer file of a clone's directory.
type current struct {
	URL     string    `json:"url"`
	Gen     string    `json:"gen"`
	Commit  string    `json:"commit"`
	Fetched time.Time `json:"fetched"`
}

// NormalizeURL checks an index's URL: https and http URLs are taken as they
// are, a file:// URL or a local path (made absolute) becomes a file:// URL.
// SSH is refused: a search needs no credential.
func NormalizeURL(s string) (string, error) {
	switch {
	case strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "http://"):
		u, err := neturl.Parse(s)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%q: %w", s, ErrURL)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	case strings.HasPrefix(s, "file://"):
		u, err := neturl.Parse(s)
		if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
			return "", fmt.Errorf("%q: want file:///absolute/path: %w", s, ErrURL)
		}
		return "file://" + strings.TrimSuffix(u.Path, "/"), nil
	case strings.Contains(s, "://") || (strings.Contains(s, "@") && strings.Contains(s, ":")):
		return "", fmt.Errorf("%q: only https, http, file and local paths: %w", s, ErrURL)
	case s == "":
		return "", fmt.Errorf("empty: %w", ErrURL)
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", fmt.Errorf("%q: %w", s, err)
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x
	}
	return "file://" + p, nil
}

// key is the directory of the root that holds the clones of url.
func key(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

// Open returns the index at url as cloned under root (root/index/<key>),
// cloning it on first use and fetching it again when the clone is older
// than opts.MaxAge or opts.Refresh says so. When it cannot be fetched, or
// not within opts.Wait, but a clone exists, Open returns that clone with
// Offline set: the caller says so, with its age. url is normalized with
// NormalizeURL.
func Open(ctx context.Context, root, url string, opts *Options) (*Index, error) {
	url, err := NormalizeURL(url)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, Dir, key(url))
	cur, _ := readCurrent(dir) // damaged: as if never cloned
	var offline error
	now := opts.now()
	if cur == nil || (opts != nil && opts.Refresh) || now.Sub(cur.Fetched) >= opts.maxAge() {
		if cur, offline, err = refresh(ctx, dir, url, cur, now, opts); err != nil {
			return nil, err
		}
	}
	s, h, cur, err := loadSnapshot(dir, cur, opts)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", url, err)
	}
	return &Index{
		URL:      url,
		Dir:      filepath.Join(dir, cur.Gen, repoDir),
		Commit:   cur.Commit,
		Fetched:  cur.Fetched,
		Offline:  offline,
		Warnings: h.Warnings,
		Skipped:  h.Skipped,
		corpus:   s,
	}, nil
}

// Search ranks the index's programs against query (BM25F over the name,
// tools' names, usage and tools' descriptions, stemmed) and returns the
// best limit of those that match at all, best first; limit <= 0 means all.
func (ix *Index) Search(query string, limit int) ([]Hit, error) {
	return search(ix.corpus, query, limit)
}

// Len is the number of programs the index lists.
func (ix *Index) Len() int { return ix.corpus.len() }

// refresh brings the clone of url in dir up to date and returns what to
// search: the clone updated, or when the index could not be fetched (or
// not within opts.Wait) but a clone exists, that clone, with why
// (offline). One fetch of a directory runs at a time in a process, and
// every search that needs one meanwhile waits for that one: a server's
// models searching a stale index at once would each clone and read it.
func refresh(ctx context.Context, dir, url string, cur *current, now time.Time, opts *Options) (next *current, offline, err error) {
	f := joinFetch(ctx, dir, url, cur, now, opts)
	var expired <-chan time.Time
	if cur != nil && opts.wait() > 0 {
		// From the fetch's start: a search that finds one under way for
		// long, which an earlier search already waited on, waits no more.
		t := time.NewTimer(time.Until(f.started.Add(opts.wait())))
		defer t.Stop()
		expired = t.C
	}
	// The wait, not the time it took: a search that finds the fetch under
	// way for longer stops at once, and 5s reads better than 5.0021s.
	at := fmt.Sprintf("after %s", opts.wait())
	select {
	case <-f.done:
		f.leave(dir)
		return f.result(url, cur)
	case <-expired:
	case <-ctx.Done():
		at = "at the search's deadline"
	}
	why := "still fetching " + at
	stopped := f.leave(dir)
	if stopped {
		// Nobody waits for it, nor lets it go on: it ends with this
		// search, what it fetched removed.
		<-f.done
		why = "fetch stopped " + at
	}
	select {
	case <-f.done:
		if !stopped || f.err == nil { // it ended as the wait did
			return f.result(url, cur)
		}
	default:
	}
	if err := ctx.Err(); cur == nil || err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, nil, fmt.Errorf("index %s: %w", url, err)
	}
	return cur, fmt.Errorf("index %s: %s: %w", url, why, ErrFetching), nil
}

// fetches holds the fetch under way of each clone directory in this
// process. Across processes generations keep fetches apart instead (and
// the last to finish is current).
var fetches = struct {
	sync.Mutex
	dirs map[string]*fetch
}{dirs: map[string]*fetch{}}

// fetch is a fetch of an index's clone directory; next and err are set
// before done is closed.
type fetch struct {
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	next    *current
	err     error

	// Under fetches' lock: the searches waiting for it, and whether one
	// of them lets it go on without it (Options.Detach).
	waiting int
	detach  bool
}

// result is what a search whose clone is cur makes of the fetch's outcome.
func (f *fetch) result(url string, cur *current) (next *current, offline, err error) {
	switch {
	case f.err == nil:
		return f.next, nil, nil
	case cur == nil:
		return nil, nil, fmt.Errorf("index %s: %w", url, f.err)
	}
	return cur, fmt.Errorf("index %s: %w", url, f.err), nil
}

// joinFetch returns the fetch of dir under way, starting one when there is
// none, and counts the search among those waiting for it. The fetch is the
// index's, not the search's that started it: it has the values of that
// search's context (a test's bounds) but not its end, and FetchTimeout.
func joinFetch(ctx context.Context, dir, url string, cur *current, now time.Time, opts *Options) *fetch {
	fetches.Lock()
	defer fetches.Unlock()
	f := fetches.dirs[dir]
	if f == nil {
		f = &fetch{started: time.Now(), done: make(chan struct{})}
		fetches.dirs[dir] = f
		var fctx context.Context
		fctx, f.cancel = context.WithTimeout(context.WithoutCancel(ctx), opts.fetchTimeout())
		go func() {
			defer f.cancel()
			next, err := fetchIndex(fctx, dir, url, cur, now, opts)
			fetches.Lock()
			f.next, f.err = next, err
			if fetches.dirs[dir] == f {
				delete(fetches.dirs, dir)
			}
			fetches.Unlock()
			close(f.done)
		}()
	}
	f.waiting++
	f.detach = f.detach || opts.detach()
	return f
}

// leave counts a search out of those waiting for f. The last to leave a
// fetch that none let go on ends it, and says so: the caller waits for it
// to end. A search after starts a fetch of its own.
func (f *fetch) leave(dir string) (ended bool) {
	fetches.Lock()
	defer fetches.Unlock()
	f.waiting--
	if f.waiting > 0 || f.detach {
		return false
	}
	select {
	case <-f.done:
		return false
	default:
	}
	if fetches.dirs[dir] == f {
		delete(fetches.dirs, dir)
	}
	f.cancel()
	return true
}

// fetchIndex brings the clone of url in dir up to date, or says why not:
// ErrSlow for a bound of a request or of the whole fetch, ErrBound for one
// of the clone, ErrUnreachable for the rest.
func fetchIndex(ctx context.Context, dir, url string, cur *current, now time.Time, opts *Options) (*current, error) {
	if again, _ := readCurrent(dir); again != nil && (cur == nil || again.Fetched.After(cur.Fetched)) {
		// Updated by another search (or process) since this one read
		// it: as fresh as this fetch would make it.
		return again, nil
	}
	ctx, slow := watchSlow(ctx)
	next, err := update(ctx, dir, url, cur, now, opts)
	switch {
	case err == nil:
		return next, nil
	case slow() != nil:
		// The bound and the host say it all, whatever go-git made of it.
		return nil, slow()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%sthe fetch ran past its bound of %s: %w", hostOf(url), opts.fetchTimeout(), ErrSlow)
	case errors.Is(err, ErrBound):
		return nil, err
	}
	return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
}

// hostOf is "HOST: " of an http or https URL, as httpbound names it, and
// nothing for a file:// one.
func hostOf(s string) string {
	if u, err := neturl.Parse(s); err == nil && u.Host != "" {
		return u.Host + ": "
	}
	return ""
}

// readCurrent reads the pointer file of dir; nil when there is none.
func readCurrent(dir string) (*current, error) {
	f, err := os.Open(filepath.Join(dir, currentFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCurrent))
	if err != nil {
		return nil, err
	}
	var c current
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(c.Gen, genPrefix) || strings.ContainsAny(c.Gen, `/\`) || c.Gen == genPrefix+".." {
		return nil, fmt.Errorf("%s: bad generation %q", currentFile, c.Gen)
	}
	return &c, nil
}

func writeCurrent(dir string, c *current) error {
	return writeAtomic(filepath.Join(dir, currentFile), func(w io.Writer) error {
		return json.NewEncoder(w).Encode(c)
	})
}

// update brings the clone of url in dir up to date: when the index's head
// is the commit cur names, it only notes the time; otherwise it clones a new
// generation, reads it, and makes it current.
func update(ctx context.Context, dir, url string, cur *current, now time.Time, opts *Options) (*current, error) {
	installTransports()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	head, err := remoteHead(ctx, url)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.Commit == head.String() {
		next := *cur
		next.Fetched = now
		if err := writeCurrent(dir, &next); err != nil {
			return nil, err
		}
		return &next, nil
	}
	gen, err := os.MkdirTemp(dir, genPrefix)
	if err != nil {
		return nil, err
	}
	next, err := cloneGeneration(ctx, gen, url, now, opts)
	if err != nil {
		os.RemoveAll(gen)
		return nil, err
	}
	if err := writeCurrent(dir, next); err != nil {
		os.RemoveAll(gen)
		return nil, err
	}
	collect(dir, next.Gen)
	return next, nil
}

// cloneGeneration clones url into gen and reads it. Shallow over HTTP;
// go-git's in-process file transport serves no shallow clone, and a local
// clone costs no network anyway. Nothing is checked out: search reads the
// commit's objects, and a tree with a path go-git refuses to write (one
// that escapes) would otherwise fail the clone instead of that file. The
// pack is checked against the bounds of a clone before go-git reads it.
func cloneGeneration(ctx context.Context, gen, url string, now time.Time, opts *Options) (*current, error) {
	depth := 0
	if !strings.HasPrefix(url, "file://") {
		depth = 1
	}
	// The layout of git.PlainClone's: a working tree, its .git inside.
	wt := osfs.New(filepath.Join(gen, repoDir))
	dot, err := wt.Chroot(git.GitDirName)
	if err != nil {
		return nil, err
	}
	st := &guarded{Storage: openStorage(dot), tmp: gen, lim: opts.cloneLimits()}
	repo, err := git.CloneContext(ctx, st, wt, &git.CloneOptions{
		URL:          url,
		Depth:        depth,
		SingleBranch: true,
		Tags:         git.NoTags,
		NoCheckout:   true,
	})
	if err != nil {
		return nil, err
	}
	head, err := repo.Head()
	if err != nil {
		return nil, err
	}
	p, _, err := build(repo, head.Hash(), filepath.Join(gen, snapshotFile), opts.limits())
	if err != nil {
		return nil, err
	}
	if err := writeGob(filepath.Join(gen, pinsFile), p); err != nil {
		return nil, err
	}
	return &current{URL: url, Gen: filepath.Base(gen), Commit: head.Hash().String(), Fetched: now}, nil
}

// remoteHead is the commit the index's HEAD names.
func remoteHead(ctx context.Context, url string) (plumbing.Hash, error) {
	r := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := r.ListContext(ctx, &git.ListOptions{})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, ref := range refs {
		byName[ref.Name()] = ref
	}
	ref := byName[plumbing.HEAD]
	for i := 0; ref != nil && ref.Type() == plumbing.SymbolicReference && i < 5; i++ {
		ref = byName[ref.Target()]
	}
	if ref == nil || ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, errors.New("the repository has no HEAD commit")
	}
	return ref.Hash(), nil
}

// collect removes the generations of dir other than keep that are older
// than genGrace, or past the newest maxOldGens, and the temporary files of
// writes that did not finish. Best effort: a generation another process
// still reads stays (Windows) or goes once that process closes it.
func collect(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type gen struct {
		name string
		mod  time.Time
	}
	var done []gen
	for _, e := range entries {
		if e.Name() == keep || !(strings.HasPrefix(e.Name(), genPrefix) || strings.HasPrefix(e.Name(), ".tmp-")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if time.Since(info.ModTime()) > genGrace {
			os.RemoveAll(filepath.Join(dir, e.Name()))
			continue
		}
		// A generation without its pins is still being cloned, maybe by
		// another process.
		if _, err := os.Stat(filepath.Join(dir, e.Name(), pinsFile)); err == nil {
			done = append(done, gen{e.Name(), info.ModTime()})
		}
	}
	// Newest first: an index whose head changes at every search must not
	// fill the disk with clones within genGrace.
	sort.Slice(done, func(i, j int) bool { return done[i].mod.After(done[j].mod) })
	for _, g := range done[min(len(done), maxOldGens):] {
		os.RemoveAll(filepath.Join(dir, g.name))
	}
}

// loadSnapshot opens the snapshot of cur's generation, building it again
// from the clone when it is missing or of another version. A generation
// removed under it (another process collected it) sends it back to current.
func loadSnapshot(dir string, cur *current, opts *Options) (searchable, *header, *current, error) {
	for try := 0; ; try++ {
		d, err := loadGeneration(filepath.Join(dir, cur.Gen), cur.Commit, opts)
		if err == nil {
			return d, &d.h, cur, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || try > 0 {
			return nil, nil, nil, err
		}
		next, rerr := readCurrent(dir)
		if rerr != nil || next.Gen == cur.Gen {
			return nil, nil, nil, fmt.Errorf("clone %s: %w", cur.Gen, err)
		}
		cur = next
	}
}

// loadGeneration opens a generation's snapshot, built again from its clone
// when it is missing, damaged or of another version.
func loadGeneration(gen, commit string, opts *Options) (*diskCorpus, error) {
	d, err := openSnapshot(filepath.Join(gen, snapshotFile))
	if err == nil && d.h.Commit == commit {
		return d, nil
	}
	if _, err := rebuild(gen, commit, opts); err != nil {
		return nil, err
	}
	return openSnapshot(filepath.Join(gen, snapshotFile))
}

// rebuild reads a generation's clone again and writes its snapshot and
// pins.
func rebuild(gen, commit string, opts *Options) (*pins, error) {
	repo, err := openClone(filepath.Join(gen, repoDir))
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%s: %w", gen, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	p, _, err := build(repo, plumbing.NewHash(commit), filepath.Join(gen, snapshotFile), opts.limits())
	if err != nil {
		return nil, err
	}
	// Pins that cannot be written are built again next time: no error.
	writeGob(filepath.Join(gen, pinsFile), p)
	return p, nil
}
