package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// A Backend keeps State somewhere a URL names: PostgreSQL's postgres://, say.
// Its package registers it (Register) for the schemes it takes, so that Open
// picks it by scheme and its caller imports no backend's own client.
type Backend struct {
	// Open opens the state at url: it connects, creates or upgrades what it
	// keeps and, with opts.Listen, listens for deployment changes. Its
	// errors never hold the URL's secrets.
	Open func(ctx context.Context, url string, opts OpenOptions) (State, error)
	// Describe is what identifies the state at url in a log line
	// (user@host:port/db): never a password.
	Describe func(url string) string
}

// OpenOptions are what Open passes on to a backend.
type OpenOptions struct {
	// Logger receives what happens out of any call; nil logs nothing.
	Logger *slog.Logger
	// Listen makes State.Changes a channel: berm serve's.
	Listen bool
}

// ErrScheme: a state URL of a scheme no backend takes, or no URL at all.
var ErrScheme = errors.New("unknown scheme")

// ErrNewerSchema: the state was upgraded by a newer berm than this one, which
// must not write to it.
var ErrNewerSchema = errors.New("database schema is newer than this berm knows")

var (
	backendsMu sync.RWMutex
	backends   = map[string]Backend{}
)

// Register makes b the backend of URLs of each scheme; it panics on a scheme
// already taken, as two backends of one scheme are a build's mistake.
func Register(b Backend, schemes ...string) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	for _, s := range schemes {
		if _, dup := backends[s]; dup {
			panic("store: two backends for scheme " + s)
		}
		backends[s] = b
	}
}

// Schemes lists the schemes a backend is registered for, sorted.
func Schemes() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	out := make([]string, 0, len(backends))
	for s := range backends {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// backendOf is the backend of url's scheme. Its error names the scheme
// only: the URL may carry a password.
func backendOf(url string) (Backend, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok {
		return Backend{}, fmt.Errorf("%w: not a URL (scheme://...)", ErrScheme)
	}
	backendsMu.RLock()
	b, ok := backends[scheme]
	backendsMu.RUnlock()
	if !ok {
		return Backend{}, fmt.Errorf("%w %q", ErrScheme, scheme)
	}
	return b, nil
}

// CheckURL refuses a state URL whose scheme no backend takes (ErrScheme),
// without opening anything.
func CheckURL(url string) error {
	_, err := backendOf(url)
	return err
}

// Open opens the state url names with the backend registered for its
// scheme (ErrScheme when there is none). The directory backend is OpenDir's.
func Open(ctx context.Context, url string, opts OpenOptions) (State, error) {
	b, err := backendOf(url)
	if err != nil {
		return nil, err
	}
	return b.Open(ctx, url, opts)
}

// Describe identifies the state url names in a log line, without its
// secrets.
func Describe(url string) string {
	b, err := backendOf(url)
	if err != nil {
		return "(a state URL of an unknown scheme)"
	}
	return b.Describe(url)
}
