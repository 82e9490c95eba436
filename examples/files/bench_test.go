//go:build !wasip1

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// nativeReader is the same read by a Go program compiled natively: it
// starts its runtime, reads the file whole and prints its length.
const nativeReader = `package main

import (
	"fmt"
	"os"
)

func main() {
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	fmt.Println(len(b))
}
`

// BenchmarkRead1MiB reads a 1 MiB text file through a granted directory:
// berm's call of files.read (a fresh instance of the Go program, its
// runtime started, the file read over WASI through the os.Root mount, the
// text returned), next to a native Go program doing the same read as a
// process of its own, and to the read alone in this process. The issue's
// target: berm within 3x of the native program. Most of berm's time is the
// Go runtime starting in a fresh instance (hello's greet, which reads
// nothing, takes 4-5 ms).
//
//	go test -run '^$' -bench Read1MiB -count 6 ./examples/files/
func BenchmarkRead1MiB(b *testing.B) {
	dir := b.TempDir()
	text := strings.Repeat("berm reads a granted file. ", (1<<20)/27+1)[:1<<20]
	file := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}

	b.Run("berm", func(b *testing.B) {
		ctx := context.Background()
		rt, err := runtime.New(ctx, runtime.Config{
			Imports:      []runtime.HostModule{host.WASI()},
			ModuleConfig: host.ModuleConfig(),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		image, err := os.ReadFile("files.wasm")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Deploy(ctx, "files", image, &sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/data"}}}); err != nil {
			b.Fatal(err)
		}
		args := []byte(`{"path":"/data/big.txt"}`)
		b.SetBytes(1 << 20)
		for b.Loop() {
			out, err := rt.Call(ctx, "files", "read", args)
			if err != nil || out.Failed || len(out.Result) < 1<<20 {
				b.Fatalf("read: %v, failure %q, %d bytes", err, out.Failure, len(out.Result))
			}
		}
	})

	src := filepath.Join(b.TempDir(), "main.go")
	if err := os.WriteFile(src, []byte(nativeReader), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "reader")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		b.Fatalf("build the native reader: %v\n%s", err, out)
	}
	b.Run("native/process", func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			out, err := exec.Command(bin, file).Output()
			if err != nil || strings.TrimSpace(string(out)) != "1048576" {
				b.Fatalf("native reader: %q, %v", out, err)
			}
		}
	})

	b.Run("native/inprocess", func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			if got, err := os.ReadFile(file); err != nil || len(got) != 1<<20 {
				b.Fatal(err)
			}
		}
	})
}
