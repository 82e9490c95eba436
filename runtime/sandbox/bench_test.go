package sandbox

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// BenchmarkRead1MiB reads a 1 MiB file through a granted directory: each
// wasm program is instantiated, reads the file to its stdout (discarded) and
// exits, under plain wazero with the directory mounted by Mount. Beside
// them, the same Go program compiled natively, run as a process, and the
// read in this process: as fsops.wat does it (64 KiB at a time) and by
// os.ReadFile. wasm/go is mostly the Go runtime starting (wazero applies
// its data segments and the runtime initializes: about 15 ms of it here),
// which berm's runtime shortens by merging those segments.
//
//	go test -run '^$' -bench Read1MiB -count 10 ./runtime/sandbox/
func BenchmarkRead1MiB(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, 1<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := Mount(Dir{Host: dir, Guest: "/data"})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	mounts := []mountPoint{{f, "/data"}}

	for _, w := range []struct{ name, file, op, path string }{
		{"wasm/wat", "fsops_wat.wasm", "r", "big.bin"},
		{"wasm/c", "fsops_c.wasm", "read", "/data/big.bin"},
		{"wasm/go", "fsops.wasm", "read", "/data/big.bin"},
	} {
		b.Run(w.name, func(b *testing.B) {
			c := env().compile(b, w.file)
			args := []string{w.op, w.path}
			// The first run checks what is read, the rest discard it.
			if r := runWASI(b, c, mounts, args, nil); r.exit != 0 || r.trap != nil || r.stdout != string(data) {
				b.Fatalf("%s: exit %d, %v, %d bytes", w.file, r.exit, r.trap, len(r.stdout))
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for b.Loop() {
				if r := runDiscard(b, c, mounts, args); r != 0 {
					b.Fatalf("exit %d", r)
				}
			}
		})
	}

	b.Run("native/go-process", func(b *testing.B) {
		gobin, err := exec.LookPath("go")
		if err != nil {
			b.Skip("no go to build the native program")
		}
		bin := filepath.Join(b.TempDir(), "fsops")
		build := exec.Command(gobin, "build", "-trimpath", "-o", bin, "./testdata/fsops")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		var out bytes.Buffer
		cmd := exec.Command(bin, "read", filepath.Join(dir, "big.bin"))
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil || !bytes.Equal(out.Bytes(), data) {
			b.Fatalf("native: %v, %d bytes", err, out.Len())
		}
		b.SetBytes(int64(len(data)))
		b.ResetTimer()
		for b.Loop() {
			cmd := exec.Command(bin, "read", filepath.Join(dir, "big.bin"))
			cmd.Stdout = io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})

	// What fsops.wat does: open, read 64 KiB at a time, close.
	b.Run("native/read64k", func(b *testing.B) {
		buf := make([]byte, 64<<10)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			file, err := os.Open(filepath.Join(dir, "big.bin"))
			if err != nil {
				b.Fatal(err)
			}
			for {
				n, err := file.Read(buf)
				if err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
				io.Discard.Write(buf[:n])
			}
			file.Close()
		}
	})

	b.Run("native/readfile", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			got, err := os.ReadFile(filepath.Join(dir, "big.bin"))
			if err != nil || len(got) != len(data) {
				b.Fatal(err)
			}
			io.Discard.Write(got)
		}
	})
}

// runDiscard runs a program once, its output discarded, and returns its
// exit code.
func runDiscard(b *testing.B, c wazero.CompiledModule, mounts []mountPoint, args []string) uint32 {
	r := runWASIOut(b, c, mounts, args, nil, io.Discard)
	if r.trap != nil {
		b.Fatal(r.trap)
	}
	return r.exit
}

// BenchmarkRenameOverDir renames a directory over an empty one 2000
// levels down (a path of 4001 bytes, within MaxPath), as the attack on
// path resolution did, after the mkdir that makes the next one: os.Root
// walks every level of each path it resolves, one openat a level.
//
//	go test -run '^$' -bench RenameOverDir -count 6 ./runtime/sandbox/
func BenchmarkRenameOverDir(b *testing.B) {
	dir := b.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	for range 2000 {
		if err := r.Mkdir("a", 0o755); err != nil {
			b.Fatal(err)
		}
		next, err := r.OpenRoot("a")
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
		r = next
	}
	r.Close()
	f, err := Mount(Dir{Host: dir, Guest: "/data", Write: true})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	deep := strings.Repeat("a/", 1999) + "a"
	if errno := f.Mkdir(deep+"/e", 0o755); errno != 0 {
		b.Fatal(errno)
	}
	for b.Loop() {
		if errno := f.Mkdir(deep+"/d", 0o755); errno != 0 {
			b.Fatal(errno)
		}
		if errno := f.Rename(deep+"/d", deep+"/e"); errno != 0 {
			b.Fatal(errno)
		}
	}
}
