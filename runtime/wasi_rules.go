package runtime

import (
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/berm-dev/berm/runtime/sandbox"
)

// What hostListener checks of a WASI function is derived from its
// signature, the parameter names wazero gives it (which follow the WASI
// specification's), not from a list of functions by name, so that every
// parameter of a kind is found wherever it is, and a function wazero adds
// is covered (TestWASIRules fails until its parameters are classified):
//
//   - a descriptor ("fd", "old_fd", "new_fd", fd_renumber's "to"): a call
//     on one past the standard streams may change what the instance holds
//     (hostListener.After); fd_renumber's "to" is where wazero grows its
//     table of descriptors to, so it is bounded (MaxDescriptor);
//   - a count of iovecs ("iovs_len", and sock_recv's and sock_send's
//     "ri_data_len", "si_data_len"): bounded by MaxIovecs;
//   - the length of a path the program names ("path_len", "old_path_len",
//     "new_path_len"; not "result.path_len", a buffer to write a preopen's
//     name to): bounded by MaxPath;
//   - poll_oneoff's "nsubscriptions": bounded by MaxSubscriptions.
//
// A call past a bound traps before the function runs. A listener cannot
// make wazero return an errno (EINVAL, as writev(2) past IOV_MAX, or
// ENAMETOOLONG), only let the function run or stop the instance; and wazero
// does the work the bound is for before berm's code is reached (it reads
// every iovec, cleans and copies a path, allocates an event a subscription,
// grows its table for fd_renumber), so berm's file system cannot refuse it
// in its place. Replacing wazero's functions would mean reimplementing them
// over its internal descriptor table. No program the bounds are for needs
// more: wasi-libc and Go's runtime never pass more than IOV_MAX iovecs, a
// path past PATH_MAX fails on Linux anyway, and a descriptor is the lowest
// free number unless renumbered.

// The bounds on what one WASI call may ask of the host.
const (
	// MaxIovecs bounds the iovecs of one call: POSIX's IOV_MAX on Linux.
	MaxIovecs = 1024
	// MaxPath bounds a path's length in bytes: Linux's PATH_MAX. A path of
	// 60 MiB held the host 6 s and 2 GiB in one path_filestat_get. The
	// sandbox bounds it again once wazero has joined it onto its
	// descriptor's name (sandbox.MaxPath).
	MaxPath = sandbox.MaxPath
	// MaxSubscriptions bounds poll_oneoff's subscriptions in one call.
	MaxSubscriptions = 4096
	// MaxDescriptor bounds the descriptor fd_renumber may renumber to:
	// wazero grows its table to hold it, 16 GiB for the largest.
	MaxDescriptor = 1<<16 - 1
)

// wasiRule is what hostListener checks and marks for one WASI function.
type wasiRule struct {
	name string
	// fds are the indexes of its descriptor parameters; to is
	// fd_renumber's target among them, -1 when there is none.
	fds []int
	to  int
	// paths are, for each of fds, the index of the length of the path
	// resolved against it, -1 for none: the first path after it.
	paths []int
	// op names a path function's operation, in the log's line that a path
	// was not granted (wasi_fs.go).
	op string
	// bounds are its parameters a bound holds.
	bounds []wasiBound
	// reads is set for a function that only reads what a descriptor
	// holds (wasiReads): a change on none.
	reads bool
	// harmless is set for a function that changes nothing of the instance
	// when it succeeds on a standard stream or takes no descriptor: it only
	// writes output, reads state, or reads the host's clocks and
	// randomness. Any other function that succeeds is taken as a change.
	harmless bool
}

// wasiBound is one parameter's bound.
type wasiBound struct {
	param int
	max   uint32
	// format words a trap's message from the value and the bound.
	format string
	// signed is set for a descriptor, which wazero refuses itself
	// (EBADF) when negative.
	signed bool
}

// wasiHarmless are the WASI functions that never change what an instance
// holds when they succeed on a standard stream or take no descriptor. It
// is the short list, not the long one, so that a function wazero adds is a
// change until it is shown here.
var wasiHarmless = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "random_get": true, "sched_yield": true,
	// poll_oneoff reads stdin's readiness, not stdin; fd_write and
	// fd_pwrite on a standard stream write the call's log.
	"poll_oneoff": true, "fd_write": true, "fd_pwrite": true,
	"fd_fdstat_get": true, "fd_filestat_get": true, "fd_tell": true,
	"fd_prestat_get": true, "fd_prestat_dir_name": true,
	"fd_sync": true, "fd_datasync": true, "fd_advise": true,
}

// wasiReads are the WASI functions that only read a descriptor's name,
// flags or status, and so change nothing on any descriptor: Go's and
// wasi-libc's initialization read every preopen's name, and counting that
// would cost every program its snapshot and its pooled instances. wazero
// opens a preopen to answer them, but a granted directory's own "." holds
// nothing of the host's until a read needs it (sandbox.FS), which
// TestWASIDescriptorsNotHeld holds it to.
var wasiReads = map[string]bool{
	"fd_prestat_get": true, "fd_prestat_dir_name": true, "fd_fdstat_get": true, "fd_filestat_get": true,
}

// wasiOps name the path functions' operations as a shell would.
var wasiOps = map[string]string{
	"create_directory": "mkdir", "filestat_get": "stat", "filestat_set_times": "touch",
	"remove_directory": "rmdir", "unlink_file": "unlink",
}

// wasiParam classifies a WASI parameter by its name: descriptor, iovecs,
// path, subscriptions, or "" for another kind.
func wasiParam(name string) string {
	switch {
	case name == "fd", name == "old_fd", name == "new_fd", name == "to":
		return "descriptor"
	case name == "iovs_len", name == "ri_data_len", name == "si_data_len":
		return "iovecs"
	case strings.HasSuffix(name, "path_len") && !strings.HasPrefix(name, "result."):
		return "path"
	case name == "nsubscriptions":
		return "subscriptions"
	}
	return ""
}

// wasiRuleOf derives def's rule from its parameter names.
func wasiRuleOf(def api.FunctionDefinition) *wasiRule {
	name := def.Name()
	if names := def.ExportNames(); len(names) > 0 {
		name = names[0]
	}
	rule := &wasiRule{name: name, to: -1, reads: wasiReads[name], harmless: wasiHarmless[name]}
	if op, ok := strings.CutPrefix(name, "path_"); ok {
		rule.op = wasiOps[op]
		if rule.op == "" {
			rule.op = op
		}
	}
	params := def.ParamNames()
	for i, p := range params {
		switch wasiParam(p) {
		case "descriptor":
			rule.fds = append(rule.fds, i)
			path := -1
			for j := i + 1; j < len(params); j++ {
				if wasiParam(params[j]) == "path" {
					path = j
					break
				}
			}
			rule.paths = append(rule.paths, path)
			if p == "to" {
				rule.to = i
				rule.bounds = append(rule.bounds, wasiBound{i, MaxDescriptor, "descriptor %d, past the highest berm allows (%d)", true})
			}
		case "iovecs":
			rule.bounds = append(rule.bounds, wasiBound{i, MaxIovecs, "%d iovecs, more than IOV_MAX (%d)", false})
		case "path":
			rule.bounds = append(rule.bounds, wasiBound{i, MaxPath, "a path of %d bytes, longer than PATH_MAX (%d)", false})
		case "subscriptions":
			rule.bounds = append(rule.bounds, wasiBound{i, MaxSubscriptions, "%d subscriptions, more than berm allows in one call (%d)", false})
		}
	}
	return rule
}

// check traps when a parameter passes its bound.
func (rule *wasiRule) check(params []uint64) {
	for _, b := range rule.bounds {
		if b.param >= len(params) {
			continue
		}
		if v := uint32(params[b.param]); v > b.max && !(b.signed && int32(v) < 0) {
			panic(trapf("%s.%s: "+b.format, wasiModule, rule.name, v, b.max))
		}
	}
}
