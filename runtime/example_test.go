package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/berm-dev/berm/runtime"
)

func Example() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	image, _ := os.ReadFile("../testdata/core.wasm")
	if _, err := rt.Deploy(ctx, "core", image, nil); err != nil {
		panic(err)
	}
	for _, tool := range []string{"echo", "fail", "trap"} {
		out, err := rt.Call(ctx, "core", tool, []byte(`{"query":"hello"}`))
		switch {
		case err != nil:
			fmt.Println("host error:", errors.Is(err, runtime.ErrTrap))
		case out.Failed:
			fmt.Println("failure:", string(out.Failure))
		default:
			fmt.Println("result:", string(out.Result))
		}
	}
	// Output:
	// result: {"query":"hello"}
	// failure: it failed on purpose
	// host error: true
}

// The README's embedding snippet, whole: compiled code cached in a
// directory, the host's syscalls beside the core ones.
func Example_embedding() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "berm-cache-")
	defer os.RemoveAll(dir)
	var hostSyscalls []runtime.Syscall // an embedder's own, or runtime/host's
	image, _ := os.ReadFile("../testdata/core.wasm")

	rt, err := runtime.New(ctx, runtime.Config{Syscalls: hostSyscalls, CacheDir: dir})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	_, err = rt.Deploy(ctx, "example", image, nil) // nil: no grants
	if err != nil {
		panic(err)
	}
	out, err := rt.Call(ctx, "example", "echo", []byte(`{"query":"hello"}`))
	// err is the host's (no such tool, bad arguments, a trap, the deadline);
	// out.Failed and out.Failure are the program's own failure; out.Result its result.
	fmt.Println(string(out.Result), out.Failed, err)
	// Output:
	// {"query":"hello"} false <nil>
}

func ExampleNew() {
	ctx := context.Background()
	// A host syscall: programs that declare "example.answer" may call it.
	answer := runtime.Syscall{
		Name:  "example.answer",
		Input: runtime.Unused,
		Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
			return 42, nil
		},
	}
	rt, err := runtime.New(ctx, runtime.Config{
		Syscalls: []runtime.Syscall{answer},
		Limits:   runtime.Limits{Memory: 16 << 20},
	})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	for _, s := range rt.Syscalls()[5:] {
		fmt.Printf("%s 0x%x core=%v\n", s.Name, s.Number, s.Core)
	}
	// Output:
	// berm.call 0x6410f207e9992ec1 core=true
	// berm.result.read 0x6c92a7d946a830be core=true
	// example.answer 0xf87ded1874c9dc27 core=false
}

func ExampleRuntime_Deploy() {
	ctx := context.Background()
	rt, _ := runtime.New(ctx, runtime.Config{})
	defer rt.Close(ctx)
	image, _ := os.ReadFile("../testdata/echo.wasm")
	p, err := rt.Deploy(ctx, "echo", image, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Name, p.Digest[:19], p.Manifest.ToolNames())
	_, err = rt.Deploy(ctx, "Not_A_Name", image, nil)
	fmt.Println(err)
	// Output:
	// echo sha256:30dc969ffa61 [echo]
	// program name "Not_A_Name" has 'N': want [a-z0-9-]: bad program name
}

func ExampleRuntime_Call() {
	ctx := context.Background()
	rt, _ := runtime.New(ctx, runtime.Config{})
	defer rt.Close(ctx)
	image, _ := os.ReadFile("../testdata/core.wasm")
	rt.Deploy(ctx, "core", image, nil)
	_, err := rt.Call(ctx, "core", "strict", []byte(`{"n":"three"}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, runtime.ErrArguments))
	// Output:
	// core.strict: arguments refused: at /n: got string, want integer
	// true
}

// A host syscall's error stops the program, which sees only the syscall's
// name and "host error"; the error itself, which may name the host's files,
// goes to Config.HostError for the host's log.
func ExampleConfig_hostError() {
	ctx := context.Background()
	oops := runtime.Syscall{Name: "test.oops", Func: func(context.Context, *runtime.Call, [][]byte) (uint64, error) {
		return 0, &os.PathError{Op: "open", Path: "/srv/secret", Err: os.ErrPermission}
	}}
	rt, _ := runtime.New(ctx, runtime.Config{
		Syscalls: []runtime.Syscall{oops},
		HostError: func(_ context.Context, program, tool string, err error) {
			fmt.Printf("log: %s.%s: %v\n", program, tool, err)
		},
	})
	defer rt.Close(ctx)
	image, _ := os.ReadFile("testdata/hosterr.wasm")
	rt.Deploy(ctx, "hosterr", image, nil)
	_, err := rt.Call(ctx, "hosterr", "oops", []byte(`{}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, runtime.ErrTrap), errors.Is(err, runtime.ErrHost))
	// Output:
	// log: hosterr.oops: syscall test.oops: open /srv/secret: permission denied
	// hosterr.oops: program trapped: syscall test.oops: host error
	// true true
}

// Prepare and Install apart: compile first, then decide whether the program
// is still wanted (a newer deployment may have come meanwhile).
func ExampleRuntime_Install() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	image, _ := os.ReadFile("../testdata/echo.wasm")
	p, err := rt.Prepare(ctx, "echo", image, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("callable before Install:", rt.Program("echo") != nil)
	if err := rt.Install(p); err != nil {
		panic(err)
	}
	out, err := rt.Call(ctx, "echo", "echo", []byte(`{"message":"hi"}`))
	fmt.Println(string(out.Result), err)
	// Output:
	// callable before Install: false
	// {"message":"hi"} <nil>
}
