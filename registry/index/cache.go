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
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// DefaultMaxAge is how old a clone may be before a search fetches the index
// again: an index changes by reviewed pull requests, not by the minute, and
// a search should not wait on the network every time.
const DefaultMaxAge = 5 * time.Minute

// Dir is the directory of the root that holds the clones of indexes.
const Dir = "index"

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
}

func (o *Options) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now()
	}
	return o.Now()
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
	// last clone instead; nil when it is up to date.
	Offline error
	// Warnings are the lines and files of the index that were skipped.
	Warnings []Warning

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
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%q: %w", s, ErrURL)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	case strings.HasPrefix(s, "file://"):
		u, err := url.Parse(s)
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
// than opts.MaxAge or opts.Refresh says so. When it cannot be fetched but a
// clone exists, Open returns that clone with Offline set: the caller says
// so, with its age. url is normalized with NormalizeURL.
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
		next, err := update(ctx, dir, url, cur, now)
		switch {
		case err == nil:
			cur = next
		case cur == nil:
			return nil, fmt.Errorf("index %s: %w: %v", url, ErrUnreachable, err)
		default:
			offline = fmt.Errorf("index %s: %w: %v", url, ErrUnreachable, err)
		}
	}
	s, warnings, cur, err := loadSnapshot(dir, cur)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", url, err)
	}
	return &Index{
		URL:      url,
		Dir:      filepath.Join(dir, cur.Gen, repoDir),
		Commit:   cur.Commit,
		Fetched:  cur.Fetched,
		Offline:  offline,
		Warnings: warnings,
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
func update(ctx context.Context, dir, url string, cur *current, now time.Time) (*current, error) {
	installFileTransport()
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
	next, err := cloneGeneration(ctx, gen, url, now)
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
// that escapes) would otherwise fail the clone instead of that file.
func cloneGeneration(ctx context.Context, gen, url string, now time.Time) (*current, error) {
	depth := 0
	if !strings.HasPrefix(url, "file://") {
		depth = 1
	}
	repo, err := git.PlainCloneContext(ctx, filepath.Join(gen, repoDir), false, &git.CloneOptions{
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
	s, p, err := build(repo, head.Hash())
	if err != nil {
		return nil, err
	}
	if err := writeSnapshot(filepath.Join(gen, snapshotFile), s); err != nil {
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
// than genGrace, and the temporary files of writes that did not finish.
// Best effort: a generation another process still reads stays (Windows)
// or goes once that process closes it.
func collect(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() == keep || !(strings.HasPrefix(e.Name(), genPrefix) || strings.HasPrefix(e.Name(), ".tmp-")) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > genGrace {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// loadSnapshot opens the snapshot of cur's generation, building it again
// from the clone when it is missing or of another version. A generation
// removed under it (another process collected it) sends it back to current.
func loadSnapshot(dir string, cur *current) (searchable, []Warning, *current, error) {
	for try := 0; ; try++ {
		s, warnings, err := loadGeneration(filepath.Join(dir, cur.Gen), cur.Commit)
		if err == nil {
			return s, warnings, cur, nil
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
func loadGeneration(gen, commit string) (searchable, []Warning, error) {
	d, err := openSnapshot(filepath.Join(gen, snapshotFile))
	if err == nil && d.h.Commit == commit {
		return d, d.h.Warnings, nil
	}
	s, _, err := rebuild(gen, commit)
	if err != nil {
		return nil, nil, err
	}
	return &s.Corpus, s.Warnings, nil
}

// rebuild reads a generation's clone again and writes its snapshot and
// pins.
func rebuild(gen, commit string) (*snapshot, *pins, error) {
	repo, err := git.PlainOpen(filepath.Join(gen, repoDir))
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, nil, fmt.Errorf("%s: %w", gen, fs.ErrNotExist)
	}
	if err != nil {
		return nil, nil, err
	}
	s, p, err := build(repo, plumbing.NewHash(commit))
	if err != nil {
		return nil, nil, err
	}
	// A snapshot that cannot be written is built again next time: no error.
	writeSnapshot(filepath.Join(gen, snapshotFile), s)
	writeGob(filepath.Join(gen, pinsFile), p)
	return s, p, nil
}

var fileTransport sync.Once

// installFileTransport makes go-git serve file:// URLs in process. Without
// it go-git runs the git binary's upload-pack, which berm must not need.
// go-git keeps its transports in a package-level table, so this changes it
// for the whole process, once: berm uses no other file transport.
func installFileTransport() {
	fileTransport.Do(func() {
		client.InstallProtocol("file", server.NewServer(localLoader{}))
	})
}

// localLoader loads the repository at a file:// URL's path, bare or with a
// working tree (go-git's DefaultLoader takes a working tree's root for its
// .git directory).
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
	return filesystem.NewStorage(osfs.New(p), cache.NewObjectLRUDefault()), nil
}
