package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tetratelabs/wazero"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/internal/transform"
)

// compile compiles an image, from the on-disk cache when it holds it. An
// image wazero refuses is manifest.ErrInvalid; a failure of the host's (the
// cache's I/O, memory for the code) is ErrHost, whatever the image.
//
// wazero returns an error, not a miss, when a cache entry is damaged (a torn
// write, a flipped bit caught by its checksum), with a message that does not
// tell it from an image it refuses, and the entry's name is a key wazero
// derives internally. So on such an error with a cache in use, compile once
// more in a scratch runtime of the same configuration over an empty cache
// directory: if that fails too, the image itself is at fault. Otherwise the
// scratch cache now holds exactly one entry, under the very key the damaged
// one has: move it over the damaged one and compile again.
//
// It returns the wazero runtime that compiled the image.
func (r *Runtime) compile(ctx context.Context, image []byte) (wazero.CompiledModule, *wazeroRuntime, error) {
	start, snap := r.startCompile()
	// image is what Runtime.derive made of the program: its data segments
	// taken out for an image, or merged (snapshot.go); the program's
	// identity stays the digest of what was deployed. What is compiled has
	// besides a maximum on every table that declares none, which table.grow
	// could otherwise take to 2^32-1 entries of the host's memory (tables.go).
	image = boundTables(image, DefaultMaxTableEntries)
	// And so that its calls stop at their deadline for the cost of a load
	// and a branch at each loop (transform.Deadline). A module the transform
	// does not rewrite goes to the plain runtime, whose wazero checks the
	// deadline itself: slower, never unstoppable.
	wz := r.wz
	if wz != r.plain {
		// The module must be valid as it came: one that names the globals
		// the rewrite adds, before they exist, would become valid and hold
		// its deadline off. It is compiled as it is, in a runtime of its
		// own that caches nothing; an invalid one goes to the plain compile
		// below, which says why. wazero validates a module the same way
		// whichever engine compiles it: the interpreter's takes
		// milliseconds where the compiler's takes as long as the compile
		// that follows.
		check := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().
			WithMemoryLimitPages(uint32(r.limits.Memory/PageSize)))
		closeCheck := func() { check.Close(context.WithoutCancel(ctx)) }
		_, err := r.compileUnder(ctx, check, image, closeCheck)
		if ctxErr(ctx, err) || errors.Is(err, ErrClosed) {
			return nil, nil, err
		}
		closeCheck()
		rewritten, terr := transform.Deadline(image)
		if err == nil && terr == nil {
			image = rewritten
		} else if wz, err = r.plainRuntime(ctx); err != nil {
			return nil, nil, err
		}
	}
	compiled, err := r.compileUnder(ctx, wz, image, nil)
	switch {
	case err == nil:
		r.observeCompile(start, snap, false)
		return compiled, wz, nil
	case ctxErr(ctx, err), errors.Is(err, ErrClosed):
		return nil, nil, err
	case hostFault(err):
		return nil, nil, fmt.Errorf("compile: %w: %w", ErrHost, err)
	case r.cacheDir == "":
		return nil, nil, fmt.Errorf("compile: %w: %w", err, manifest.ErrInvalid)
	}
	if err := r.repairCache(ctx, wz.config, image); err != nil {
		return nil, nil, err
	}
	compiled, err = r.compileUnder(ctx, wz, image, nil)
	if ctxErr(ctx, err) || errors.Is(err, ErrClosed) {
		return nil, nil, err
	}
	if err != nil {
		// The image compiled in the scratch runtime: this is the cache's doing.
		return nil, nil, fmt.Errorf("compile: compilation cache: %w: %w", ErrHost, err)
	}
	r.observeCompile(start, snap, true)
	return compiled, wz, nil
}

// compileUnder compiles image in wz, or ends when ctx is done, whichever
// comes first: wazero 1.12 looks at no context while it compiles (unless
// with several workers, and then only between functions), so a compile of
// seconds held up the end of berm run and berm deploy at a SIGTERM. The
// compile left behind runs on to its end, bounded by what manifest.Read
// lets a module's code cost, then closes what it made and calls abandon
// (when not nil), which may close wz; abandon is also called when ctx was
// done before the compile began. Otherwise wz is the caller's. Close leaves
// wazero open for the compiles still under way, which its Close under them
// would crash. A compile ended by ctx is its cause, wrapped.
func (r *Runtime) compileUnder(ctx context.Context, wz wazero.Runtime, image []byte, abandon func()) (wazero.CompiledModule, error) {
	if err := context.Cause(ctx); err != nil {
		if abandon != nil {
			abandon()
		}
		return nil, fmt.Errorf("compile: %w", err)
	}
	type result struct {
		compiled wazero.CompiledModule
		err      error
	}
	// Unbuffered: a result is handed over, or, once abandoned, closed.
	done := make(chan result)
	abandoned := make(chan struct{})
	if !r.compileBegins() {
		if abandon != nil {
			abandon()
		}
		return nil, fmt.Errorf("compile: %w", ErrClosed)
	}
	go func() {
		defer r.compileEnds()
		compiled, err := wz.CompileModule(ctx, image)
		select {
		case done <- result{compiled, err}:
		case <-abandoned:
			if err == nil {
				compiled.Close(context.WithoutCancel(ctx))
			}
			if abandon != nil {
				abandon()
			}
		}
	}()
	select {
	case res := <-done:
		return res.compiled, res.err
	case <-ctx.Done():
		close(abandoned)
		return nil, fmt.Errorf("compile: %w", context.Cause(ctx))
	}
}

// compileBegins and compileEnds count the compiles under way; the last to
// end after Close closes wazero (closeLater). None begins after Close:
// wazero's compile in a closed runtime crashed the process (a nil map in
// its store), as a deploy under way at Close began one.
func (r *Runtime) compileBegins() bool {
	r.compileMu.Lock()
	defer r.compileMu.Unlock()
	if r.compileClosed {
		return false
	}
	r.compiling++
	return true
}

func (r *Runtime) compileEnds() {
	r.compileMu.Lock()
	r.compiling--
	var closeLater func()
	if r.compiling == 0 {
		closeLater, r.closeLater = r.closeLater, nil
	}
	r.compileMu.Unlock()
	if closeLater != nil {
		closeLater()
	}
}

// ctxErr reports whether err is a compile that ctx ended.
func ctxErr(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx))
}

// hostFault reports whether err is the system's: a file, a directory, a
// disk or memory that failed, rather than anything wazero found in an image
// or a cache entry. wazero returns the cache's I/O errors as they are.
func hostFault(err error) bool {
	var (
		pathErr *fs.PathError
		linkErr *os.LinkError
		sysErr  *os.SyscallError
		errno   syscall.Errno
	)
	return errors.As(err, &pathErr) || errors.As(err, &linkErr) || errors.As(err, &sysErr) || errors.As(err, &errno)
}

// repairCache recompiles image into a scratch cache and moves the entry over
// the damaged one. Its errors are the image's (manifest.ErrInvalid) or the
// host's (ErrHost).
func (r *Runtime) repairCache(ctx context.Context, config wazero.RuntimeConfig, image []byte) error {
	scratchDir, err := os.MkdirTemp(r.cacheDir, "repair-")
	if err != nil {
		return fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
	}
	defer os.RemoveAll(scratchDir)
	cache, err := wazero.NewCompilationCacheWithDir(scratchDir)
	if err != nil {
		return fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
	}
	scratch := wazero.NewRuntimeWithConfig(ctx, config.WithCompilationCache(cache))
	closeScratch := func() { scratch.Close(context.WithoutCancel(ctx)) }
	compiled, err := r.compileUnder(ctx, scratch, image, closeScratch)
	if ctxErr(ctx, err) || errors.Is(err, ErrClosed) {
		return err
	}
	defer closeScratch()
	if err != nil {
		if hostFault(err) {
			return fmt.Errorf("compile: %w: %w", ErrHost, err)
		}
		return fmt.Errorf("compile: %w: %w", err, manifest.ErrInvalid)
	}
	compiled.Close(ctx)
	versions, err := os.ReadDir(scratchDir)
	if err != nil {
		return fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
	}
	for _, v := range versions {
		entries, err := os.ReadDir(filepath.Join(scratchDir, v.Name()))
		if err != nil {
			return fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
		}
		for _, e := range entries {
			dst := filepath.Join(r.cacheDir, v.Name(), e.Name())
			// rename replaces atomically: a process reading the damaged entry
			// keeps its open file, and every later reader sees the new one.
			if err := os.Rename(filepath.Join(scratchDir, v.Name(), e.Name()), dst); err != nil {
				return fmt.Errorf("compilation cache: %w: %w", ErrHost, err)
			}
		}
		return nil
	}
	return fmt.Errorf("compilation cache: %w: the scratch compile left no entry", ErrHost)
}
