package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero"
)

// compile compiles an image, from the on-disk cache when it holds it.
//
// wazero returns an error, not a miss, when a cache entry is damaged (a torn
// write, a flipped bit caught by its checksum), and the entry's name is a key
// wazero derives internally. So on any error with a cache in use, compile
// once more in a scratch runtime of the same configuration over an empty
// cache directory: if that fails too, the module itself is at fault.
// Otherwise the scratch cache now holds exactly one entry, under the very key
// the damaged one has: move it over the damaged one and compile again.
func (r *Runtime) compile(ctx context.Context, image []byte) (wazero.CompiledModule, error) {
	// What is compiled is the same program with its data segments merged,
	// which instantiates several times faster for Go's tens of thousands
	// (coalesce.go); the program's identity stays the digest of image.
	image = coalesceData(image)
	compiled, err := r.wz.CompileModule(ctx, image)
	if err == nil || r.cacheDir == "" {
		return compiled, err
	}
	if rerr := r.repairCache(ctx, image); rerr != nil {
		return nil, rerr
	}
	return r.wz.CompileModule(ctx, image)
}

func (r *Runtime) repairCache(ctx context.Context, image []byte) error {
	scratchDir, err := os.MkdirTemp(r.cacheDir, "repair-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratchDir)
	cache, err := wazero.NewCompilationCacheWithDir(scratchDir)
	if err != nil {
		return err
	}
	scratch := wazero.NewRuntimeWithConfig(ctx, r.wzConfig.WithCompilationCache(cache))
	defer scratch.Close(ctx)
	compiled, err := scratch.CompileModule(ctx, image)
	if err != nil {
		return err
	}
	compiled.Close(ctx)
	versions, err := os.ReadDir(scratchDir)
	if err != nil {
		return err
	}
	for _, v := range versions {
		entries, err := os.ReadDir(filepath.Join(scratchDir, v.Name()))
		if err != nil {
			return err
		}
		for _, e := range entries {
			dst := filepath.Join(r.cacheDir, v.Name(), e.Name())
			// rename replaces atomically: a process reading the damaged entry
			// keeps its open file, and every later reader sees the new one.
			if err := os.Rename(filepath.Join(scratchDir, v.Name(), e.Name()), dst); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("compilation cache: the scratch compile left no entry")
}
