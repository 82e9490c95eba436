package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
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
	// refused receives why a program's _initialize is not snapshotted; nil
	// gives it to logger, as a warning.
	refused func(ctx context.Context, program, why string)
	// logger receives the host's errors a program is not shown (its
	// data's I/O); nil discards them.
	logger *slog.Logger
	// observer receives compile and instantiate times (serve --metrics).
	observer runtime.Observer
}

// newRuntime builds the binary's runtime: the core syscalls, the binary's
// host syscalls and WASI, compiled code cached on local disk under root
// (cacheDir), the programs' data in st. With no state (st nil, and no
// cfg.kv) it caches nothing and keeps no data: a runtime to read the syscall
// table from, not to run programs with.
func newRuntime(ctx context.Context, root string, st store.State, cfg runtimeConfig) (*runtime.Runtime, error) {
	kv := cfg.kv
	if kv == nil && st != nil {
		kv = st
	}
	cacheDir := cacheDir(root, st, cfg.logger)
	opts := &runtime.Config{
		CacheDir:        cacheDir,
		Limits:          cfg.limits,
		Imports:         []runtime.HostModule{host.WASI()},
		ModuleConfig:    host.ModuleConfig(),
		Log:             cfg.log,
		SnapshotRefused: cfg.refused,
		Observer:        cfg.observer,
		// Everything as it came, for comparing and for getting round a
		// fault of the fast paths (runtime.Config.Plain).
		Plain: os.Getenv("BERM_PLAIN") == "1",
	}
	if cfg.logger != nil && opts.SnapshotRefused == nil {
		opts.SnapshotRefused = func(ctx context.Context, program, why string) {
			cfg.logger.WarnContext(ctx, "snapshot refused", "program", program, "why", why)
		}
	}
	if cfg.logger != nil {
		// What a program is not shown of a host failure, the operator is.
		opts.HostError = func(ctx context.Context, program, tool string, err error) {
			cfg.logger.ErrorContext(ctx, "host error", "program", program, "tool", tool, "error", err)
		}
	}
	// Every request a program makes through berm.http is logged, as the
	// host's errors are.
	syscalls := append(host.Syscalls(kv), host.HTTP(host.HTTPConfig{Logger: cfg.logger}))
	opts.MaxCallDepth, opts.Syscalls = cfg.depth, syscalls
	if cfg.depth == 0 {
		opts.MaxCallDepth = runtime.NoNestedCalls // --max-call-depth 0
	}
	return runtime.New(ctx, *opts)
}

// errNoRoot: --root is empty, as it is by default without a home directory.
var errNoRoot = errors.New("no root directory")

func noRoot() error {
	return withHint(errNoRoot, "give --root DIR or set BERM_ROOT (without a home directory there is no ~/.berm)")
}

// notDeployed is the store's answer for a name it does not hold, for a root
// that does not exist.
func notDeployed(name string) error {
	return fmt.Errorf("program %q: %w", name, store.ErrNotDeployed)
}

// newService is the service every command deploys, lists and removes
// through; rt may be nil for those that do not deploy. A local deploy is
// checked against what berm serve can serve under its default naming.
func newService(rt *runtime.Runtime, st store.State) *service.Service {
	return service.New(rt, st, &service.Options{Check: mcpserve.Checker(mcpserve.Underscore)})
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

// loadTarget resolves FILE|NAME|REF: an argument naming an existing path or
// written as one is a file, one starting with a registry host and '/' an OCI
// reference (pulled through the store; isReference), anything else a
// deployed name. st is nil when the root does not exist: nothing is deployed
// there. root is where the search index's pins are (pullThroughStore).
func loadTarget(ctx context.Context, e *env, root string, st store.State, arg string, reg registryOptions) (*target, error) {
	if isPath(arg) {
		image, err := readImageFile(arg)
		if err != nil {
			return nil, err
		}
		return &target{name: nameFromFile(arg), image: image, source: arg}, nil
	}
	if isReference(arg) {
		c, err := newRegistryClient(e, reg)
		if err != nil {
			return nil, err
		}
		image, source, err := pullThroughStore(ctx, c, root, st, arg)
		if err != nil {
			return nil, err
		}
		return &target{name: nameFromReference(arg), image: image, source: source}, nil
	}
	if err := checkTargetName(arg); err != nil {
		return nil, err
	}
	if st == nil {
		return nil, notDeployed(arg)
	}
	d, image, err := newService(nil, st).Deployed(arg)
	if err != nil {
		return nil, err
	}
	return &target{name: d.Name, image: image, source: d.Source, deployed: &d}, nil
}

// checkTargetName refuses a FILE|NAME|REF argument that is neither a file
// nor a reference and cannot be a program's name.
func checkTargetName(arg string) error {
	if err := manifest.CheckProgramName(arg); err != nil {
		return withHint(fmt.Errorf("%q: no such file, and not a program name", arg),
			"give a path to a .wasm file, an OCI reference (host/repo:tag) or the name of a deployed program (`berm ls`)")
	}
	return nil
}

// isFile reports whether arg names an existing file.
func isFile(arg string) bool {
	info, err := os.Stat(arg)
	return err == nil && !info.IsDir()
}

// isPath reports whether a FILE|NAME|REF argument is a file: it names a
// file that exists, or is written as a path (a directory so written is
// refused as a file, not pulled as a reference). A bare word naming a
// directory is a program name: a program is often developed in ./NAME.
func isPath(arg string) bool {
	info, err := os.Stat(arg)
	if err == nil && info.IsDir() {
		return strings.Contains(arg, "/")
	}
	return err == nil || looksLikePath(arg)
}

// isDeployedName reports whether a FILE|NAME|REF argument is a name, which
// only a root that exists can hold.
func isDeployedName(arg string) bool {
	return !isPath(arg) && !isReference(arg)
}

// readImageFile reads a file that should be an image, refusing one over the
// image size limit without reading it whole. Devices and pipes (/dev/zero,
// <(cat f.wasm)) have no size to check beforehand, so the read is bounded too.
func readImageFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
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
	image, err := io.ReadAll(io.LimitReader(f, runtime.DefaultMaxImage+1))
	if err != nil {
		return nil, err
	}
	if len(image) > runtime.DefaultMaxImage {
		return nil, fmt.Errorf("%s: over the image size limit of %d bytes: %w",
			path, runtime.DefaultMaxImage, runtime.ErrRefused)
	}
	return image, nil
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
