package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berm-dev/berm/internal/wasmbin"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
)

// want is the expected outcome of a call: a result, the program's failure,
// or a host error (by sentinel, with words its message must contain).
type want struct {
	result  string
	failure string
	err     error
	words   []string
}

func check(t *testing.T, out runtime.Outcome, err error, w want) {
	t.Helper()
	if w.err != nil {
		if !errors.Is(err, w.err) {
			t.Fatalf("err = %v, want %v", err, w.err)
		}
		for _, word := range w.words {
			if !strings.Contains(err.Error(), word) {
				t.Errorf("error %q does not name %q", err, word)
			}
		}
		if strings.Contains(err.Error(), "wasm stack trace") {
			t.Errorf("error carries a stack trace: %q", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("host error: %v", err)
	}
	if w.failure != "" {
		if !out.Failed || string(out.Failure) != w.failure {
			t.Fatalf("outcome = %+v, want failure %q", out, w.failure)
		}
		return
	}
	if out.Failed || string(out.Result) != w.result {
		t.Fatalf("outcome = failed %v %q result %q, want result %q", out.Failed, out.Failure, out.Result, w.result)
	}
}

func TestCore(t *testing.T) {
	var logMu sync.Mutex
	var logs []string
	rt := newRuntime(t, &runtime.Config{
		Limits: runtime.Limits{Deadline: 2 * time.Second},
		Log: func(_ context.Context, program, tool string, line []byte) {
			logMu.Lock()
			defer logMu.Unlock()
			logs = append(logs, program+"."+tool+": "+string(line))
		},
	})
	deploy(t, rt, "core", "core.wasm")
	tests := []struct {
		tool string
		args string
		want want
	}{
		{"echo", `{"x":"é"}`, want{result: `{"x":"é"}`}},
		{"echo", ` { "spaced" : true } `, want{result: ` { "spaced" : true } `}},
		{"fail", `{}`, want{failure: "it failed on purpose"}},
		{"result_then_fail", `{}`, want{failure: "failure wins"}},
		{"fail_then_result", `{}`, want{failure: "failed first"}},
		{"result_twice", `{}`, want{result: "second"}},
		{"fail_twice", `{}`, want{failure: "second"}},
		{"empty", `{}`, want{result: ""}},
		{"args_len", `{"abc":1}`, want{result: "9"}},
		{"read_partial", `{"a":1}`, want{result: `{"a:7`}},
		{"result_read_empty", `{}`, want{result: "0"}},
		{"zero_oob", `{}`, want{result: "zero bytes never trap"}},
		{"grow", `{}`, want{result: "refused"}},
		{"log", `{}`, want{result: "logged"}},
		{"strict", `{"n":3}`, want{result: "ok"}},
		{"trap", `{}`, want{err: runtime.ErrTrap, words: []string{"core.trap", "unreachable"}}},
		{"unknown_syscall", `{}`, want{err: runtime.ErrTrap, words: []string{"0x1234", "nothing is registered"}}},
		{"undeclared_syscall", `{}`, want{err: runtime.ErrTrap, words: []string{"0xbda7ac832c28873f"}}},
		{"oob_result", `{}`, want{err: runtime.ErrTrap, words: []string{"berm.result", "outside memory"}}},
		{"oob_args", `{}`, want{err: runtime.ErrTrap, words: []string{"berm.args.read", "outside memory"}}},
		{"bad_frame", `{}`, want{err: runtime.ErrTrap, words: []string{"berm.call", "malformed frame"}}},
		{"big_result", `{}`, want{err: runtime.ErrLimit, words: []string{"result", "17825792"}}},
		{"loop", `{}`, want{err: runtime.ErrDeadline, words: []string{"core.loop"}}},
		{"nope", `{}`, want{err: runtime.ErrNoTool, words: []string{"core.nope"}}},
		{"strict", `{"n":"x"}`, want{err: runtime.ErrArguments, words: []string{"/n"}}},
		{"strict", `{}`, want{err: runtime.ErrArguments, words: []string{"n"}}},
		{"strict", `{"n":1,"m":2}`, want{err: runtime.ErrArguments, words: []string{"m"}}},
		{"echo", `[1]`, want{err: runtime.ErrArguments, words: []string{"JSON object"}}},
		{"echo", `{"a":`, want{err: runtime.ErrArguments}},
		{"echo", ``, want{err: runtime.ErrArguments}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			out, err := rt.Call(context.Background(), "core", tt.tool, []byte(tt.args))
			check(t, out, err, tt.want)
		})
	}
	if want := []string{"core.log: hello from core", "core.log: second line"}; fmt.Sprint(logs) != fmt.Sprint(want) {
		t.Errorf("logs = %q, want %q", logs, want)
	}
	t.Run("no such program", func(t *testing.T) {
		_, err := rt.Call(context.Background(), "ghost", "echo", []byte(`{}`))
		check(t, runtime.Outcome{}, err, want{err: runtime.ErrNoProgram, words: []string{"ghost.echo"}})
	})
}

func TestLimits(t *testing.T) {
	rt := newRuntime(t, &runtime.Config{Limits: runtime.Limits{
		Deadline: 100 * time.Millisecond, Memory: 64 << 20, MaxArgs: 32, MaxResult: 8,
	}})
	deploy(t, rt, "core", "core.wasm")
	deploy(t, rt, "echo", "echo.wasm")
	ctx := context.Background()
	big := `{"message":"` + strings.Repeat("x", 32) + `"}`
	out, err := rt.Call(ctx, "echo", "echo", []byte(big))
	check(t, out, err, want{err: runtime.ErrArguments, words: []string{"over the size limit: 46 bytes, limit 32 bytes"}})
	out, err = rt.Call(ctx, "echo", "echo", []byte(`{"m":"123"}`))
	check(t, out, err, want{err: runtime.ErrLimit, words: []string{"result of 11 bytes"}})
	// A failure wins over a result, so an oversized result it replaces is no error;
	// an oversized failure message is.
	out, err = rt.Call(ctx, "core", "fail", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrLimit, words: []string{"failure message"}})
	out, err = rt.Call(ctx, "core", "result_then_fail", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrLimit, words: []string{"failure message"}})
	start := time.Now()
	out, err = rt.Call(ctx, "core", "loop", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrDeadline})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the 100ms deadline took %v to stop an endless loop", d)
	}
	// A context the caller cancels stops the call too.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = rt.Call(cctx, "core", "loop", []byte(`{}`))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled call: %v", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	ctx := context.Background()
	// With room for 256 MiB, the same growth succeeds.
	rt := newRuntime(t, &runtime.Config{Limits: runtime.Limits{Memory: 512 << 20}})
	deploy(t, rt, "core", "core.wasm")
	out, err := rt.Call(ctx, "core", "grow", []byte(`{}`))
	check(t, out, err, want{result: "grew"})

	// A maximum over the limit is no refusal: growth past the limit fails.
	deploy(t, rt, "maxmem", "maxmem.wasm")
	out, err = rt.Call(ctx, "maxmem", "grow", []byte(`{}`))
	check(t, out, err, want{result: "grew"})
	defaults := newRuntime(t, nil)
	deploy(t, defaults, "maxmem", "maxmem.wasm")
	out, err = defaults.Call(ctx, "maxmem", "grow", []byte(`{}`))
	check(t, out, err, want{result: "refused"})

	// A module whose minimum is over the limit is refused at deploy.
	_, err = rt.Deploy(ctx, "big", fixture(t, "broken/big_memory.wasm"), nil)
	if err != nil {
		t.Fatalf("3000 pages under a 512 MiB limit: %v", err)
	}
	small := newRuntime(t, nil)
	_, err = small.Deploy(ctx, "big", fixture(t, "broken/big_memory.wasm"), nil)
	if !errors.Is(err, runtime.ErrRefused) || !strings.Contains(err.Error(), "3000 pages") {
		t.Fatalf("3000 pages under the default limit: %v", err)
	}
}

// withTables is the echo fixture with a table section of the given payload in
// its place, before the memory section.
func withTables(t *testing.T, tables []byte) []byte {
	t.Helper()
	image := fixture(t, "echo.wasm")
	out := []byte(wasmbin.Header)
	for sec, err := range wasmbin.Sections(image) {
		if err != nil {
			t.Fatal(err)
		}
		if sec.ID == wasmbin.SectionMemory {
			out = wasmbin.AppendSection(out, wasmbin.SectionTable, tables)
		}
		out = append(out, image[sec.Start:sec.End]...)
	}
	return out
}

func TestTableLimits(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, nil)
	limit := fmt.Sprint(runtime.DefaultMaxTableEntries)

	// Refused at deploy, naming the table, its bound and the limit.
	for file, words := range map[string][]string{
		"broken/table_big_min.wasm": {"table 0", "minimum of 100000000 entries", limit},
		"broken/table_big_max.wasm": {"table 0", "maximum of 4294967295 entries", limit},
	} {
		_, err := rt.Deploy(ctx, "p", fixture(t, file), nil)
		check(t, runtime.Outcome{}, err, want{err: runtime.ErrRefused, words: words})
	}

	leb := func(n uint64) []byte { return wasmbin.AppendULEB(nil, n) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	const max = runtime.DefaultMaxTableEntries
	tests := []struct {
		name   string
		tables []byte
		words  []string // of the refusal; none when it deploys
	}{
		{"no maximum", cat([]byte{1, 0x70, 0x00}, leb(6251)), nil},
		{"a maximum at the limit", cat([]byte{1, 0x70, 0x01, 1}, leb(max)), nil},
		{"externref", cat([]byte{1, 0x6f, 0x01, 0}, leb(1000)), nil},
		{"a maximum over the limit", cat([]byte{1, 0x70, 0x01, 1}, leb(max+1)), []string{"table 0", "maximum of 1048577 entries"}},
		{"no maximum, a minimum over the limit", cat([]byte{1, 0x70, 0x00}, leb(max+1)), []string{"table 0", "minimum of 1048577 entries"}},
		{"two tables over the limit together",
			cat([]byte{2, 0x70, 0x01, 0}, leb(max/2+1), []byte{0x6f, 0x01, 0}, leb(max/2)),
			[]string{"tables 0 to 1", "1048577 entries together"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rt.Deploy(ctx, "tables", withTables(t, tt.tables), nil)
			if tt.words != nil {
				check(t, runtime.Outcome{}, err, want{err: runtime.ErrRefused, words: append(tt.words, limit)})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := rt.Call(ctx, "tables", "echo", []byte(`{"t":1}`))
			check(t, out, err, want{result: `{"t":1}`})
		})
	}

	// Go's linker declares its table without a maximum: it deploys.
	image, err := os.ReadFile("../examples/hello/hello.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "hello", image, nil); err != nil {
		t.Fatalf("hello: %v", err)
	}
}

func TestNested(t *testing.T) {
	tests := []struct {
		depth int
		tool  string
		want  want
	}{
		{4, "down", want{result: "refused:berm.call nest.down: refused: call depth 5 exceeds the limit of 4++++"}},
		{1, "down", want{result: "refused:berm.call nest.down: refused: call depth 2 exceeds the limit of 1+"}},
		{runtime.NoNestedCalls, "down", want{result: "refused:berm.call nest.down: refused: call depth 1 exceeds the limit of 0"}},
		{4, "call_echo", want{result: `{"via":"nest"}`}},
		{4, "call_fail", want{result: "failed:callee failed"}},
		{4, "call_ok_strict", want{result: "ok"}},
		{4, "call_trap", want{result: "refused:berm.call nest.trap: program trapped: wasm error: unreachable"}},
		{4, "call_undeclared", want{result: "refused:berm.call other.tool: refused: not declared in the manifest's calls"}},
		{4, "call_missing", want{result: "refused:berm.call ghost.tool: no such program"}},
		{4, "call_notool", want{result: "refused:berm.call nest.nope: no such tool"}},
		{4, "call_badargs", want{result: "refused:berm.call nest.strict: arguments refused: at /n: got string, want integer"}},
		{4, "call_notobject", want{result: "refused:berm.call nest.echo: arguments refused: want a JSON object"}},
		{4, "call_spin", want{err: runtime.ErrDeadline, words: []string{"nest.call_spin"}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s depth %d", tt.tool, tt.depth), func(t *testing.T) {
			rt := newRuntimeDepth(t, tt.depth, nil, &runtime.Config{Limits: runtime.Limits{Deadline: 300 * time.Millisecond}})
			deploy(t, rt, "nest", "nest.wasm")
			out, err := rt.Call(context.Background(), "nest", tt.tool, []byte(`{}`))
			check(t, out, err, tt.want)
		})
	}
}

func TestInitialize(t *testing.T) {
	var logs []string
	var mu sync.Mutex
	rt := newRuntime(t, &runtime.Config{Log: func(_ context.Context, program, tool string, line []byte) {
		mu.Lock()
		logs = append(logs, string(line))
		mu.Unlock()
	}})
	deploy(t, rt, "init", "init.wasm")
	ctx := context.Background()
	for i := range 3 {
		for tool, result := range map[string]string{"ready": "ready", "count": "1", "memory": "1"} {
			out, err := rt.Call(ctx, "init", tool, []byte(`{}`))
			check(t, out, err, want{result: result})
			_ = i
		}
	}
	// By default _initialize runs once, at the first call, and every call
	// starts from the snapshot it left (snapshot.go); on the plain path it runs
	// before each call.
	runs := 1
	if os.Getenv("BERM_PLAIN") == "1" {
		runs = 9
	}
	if len(logs) != runs || logs[0] != "initializing" {
		t.Errorf("_initialize logged %q, want initializing %d times", logs, runs)
	}
	deploy(t, rt, "bad-init", "init_syscall.wasm")
	out, err := rt.Call(ctx, "bad-init", "t", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrTrap, words: []string{"berm.args.len", "_initialize"}})
}

func TestImports(t *testing.T) {
	rt := newRuntime(t, nil)
	deploy(t, rt, "imports", "imports.wasm")
	ctx := context.Background()
	out, err := rt.Call(ctx, "imports", "ok", []byte(`{}`))
	check(t, out, err, want{result: "linked"})
	out, err = rt.Call(ctx, "imports", "missing", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrTrap, words: []string{"env.missing", "not provided"}})
	// Without a WASI table, random_get links and traps when called.
	out, err = rt.Call(ctx, "imports", "random", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrTrap, words: []string{"wasi_snapshot_preview1.random_get"}})

	// With the binary's WASI table: provided, and proc_exit ends a program.
	wasi := newRuntime(t, &runtime.Config{Imports: []runtime.HostModule{host.WASI()}, ModuleConfig: host.ModuleConfig()})
	deploy(t, wasi, "imports", "imports.wasm")
	for tool, w := range map[string]want{
		"random":  {result: "random ok"},
		"exit0":   {result: "before exit"},
		"exit3":   {err: runtime.ErrTrap, words: []string{"exited with code 3"}},
		"missing": {err: runtime.ErrTrap, words: []string{"env.missing"}},
	} {
		out, err := wasi.Call(ctx, "imports", tool, []byte(`{}`))
		check(t, out, err, w)
	}
}

func TestHostSyscalls(t *testing.T) {
	var got [][]byte
	syscalls := []runtime.Syscall{
		{Name: "test.sum", Input: runtime.Framed(2), Func: func(_ context.Context, c *runtime.Call, in [][]byte) (uint64, error) {
			got = append(got, append([]byte(nil), in[0]...), append([]byte(nil), in[1]...))
			return c.Stage([]byte(c.Program() + "." + c.Tool())), nil
		}},
	}
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, syscalls, nil)
	table := rt.Syscalls()
	if len(table) != 8 || table[7].Name != "test.sum" || table[7].Core || !table[0].Core {
		t.Fatalf("syscalls = %+v", table)
	}
	if runtime.Number("berm.args.len") != 0x6ee73f4eae1c1535 || runtime.Number("berm.delete") != 0x84a8776bcc70bc72 {
		t.Fatal("FNV-1a numbers differ from ABI.md")
	}
	// A syscall whose number is already taken is refused.
	_, err := runtime.New(context.Background(), runtime.Config{MaxCallDepth: 4, Syscalls: []runtime.Syscall{{Name: "berm.log", Func: syscalls[0].Func}}})
	if err == nil {
		t.Fatal("a host syscall shadowing berm.log was accepted")
	}
}

func TestDeployRefusals(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := context.Background()
	tests := []struct {
		file, name string
		want       error
	}{
		{"broken/not_wasm.wasm", "p", manifest.ErrNotModule},
		{"broken/component.wasm", "p", manifest.ErrNotModule},
		{"broken/truncated.wasm", "p", manifest.ErrMalformed},
		{"broken/no_memory.wasm", "p", manifest.ErrNoMemory},
		{"broken/memory_not_memory.wasm", "p", manifest.ErrNoMemory},
		{"broken/init_type.wasm", "p", manifest.ErrInitialize},
		{"broken/no_section.wasm", "p", manifest.ErrNoManifest},
		{"broken/two_sections.wasm", "p", manifest.ErrManyManifests},
		{"broken/bad_json.wasm", "p", manifest.ErrJSON},
		{"broken/not_utf8.wasm", "p", manifest.ErrJSON},
		{"broken/abi_missing.wasm", "p", manifest.ErrABIVersion},
		{"broken/abi_wrong.wasm", "p", manifest.ErrABIVersion},
		{"broken/abi_string.wasm", "p", manifest.ErrABIVersion},
		{"broken/no_tools.wasm", "p", manifest.ErrNoTools},
		{"broken/tool_name_dot.wasm", "p", manifest.ErrToolName},
		{"broken/tool_name_long.wasm", "p", manifest.ErrToolName},
		{"broken/dup_tool.wasm", "p", manifest.ErrDuplicateTool},
		{"broken/missing_export.wasm", "p", manifest.ErrToolExport},
		{"broken/export_type.wasm", "p", manifest.ErrToolExport},
		{"broken/schema_not_object.wasm", "p", manifest.ErrSchema},
		{"broken/schema_bool.wasm", "p", manifest.ErrSchema},
		{"broken/schema_invalid.wasm", "p", manifest.ErrSchema},
		{"broken/schema_external_ref.wasm", "p", manifest.ErrSchema},
		{"broken/berm_import_other.wasm", "p", manifest.ErrBermImport},
		{"broken/berm_syscall_type.wasm", "p", manifest.ErrBermImport},
		{"broken/bad_call_name.wasm", "p", manifest.ErrCallName},
		{"broken/import_memory.wasm", "p", runtime.ErrRefused},
		{"broken/import_global.wasm", "p", runtime.ErrRefused},
		{"broken/big_memory.wasm", "p", runtime.ErrRefused},
		{"broken/table_big_min.wasm", "p", runtime.ErrRefused},
		{"broken/table_big_max.wasm", "p", runtime.ErrRefused},
		{"echo.wasm", "Bad", manifest.ErrProgramName},
		{"echo.wasm", "a_b", manifest.ErrProgramName},
		{"echo.wasm", strings.Repeat("p", 60), manifest.ErrServedName}, // 60 + "_echo" = 65
	}
	deploy(t, rt, "p", "echo.wasm")
	for _, tt := range tests {
		t.Run(tt.file+" as "+tt.name, func(t *testing.T) {
			_, err := rt.Deploy(ctx, tt.name, fixture(t, tt.file), nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			// A refusal changes nothing: p is still the echo program.
			out, err := rt.Call(ctx, "p", "echo", []byte(`{}`))
			check(t, out, err, want{result: "{}"})
		})
	}
}

func TestReplaceAndRemove(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := context.Background()
	first := deploy(t, rt, "p", "echo.wasm")
	second := deploy(t, rt, "p", "core.wasm")
	if first.Digest == second.Digest || rt.Program("p") != second {
		t.Fatal("redeploy did not replace")
	}
	out, err := rt.Call(ctx, "p", "fail", []byte(`{}`))
	check(t, out, err, want{failure: "it failed on purpose"})
	if !rt.Remove("p") || rt.Remove("p") {
		t.Fatal("Remove reported wrongly")
	}
	_, err = rt.Call(ctx, "p", "fail", []byte(`{}`))
	check(t, out, err, want{err: runtime.ErrNoProgram})
}

// TestReplaceDuringCalls replaces a program while calls to it are in flight:
// every call finishes against the program it started with.
func TestReplaceDuringCalls(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := context.Background()
	deploy(t, rt, "p", "echo.wasm")
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 25 {
				args := fmt.Sprintf(`{"i":%d}`, i*100+j)
				out, err := rt.Call(ctx, "p", "echo", []byte(args))
				if err != nil {
					errs <- err
				} else if string(out.Result) != args {
					errs <- fmt.Errorf("result %q, want %q", out.Result, args)
				}
			}
		}()
	}
	for range 10 {
		deploy(t, rt, "p", "core.wasm") // core has an echo tool too
		deploy(t, rt, "p", "echo.wasm")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	rt := newRuntime(t, nil)
	deploy(t, rt, "nest", "nest.wasm")
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := rt.Call(context.Background(), "nest", "call_echo", []byte(`{"n":`+strconv.Itoa(i)+`}`))
			if err != nil || string(out.Result) != `{"via":"nest"}` {
				t.Errorf("call %d: %q %v", i, out.Result, err)
			}
		}()
	}
	wg.Wait()
}

// TestHostErrorsStayOnTheHost has host syscalls fail with an *os.PathError (as
// the data store's would), panic with one, and refuse with one: the program
// and its callers see the syscall's name and "host error", the embedder's
// HostError gets the error itself.
func TestHostErrorsStayOnTheHost(t *testing.T) {
	const secret = "/srv/berm-root/data/hosterr/k"
	pathErr := func() error { return &os.PathError{Op: "remove", Path: secret, Err: syscall.EIO} }
	var mu sync.Mutex
	var reported []string
	syscalls := []runtime.Syscall{
		{Name: "test.oops", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
			return 0, pathErr()
		}},
		{Name: "test.panic", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
			panic(pathErr())
		}},
		{Name: "test.refuse", Func: func(ctx context.Context, c *runtime.Call, _ [][]byte) (uint64, error) {
			return c.RefuseHost(ctx, pathErr()), nil
		}},
	}
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, syscalls, &runtime.Config{
		HostError: func(_ context.Context, program, tool string, err error) {
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != secret {
				t.Errorf("HostError got %v, want the *os.PathError", err)
			}
			mu.Lock()
			reported = append(reported, program+"."+tool+": "+err.Error())
			mu.Unlock()
		},
	})
	deployLocal(t, rt, "hosterr", "hosterr.wasm")
	ctx := context.Background()
	tests := []struct {
		tool string
		want want
	}{
		{"oops", want{err: runtime.ErrTrap, words: []string{"hosterr.oops: program trapped: syscall test.oops: host error"}}},
		{"panic", want{err: runtime.ErrTrap, words: []string{"hosterr.panic: program trapped: syscall test.panic: host error"}}},
		{"refuse", want{result: "refused:test.refuse: host error"}},
		{"call_oops", want{result: "refused:berm.call hosterr.oops: program trapped: syscall test.oops: host error"}},
		{"call_panic", want{result: "refused:berm.call hosterr.panic: program trapped: syscall test.panic: host error"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			mu.Lock()
			reported = nil
			mu.Unlock()
			out, err := rt.Call(ctx, "hosterr", tt.tool, []byte(`{}`))
			check(t, out, err, tt.want)
			if err != nil {
				if strings.Contains(err.Error(), secret) || !errors.Is(err, runtime.ErrHost) {
					t.Errorf("error %q: want ErrHost, and no host path", err)
				}
			}
			if strings.Contains(string(out.Result), secret) {
				t.Errorf("the program saw %q", out.Result)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reported) != 1 || !strings.Contains(reported[0], secret) || !strings.Contains(reported[0], "syscall test.") {
				t.Errorf("HostError got %q, want the one error, its syscall named", reported)
			}
		})
	}
}

func TestLogLimits(t *testing.T) {
	type line struct{ at, text string }
	tests := []struct {
		limits runtime.Limits
		tool   string
		want   []line // the first lines, then the last
		total  int
	}{
		{runtime.Limits{}, "spam", []line{{"logloop.spam", "spam"},
			{"logloop.spam", "berm: 4000 log lines dropped (limit 1000 lines, 1048576 bytes per call)"}}, 1001},
		{runtime.Limits{}, "big", []line{{"logloop.big", strings.Repeat("x", runtime.MaxLogLine)},
			{"logloop.big", "berm: 84 log lines dropped (limit 1000 lines, 1048576 bytes per call)"}}, 17},
		{runtime.Limits{MaxLogLines: 10, MaxLogBytes: 24}, "spam", []line{{"logloop.spam", "spam"},
			{"logloop.spam", "berm: 4994 log lines dropped (limit 10 lines, 24 bytes per call)"}}, 7},
		// Nested calls share the caller's budget; the count comes once, at the end.
		{runtime.Limits{}, "spam_call", []line{{"logloop.spam_call", "spam"},
			{"logloop.spam_call", "berm: 4600 log lines dropped (limit 1000 lines, 1048576 bytes per call)"}}, 1001},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d %d", tt.tool, tt.limits.MaxLogLines, tt.limits.MaxLogBytes), func(t *testing.T) {
			var mu sync.Mutex
			var got []line
			rt := newRuntime(t, &runtime.Config{Limits: tt.limits, Log: func(_ context.Context, program, tool string, b []byte) {
				mu.Lock()
				got = append(got, line{program + "." + tool, string(b)})
				mu.Unlock()
			}})
			deployLocal(t, rt, "logloop", "logloop.wasm")
			out, err := rt.Call(context.Background(), "logloop", tt.tool, []byte(`{}`))
			check(t, out, err, want{result: "done"})
			if len(got) != tt.total || got[0] != tt.want[0] || got[len(got)-1] != tt.want[1] {
				last := got[len(got)-1]
				if len(last.text) > 100 {
					last.text = last.text[:100] + "..."
				}
				t.Fatalf("%d lines, the last %q, want %d, the first %.40q and the last %q", len(got), last, tt.total, tt.want[0], tt.want[1])
			}
		})
	}
}

// A call that fails on the host over and over reports MaxHostErrors of them
// and then one line counting the rest: a program looping on a failing
// berm.set cannot flood the operator's log.
func TestHostErrorsBounded(t *testing.T) {
	var reported []string
	syscalls := []runtime.Syscall{
		{Name: "test.oops", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) { return 0, errors.New("oops") }},
		{Name: "test.panic", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) { return 0, errors.New("panic") }},
		{Name: "test.refuse", Func: func(ctx context.Context, c *runtime.Call, _ [][]byte) (uint64, error) {
			for range 1000 {
				c.HostFailed(ctx, errors.New("disk on fire"))
			}
			return c.RefuseHost(ctx, errors.New("disk on fire")), nil
		}},
	}
	rt := newRuntimeDepth(t, runtime.DefaultCallDepth, syscalls, &runtime.Config{
		HostError: func(_ context.Context, _, _ string, err error) { reported = append(reported, err.Error()) },
	})
	deployLocal(t, rt, "hosterr", "hosterr.wasm")
	if _, err := rt.Call(context.Background(), "hosterr", "refuse", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if len(reported) != runtime.MaxHostErrors+1 || !strings.Contains(reported[len(reported)-1], "991 more host errors") {
		t.Fatalf("%d reports, last %q; want %d and a count of the 991 others", len(reported), reported[len(reported)-1], runtime.MaxHostErrors+1)
	}
}
