package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/berm-dev/berm/manifest"
)

// wasiSpec is, for each function of WASI preview 1, read from the
// specification (phases/snapshot/witx/wasi_snapshot_preview1.witx) rather
// than from wazero, where in its core signature each descriptor goes
// (fds), and each count of iovecs, length of a path the program names, and
// count of subscriptions (bounded); and, for a path function, the length
// of the path resolved against each descriptor (paths, -1 for none, the
// default).
var wasiSpec = map[string]struct{ fds, bounded, paths []int }{
	"args_get":                {},
	"args_sizes_get":          {},
	"environ_get":             {},
	"environ_sizes_get":       {},
	"clock_res_get":           {},
	"clock_time_get":          {},
	"fd_advise":               {fds: []int{0}},
	"fd_allocate":             {fds: []int{0}},
	"fd_close":                {fds: []int{0}},
	"fd_datasync":             {fds: []int{0}},
	"fd_fdstat_get":           {fds: []int{0}},
	"fd_fdstat_set_flags":     {fds: []int{0}},
	"fd_fdstat_set_rights":    {fds: []int{0}},
	"fd_filestat_get":         {fds: []int{0}},
	"fd_filestat_set_size":    {fds: []int{0}},
	"fd_filestat_set_times":   {fds: []int{0}},
	"fd_pread":                {fds: []int{0}, bounded: []int{2}},
	"fd_prestat_get":          {fds: []int{0}},
	"fd_prestat_dir_name":     {fds: []int{0}}, // its path_len is the buffer's
	"fd_pwrite":               {fds: []int{0}, bounded: []int{2}},
	"fd_read":                 {fds: []int{0}, bounded: []int{2}},
	"fd_readdir":              {fds: []int{0}},
	"fd_renumber":             {fds: []int{0, 1}, bounded: []int{1}},
	"fd_seek":                 {fds: []int{0}},
	"fd_sync":                 {fds: []int{0}},
	"fd_tell":                 {fds: []int{0}},
	"fd_write":                {fds: []int{0}, bounded: []int{2}},
	"path_create_directory":   {fds: []int{0}, bounded: []int{2}, paths: []int{2}},
	"path_filestat_get":       {fds: []int{0}, bounded: []int{3}, paths: []int{3}},
	"path_filestat_set_times": {fds: []int{0}, bounded: []int{3}, paths: []int{3}},
	"path_link":               {fds: []int{0, 4}, bounded: []int{3, 6}, paths: []int{3, 6}},
	"path_open":               {fds: []int{0}, bounded: []int{3}, paths: []int{3}},
	"path_readlink":           {fds: []int{0}, bounded: []int{2}, paths: []int{2}},
	"path_remove_directory":   {fds: []int{0}, bounded: []int{2}, paths: []int{2}},
	"path_rename":             {fds: []int{0, 3}, bounded: []int{2, 5}, paths: []int{2, 5}},
	"path_symlink":            {fds: []int{2}, bounded: []int{1, 4}, paths: []int{4}},
	"path_unlink_file":        {fds: []int{0}, bounded: []int{2}, paths: []int{2}},
	"poll_oneoff":             {bounded: []int{2}},
	"proc_exit":               {},
	"proc_raise":              {},
	"random_get":              {},
	"sched_yield":             {},
	"sock_accept":             {fds: []int{0}},
	"sock_recv":               {fds: []int{0}, bounded: []int{2}},
	"sock_send":               {fds: []int{0}, bounded: []int{2}},
	"sock_shutdown":           {fds: []int{0}},
}

// wasiFunctions are the WASI functions wazero exports, as compiled.
func wasiFunctions(t *testing.T) map[string]api.FunctionDefinition {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	b := r.NewHostModuleBuilder(wasiModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	compiled, err := b.Compile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return compiled.ExportedFunctions()
}

// The rules derived from wazero's parameter names find every descriptor,
// and bound every count of iovecs, path and subscriptions, of every WASI
// function wazero exports, wherever the parameter is: a function wazero
// adds fails this test until it is read in the specification and added
// to wasiSpec.
func TestWASIRules(t *testing.T) {
	t.Parallel()
	fns := wasiFunctions(t)
	for name, def := range fns {
		want, ok := wasiSpec[name]
		if !ok {
			t.Errorf("wazero exports %s, which wasiSpec does not classify: read its parameters in the WASI specification and add it", name)
			continue
		}
		rule := wasiRuleOf(def)
		if rule.name != name {
			t.Errorf("%s: the rule is named %s", name, rule.name)
		}
		if !slices.Equal(rule.fds, want.fds) {
			t.Errorf("%s%v: descriptors at %v, want %v", name, def.ParamNames(), rule.fds, want.fds)
		}
		var bounded []int
		for _, b := range rule.bounds {
			bounded = append(bounded, b.param)
		}
		if !slices.Equal(bounded, want.bounded) {
			t.Errorf("%s%v: bounds at %v, want %v", name, def.ParamNames(), bounded, want.bounded)
		}
		paths := want.paths
		if paths == nil {
			paths = slices.Repeat([]int{-1}, len(want.fds))
		}
		if !slices.Equal(rule.paths, paths) {
			t.Errorf("%s%v: the paths of its descriptors at %v, want %v", name, def.ParamNames(), rule.paths, paths)
		}
		if want := slices.Index(def.ParamNames(), "to"); rule.to != want {
			t.Errorf("%s: to at %d, want %d", name, rule.to, want)
		}
	}
	for _, set := range []map[string]bool{wasiHarmless, wasiReads} {
		for name := range set {
			if fns[name] == nil {
				t.Errorf("%s is listed, but wazero exports no such function", name)
			}
		}
	}
}

// Each bound traps past it and lets its value through, naming the
// function, the value and the bound.
func TestWASIRuleBounds(t *testing.T) {
	t.Parallel()
	fns := wasiFunctions(t)
	for _, tc := range []struct {
		fn    string
		param int
		max   uint32
		words string
	}{
		{"fd_write", 2, MaxIovecs, "IOV_MAX"},
		{"fd_pread", 2, MaxIovecs, "IOV_MAX"},
		{"sock_send", 2, MaxIovecs, "IOV_MAX"},
		{"path_open", 3, MaxPath, "PATH_MAX"},
		{"path_symlink", 1, MaxPath, "PATH_MAX"},
		{"path_symlink", 4, MaxPath, "PATH_MAX"},
		{"poll_oneoff", 2, MaxSubscriptions, "subscriptions"},
		{"fd_renumber", 1, MaxDescriptor, "descriptor"},
	} {
		rule := wasiRuleOf(fns[tc.fn])
		params := make([]uint64, len(fns[tc.fn].ParamNames()))
		params[tc.param] = uint64(tc.max)
		rule.check(params) // at the bound: no trap
		params[tc.param] = uint64(tc.max) + 1
		func() {
			defer func() {
				tr, _ := recover().(*trap)
				if tr == nil || !strings.Contains(tr.msg, tc.fn) || !strings.Contains(tr.msg, tc.words) {
					t.Errorf("%s with parameter %d at %d: %v, want a trap naming %s and %s", tc.fn, tc.param, tc.max+1, tr, tc.fn, tc.words)
				}
			}()
			rule.check(params)
		}()
	}
	// A negative descriptor is wazero's to refuse (EBADF).
	params := []uint64{4, uint64(0xffffffff)}
	wasiRuleOf(fns["fd_renumber"]).check(params)
}

// The wasi_fds fixture calls every WASI function that takes a descriptor,
// as TestWASIDescriptorsNotHeld needs: a function wazero adds fails here
// until the fixture imports it and has a tool of its name.
func TestWASIFixtureCoversDescriptors(t *testing.T) {
	t.Parallel()
	image, err := os.ReadFile(filepath.Join("testdata", "wasi_fds.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	for name, def := range wasiFunctions(t) {
		if len(wasiRuleOf(def).fds) == 0 {
			continue
		}
		imported := slices.ContainsFunc(m.Imports, func(imp manifest.Import) bool {
			return imp.Module == wasiModule && imp.Name == name
		})
		tool := slices.ContainsFunc(m.Tools, func(tl *manifest.Tool) bool { return tl.Name == name })
		if !imported || !tool {
			t.Errorf("%s takes a descriptor, but wasi_fds does not call it (imported %v, tool %v)", name, imported, tool)
		}
	}
}
