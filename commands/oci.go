package commands

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/registry"
	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/runtime/store"
)

// registryFlags are the flags of every command that reaches a registry.
func registryFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "plain-http", Usage: "reach the registry over plain HTTP (loopback registries always are)"},
		&cli.DurationFlag{Name: "registry-timeout", Value: registry.DefaultRequestTimeout,
			Usage: "end a request to the registry that takes longer, its body and retries included (0: none)"},
		&cli.StringFlag{Name: "registry-min-rate", Value: "4KiB/s",
			Usage: fmt.Sprintf("end a transfer slower than `RATE` over %s, or a registry that answers nothing for %[1]s (0: none)", registry.DefaultMinRateWindow)},
	}
}

// registryOptions are the values of registryFlags. timeout and minRate are
// as registry.Config has them: zero the default, negative none, so that
// the zero value is the defaults.
type registryOptions struct {
	plainHTTP bool
	timeout   time.Duration
	minRate   int64
}

func readRegistryFlags(cmd *cli.Command) (registryOptions, error) {
	o := registryOptions{plainHTTP: cmd.Bool("plain-http"), timeout: cmd.Duration("registry-timeout")}
	switch {
	case o.timeout < 0:
		return o, usagef("--registry-timeout %s: want a duration, or 0 for none", o.timeout)
	case o.timeout == 0:
		o.timeout = -1
	}
	rate, err := parseRate(cmd.String("registry-min-rate"))
	if err != nil {
		return o, usagef("--registry-min-rate: %v", err)
	}
	o.minRate = int64(rate)
	if rate == 0 {
		o.minRate = -1
	}
	return o, nil
}

// parseRate reads a rate in bytes a second: a size (parseSize) with an
// optional "/s", as "4KiB/s" or "1MB".
func parseRate(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if len(t) > 2 && strings.EqualFold(t[len(t)-2:], "/s") {
		t = t[:len(t)-2]
	}
	n, err := parseSize(t)
	if err != nil || n > 1<<62 {
		return 0, fmt.Errorf("rate %q: want bytes a second with an optional unit, such as 4KiB/s, 1MB/s, or 0 for none", s)
	}
	return n, nil
}

// config is the registry client's configuration for o.
func (o registryOptions) config() *registry.Config {
	return &registry.Config{PlainHTTP: o.plainHTTP, UserAgent: "berm/" + binaryVersion(),
		RequestTimeout: o.timeout, MinRate: o.minRate}
}

// newRegistryClient returns a registry client with Docker's credentials,
// drawing progress on stderr only when it is a terminal.
func newRegistryClient(e *env, o registryOptions) (*registry.Client, error) {
	cfg := o.config()
	if isTerminal(e.stderr) {
		cfg.Progress = e.stderr
	}
	return registry.New(cfg)
}

// isReference reports whether a FILE|NAME|REF argument is an OCI reference:
// it names nothing that exists, and what comes before its first '/' is a
// registry host, told from a directory as Docker does (a '.' or a ':', or
// localhost). One that starts like a path (/, ./, ../) or with a directory
// (testdata/echo.wasm) is a file that is missing: dialling a host named
// "testdata" would only hide the typo.
func isReference(arg string) bool {
	host, _, ok := strings.Cut(arg, "/")
	return ok && (strings.ContainsAny(host, ".:") || host == "localhost") && !isPath(arg)
}

// looksLikePath reports whether arg is written as a path.
func looksLikePath(arg string) bool {
	return strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../")
}

// pullThroughStore pulls ref, taking the layer from the store when it holds
// the digest already (a deploy stores what it fetched). It returns the image
// and the reference pinned by its manifest digest, which a deployment records.
// st may be nil: a root that does not exist holds nothing. The index that
// vouches for the layer is root's, whatever holds the state.
func pullThroughStore(ctx context.Context, c *registry.Client, root string, st store.State, ref string) ([]byte, string, error) {
	img, err := c.Pull(ctx, ref, &registry.PullOptions{Have: func(digest string) ([]byte, bool) {
		if st == nil {
			return nil, false
		}
		b, err := st.Image(digest)
		return b, err == nil
	}})
	if err != nil {
		return nil, "", err
	}
	source := pinned(img)
	if strings.Contains(ref, "@") {
		source = ref // pinned already, and its tag kept
	}
	if root != "" {
		// An index that lists this manifest names the layer it must have:
		// the registry and the index agree, or nothing runs.
		if err := index.Verify(root, source, manifest.Digest(img.Bytes)); err != nil {
			return nil, "", err
		}
	}
	return img.Bytes, source, nil
}

// pinned is the reference as asked for, pinned to the manifest pulled:
// host/repo:tag@sha256:..., or host/repo@sha256:... when asked by digest.
func pinned(img *registry.Image) string {
	if strings.Contains(img.Reference, "@") {
		return img.Reference
	}
	return img.Reference + "@" + img.ManifestDigest
}

// nameFromReference derives a program name from a reference's repository:
// "ghcr.io/org/my_tool:v1" runs as "my-tool".
func nameFromReference(ref string) string {
	repo := ref
	if i := strings.IndexAny(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return nameFromFile(path.Base(repo))
}

// registryPuller lets a server pull references for the control API with the
// server's own credentials, read anew for each pull so that a `berm login`
// on the server's host counts without a restart.
type registryPuller struct {
	plainHTTP bool
	// timeout and minRate are readRegistryFlags's (zero: the defaults).
	timeout time.Duration
	minRate int64
	root    string
	st      store.State
}

func (p registryPuller) Pull(ctx context.Context, ref string) ([]byte, string, error) {
	o := registryOptions{plainHTTP: p.plainHTTP, timeout: p.timeout, minRate: p.minRate}
	c, err := registry.New(o.config())
	if err != nil {
		return nil, "", err
	}
	return pullThroughStore(ctx, c, p.root, p.st, ref)
}
