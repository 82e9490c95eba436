package runtime_test

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// A path outside every grant, as Go's os asks for it (descriptor -1),
// makes the call's log say it was not granted and what is, once per path
// up to MaxNotGranted, then how many more: Go's "lstat /etc: Bad file
// number" came with nothing in the log. A path the program made odd is
// quoted, on one line. The refusal leaves the instance as it was, so that
// the next call is served from the pool.
func TestWASINotGranted(t *testing.T) {
	t.Parallel()
	const ebadf = 8
	for _, tc := range []struct {
		name   string
		grants *sandbox.Grants
		hint   string
	}{
		{"no grant", nil, "no directory is granted; a deployment grants one with --allow-dir HOST[:GUEST])"},
		{"grants", &sandbox.Grants{Dirs: []sandbox.Dir{{Host: t.TempDir(), Guest: "/data"}, {Host: t.TempDir(), Guest: "/out", Write: true}}},
			"granted are /data read-only, /out read-write; a deployment grants another with --allow-dir HOST[:GUEST])"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logLines
			rt := poolRuntime(t, runtime.Config{Log: logs.log})
			p := deployPoolFile(t, rt, "outside", "wasi_outside.wasm", tc.grants)
			call := func(tool string) uint32 {
				t.Helper()
				out, err := rt.Call(context.Background(), "outside", tool, []byte(`{}`))
				if err != nil {
					t.Fatalf("outside.%s: %v", tool, err)
				}
				if len(out.Result) != 4 {
					return 0
				}
				return binary.LittleEndian.Uint32(out.Result)
			}
			if errno := call("stat_etc"); errno != ebadf {
				t.Errorf("stat /etc: errno %d, want EBADF (%d), as wazero answers", errno, ebadf)
			}
			want := "outside.stat_etc: berm: stat /etc: not granted (hint: " + tc.hint
			if got := logs.all(); len(got) != 1 || got[0] != want {
				t.Fatalf("log %q, want one line %q", got, want)
			}
			before, _ := runtime.Reused(p)
			call("noop")
			if after, pooled := runtime.Reused(p); pooled && after != before+1 {
				t.Errorf("the call after the refusal ran in a new instance: the refusal counted as a change")
			}
			call("stat_many")
			got := logs.all()[1:]
			if n := len(got); n != runtime.MaxNotGranted+1 ||
				!slices.Equal(got[:runtime.MaxNotGranted], slices.Repeat([]string{strings.Replace(want, "stat_etc", "stat_many", 1)}, runtime.MaxNotGranted)) ||
				got[n-1] != "outside.stat_many: berm: 5 more paths not granted (limit 10 lines per call)" {
				t.Errorf("log of 15 refusals: %q", got)
			}
			call("open_odd")
			if got := logs.all(); !strings.HasPrefix(got[len(got)-1], `outside.open_odd: berm: open "/x\nberm: forged": not granted (hint: `) {
				t.Errorf("log of an odd path: %q", got[len(got)-1])
			}
		})
	}
}
