package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Observer receives measurements of the runtime's work, for an embedder's
// metrics. A nil func is never called, and what it would measure is not
// measured: the zero Observer costs a nil check.
//
// The funcs are called on the goroutine that did the work, on a call's hot
// path for Instantiate: they should record and return.
type Observer struct {
	// Compile receives the time a successful compile took (at deploy, and at
	// a server's start for what is deployed), the merge of data segments and
	// the bound of tables included, and where its code came from. A compile
	// that fails is the deploy's error, not a measurement.
	Compile func(d time.Duration, cache CacheResult)
	// Instantiate receives, for each instance a call made (nested calls
	// included) and that became ready to run the tool, the time from the
	// start of its instantiation to that point: _initialize included when
	// the program exports it, since it runs for every call as much as the
	// instantiation does (and is most of it for Go's programs).
	Instantiate func(program string, d time.Duration)
}

// CacheResult says where a compile's code came from.
type CacheResult string

const (
	// CacheHit: no code was compiled and written to the cache; it came
	// from the cache directory, or from this runtime's memory when the same
	// image is compiled already (deployed under another name, or deployed
	// again while calls still hold the old one).
	CacheHit CacheResult = "hit"
	// CacheMiss: the code was compiled and written to the cache.
	CacheMiss CacheResult = "miss"
	// CacheRepair: the cache's entry was damaged; it was compiled anew and
	// written over (see compile).
	CacheRepair CacheResult = "repair"
	// CacheNone: the runtime has no cache directory (Config.CacheDir).
	CacheNone CacheResult = ""
)

// cacheSnapshot is the names of the cache's entries, to tell a hit from a
// miss. wazero reports neither, and its entries are named by a hash of the
// image, wazero's version and the CPU's features that it keeps to itself:
// but a miss writes an entry under a new name (the temporary file renamed),
// and a hit writes none. A snapshot before and after the compile tells them
// apart, at the cost of two reads of a directory that holds an entry per
// image (nothing, next to a compile), taken only with an Observer.Compile.
//
// What it cannot tell: a compile that runs at once with another that
// misses (two deploys together, or another process sharing the directory)
// is counted a miss if it hit; one that misses while another process writes
// the same entry first is counted a hit. A server compiles one program at a
// time at start; deploys at once are rare.
type cacheSnapshot map[string]struct{}

func (r *Runtime) snapshotCache() cacheSnapshot {
	snap := cacheSnapshot{}
	if r.cacheDir == "" {
		return snap
	}
	versions, _ := os.ReadDir(r.cacheDir)
	for _, v := range versions {
		if !v.IsDir() || strings.HasPrefix(v.Name(), "repair-") {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(r.cacheDir, v.Name()))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".tmp") {
				snap[v.Name()+"/"+e.Name()] = struct{}{}
			}
		}
	}
	return snap
}

// result compares the cache now with the snapshot taken before a compile.
func (snap cacheSnapshot) result(r *Runtime) CacheResult {
	for name := range r.snapshotCache() {
		if _, ok := snap[name]; !ok {
			return CacheMiss
		}
	}
	return CacheHit
}

// startCompile is what observeCompile needs, taken before a compile; the
// zero values without an Observer.Compile.
func (r *Runtime) startCompile() (time.Time, cacheSnapshot) {
	if r.observer.Compile == nil {
		return time.Time{}, nil
	}
	snap := r.snapshotCache()
	return time.Now(), snap
}

// observeCompile reports a successful compile that began at start.
func (r *Runtime) observeCompile(start time.Time, snap cacheSnapshot, repaired bool) {
	if r.observer.Compile == nil {
		return
	}
	d := time.Since(start)
	cache := CacheNone
	switch {
	case r.cacheDir == "":
	case repaired:
		cache = CacheRepair
	default:
		cache = snap.result(r)
	}
	r.observer.Compile(d, cache)
}
