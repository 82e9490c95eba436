package commands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
)

// runtimeConfig is what shapes the binary's runtime.
type runtimeConfig struct {
	depth  int
	limits runtime.Limits
	// kv holds the programs' data; nil means the store's.
	kv  host.KV
	log func(ctx context.Context, program, tool string, line []byte)
}

// newRuntime builds the binary's runtime: the core syscalls, the binary's
// host syscalls and WASI, compiled code cached under the store's root.
func newRuntime(ctx context.Context, st *store.Store, cfg runtimeConfig) (*runtime.Runtime, error) {
	kv := cfg.kv
	if kv == nil {
		kv = st
	}
	return runtime.New(ctx, cfg.depth, host.Syscalls(kv), &runtime.Options{
		CacheDir:     st.CacheDir(),
		Limits:       cfg.limits,
		Imports:      []runtime.HostModule{host.WASI()},
		ModuleConfig: host.ModuleConfig(),
		Log:          cfg.log,
	})
}

// target is an image named on the command line by FILE|NAME|REF.
type target struct {
	// name is the deployed name, or for a file or reference one derived from
	// its base name.
	name     string
	image    []byte
	source   string
	deployed *store.Deployment
}

// loadTarget resolves FILE|NAME|REF: an argument naming an existing file is
// a file, one containing '/' an OCI reference (pulled through the store),
// anything else a deployed name.
func loadTarget(ctx context.Context, e *env, st *store.Store, arg string, plainHTTP bool) (*target, error) {
	if isFile(arg) || looksLikePath(arg) {
		image, err := readImageFile(arg)
		if err != nil {
			return nil, err
		}
		return &target{name: nameFromFile(arg), image: image, source: arg}, nil
	}
	if isReference(arg) {
		c, err := newRegistryClient(e, plainHTTP)
		if err != nil {
			return nil, err
		}
		image, source, err := pullThroughStore(ctx, c, st, arg)
		if err != nil {
			return nil, err
		}
		return &target{name: nameFromReference(arg), image: image, source: source}, nil
	}
	if err := manifest.CheckProgramName(arg); err != nil {
		return nil, withHint(fmt.Errorf("%s: no such file, and not a program name", arg),
			"give a path to a .wasm file, an OCI reference (host/repo:tag) or the name of a deployed program (`berm ls`)")
	}
	d, err := st.Deployment(arg)
	if err != nil {
		return nil, err
	}
	image, err := st.Image(d.Digest)
	if err != nil {
		return nil, err
	}
	return &target{name: d.Name, image: image, source: d.Source, deployed: &d}, nil
}

// isFile reports whether arg names an existing file.
func isFile(arg string) bool {
	info, err := os.Stat(arg)
	return err == nil && !info.IsDir()
}

// readImageFile reads a file that should be an image, refusing one over the
// image size limit before reading it whole.
func readImageFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file", path)
	}
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s: a directory, not a file", path)
	}
	if info.Size() > runtime.DefaultMaxImage {
		return nil, fmt.Errorf("%s: %d bytes, over the image size limit of %d bytes: %w",
			path, info.Size(), runtime.DefaultMaxImage, runtime.ErrRefused)
	}
	return os.ReadFile(path)
}

// nameFromFile derives a program name from a file name: "My_Tool.wasm" runs
// as "my-tool".
func nameFromFile(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var b strings.Builder
	for _, c := range strings.ToLower(base) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > manifest.MaxProgramName {
		name = strings.Trim(name[:manifest.MaxProgramName], "-")
	}
	if name == "" {
		name = "program"
	}
	return name
}

// deployCallees deploys into rt, from the store, every program that p's
// manifest may reach through berm.call, transitively. A callee that is not
// deployed is left out: calls to it are refused.
func deployCallees(ctx context.Context, rt *runtime.Runtime, st *store.Store, m *manifest.Manifest) error {
	queue := append([]string(nil), m.Calls...)
	for len(queue) > 0 {
		program, _, err := manifest.SplitFullName(queue[0])
		queue = queue[1:]
		if err != nil || rt.Program(program) != nil {
			continue
		}
		d, err := st.Deployment(program)
		if errors.Is(err, store.ErrNotDeployed) {
			continue
		}
		if err != nil {
			return err
		}
		image, err := st.Image(d.Digest)
		if err != nil {
			return err
		}
		p, err := rt.Deploy(ctx, program, image)
		if err != nil {
			return fmt.Errorf("callee %s: %w", program, err)
		}
		queue = append(queue, p.Manifest.Calls...)
	}
	return nil
}
