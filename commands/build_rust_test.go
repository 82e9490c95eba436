package commands

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// needRust skips a test without a rustc for wasm32-unknown-unknown and a
// cargo; CI installs Debian's rustc, libstd-rust-dev-wasm32 and cargo. It
// returns them.
func needRust(tb testing.TB) (rustc, cargo string) {
	tb.Helper()
	rustc, _, err := findRustc(rustcCandidates())
	if err == nil {
		cargo, err = findCargo(rustc)
	}
	if err != nil {
		tb.Skipf("no Rust for wasm32 (CI installs Debian's rustc, libstd-rust-dev-wasm32 and cargo): %v", err)
	}
	return rustc, cargo
}

// TestBuildRust builds the Rust scaffold with berm build's code
// (buildRustModule, the manifest from berm.toml), checks the module, and calls
// its tool through the runtime; then runs the scaffold's own test, cargo test,
// with the same toolchain.
func TestBuildRust(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cargo builds the scaffold three times, ~20 s")
	}
	rustc, cargo := needRust(t)
	dir, root := scaffoldProject(t, "rust", "wc")
	image := buildScaffold(t, dir, root)
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 1 || m.Tools[0].Name != "count" || !strings.Contains(m.Usage, "**wc**") {
		t.Errorf("manifest: %+v", m)
	}
	t.Logf("the Rust scaffold's image: %d bytes", len(image))
	checkScaffoldCount(t, deployTestImage(t, "wc", image), "wc")

	// Reproducible, and without this machine's paths.
	a, b := filepath.Join(t.TempDir(), "a.wasm"), filepath.Join(t.TempDir(), "b.wasm")
	for _, out := range []string{a, b} {
		if err := buildRustModule(context.Background(), io.Discard, dir, out); err != nil {
			t.Fatal(err)
		}
	}
	ba, bb := readTestFile(t, a), readTestFile(t, b)
	if !bytes.Equal(ba, bb) {
		t.Error("two builds of the same sources differ")
	}
	home, _ := os.UserHomeDir()
	for _, p := range []string{dir, root, home} {
		if p != "" && p != "/" && bytes.Contains(ba, []byte(p)) {
			t.Errorf("the module holds the path %s", p)
		}
	}

	cmd := exec.Command(cargo, "test", "--offline")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUSTC="+rustc, "RUSTDOC="+filepath.Join(filepath.Dir(rustc), "rustdoc"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "test tests::counts ... ok") {
		t.Errorf("cargo test: %v\n%s", err, out)
	}
}

// TestBuildRustErrors: what berm build says when the Rust program cannot be
// built.
func TestBuildRustErrors(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "raw.wasm")

	t.Run("no Cargo.toml", func(t *testing.T) {
		err := buildRustModule(ctx, io.Discard, t.TempDir(), out)
		if err == nil || !strings.Contains(err.Error(), "no Cargo.toml") {
			t.Errorf("got %v; want no Cargo.toml", err)
		}
	})
	t.Run("no rustc", func(t *testing.T) {
		dir, _ := scaffoldProject(t, "rust", "x")
		t.Setenv("BERM_RUSTC", "no-such-rustc")
		err := buildRustModule(ctx, io.Discard, dir, out)
		if err == nil || !strings.Contains(err.Error(), "no rustc") ||
			!strings.Contains(hintFor(err), "apt-get install rustc libstd-rust-dev-wasm32 cargo") {
			t.Errorf("got %v (hint %q); want no rustc, with the apt packages", err, hintFor(err))
		}
	})
	t.Run("rustc without the target", func(t *testing.T) {
		// A rustc whose wasm32 standard library is not there: a script
		// that prints an empty directory as its target-libdir.
		dir, _ := scaffoldProject(t, "rust", "x")
		fake := filepath.Join(t.TempDir(), "rustc")
		writeTestFile(t, fake, "#!/bin/sh\necho "+t.TempDir()+"\n")
		if err := os.Chmod(fake, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("BERM_RUSTC", fake)
		err := buildRustModule(ctx, io.Discard, dir, out)
		if err == nil || !strings.Contains(err.Error(), "no wasm32-unknown-unknown standard library") ||
			!strings.Contains(hintFor(err), "libstd-rust-dev-wasm32") {
			t.Errorf("got %v (hint %q); want the missing target, with the apt packages", err, hintFor(err))
		}
	})

	t.Run("an older toolchain and a newer Cargo.lock", func(t *testing.T) {
		// The PATH's rustc (rustup's, say) has no wasm32 target, and the
		// next one found, an older Debian rustc with it, has a cargo that
		// cannot read the Cargo.lock the newer cargo wrote: berm says which
		// it took and why, and how to get out.
		dir, _ := scaffoldProject(t, "rust", "x")
		writeTestFile(t, filepath.Join(dir, "Cargo.lock"), "version = 4\n")
		newer, older, libdir := t.TempDir(), t.TempDir(), t.TempDir()
		writeTestFile(t, filepath.Join(libdir, "libstd-0123.rlib"), "")
		script := func(path, body string) {
			writeTestFile(t, path, "#!/bin/sh\n"+body)
			if err := os.Chmod(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		script(filepath.Join(newer, "rustc"), "case \"$1\" in --version) echo rustc 1.95.0;; *) echo "+t.TempDir()+";; esac\n")
		script(filepath.Join(older, "rustc"), "case \"$1\" in --version) echo rustc 1.63.0;; *) echo "+libdir+";; esac\n")
		script(filepath.Join(older, "cargo"), "case \"$1\" in --version) echo cargo 1.65.0;; *)\n"+
			"echo 'error: failed to parse lock file at: '$PWD/Cargo.lock >&2\n"+
			"echo 'Caused by:' >&2\n"+
			"echo '  lock file version `4` was found, but this version of Cargo does not understand this lock file, perhaps Cargo needs to be updated?' >&2\n"+
			"exit 101;; esac\n")
		var stderr bytes.Buffer
		err := buildRust(ctx, &stderr, []string{filepath.Join(newer, "rustc"), filepath.Join(older, "rustc")}, dir, out)
		note := stderr.String()
		if !strings.Contains(note, "berm: warning: build: "+filepath.Join(newer, "rustc")+" (rustc 1.95.0) has no wasm32-unknown-unknown standard library: building with "+
			filepath.Join(older, "rustc")+" (rustc 1.63.0) and "+filepath.Join(older, "cargo")) || strings.Count(note, "\n") != 1 {
			t.Errorf("stderr %q: want one line naming the toolchain taken and why", note)
		}
		hint := hintFor(err)
		if err == nil || !strings.Contains(err.Error(), "lock file version `4`") ||
			!strings.Contains(hint, "Cargo.lock was written by a newer cargo than "+filepath.Join(older, "cargo")+" (cargo 1.65.0)") ||
			!strings.Contains(hint, "delete Cargo.lock") || !strings.Contains(hint, "rustup target add wasm32-unknown-unknown") {
			t.Errorf("got %v (hint %q); want cargo's words and a hint to delete Cargo.lock or add the target", err, hint)
		}
	})

	if testing.Short() {
		t.Skip("the rest runs cargo")
	}
	needRust(t)
	t.Run("compile error", func(t *testing.T) {
		dir, _ := scaffoldProject(t, "rust", "broken")
		writeTestFile(t, filepath.Join(dir, "src", "lib.rs"), "#[no_mangle]\npub extern \"C\" fn berm_tool_count() { undeclared() }\n")
		err := buildRustModule(ctx, io.Discard, dir, out)
		if err == nil || !strings.Contains(err.Error(), "undeclared") || !strings.Contains(err.Error(), "src/lib.rs:2") {
			t.Errorf("got %v; want rustc's diagnostic", err)
		}
	})
	t.Run("not a cdylib", func(t *testing.T) {
		dir, _ := scaffoldProject(t, "rust", "lib")
		toml := strings.Replace(string(readTestFile(t, filepath.Join(dir, "Cargo.toml"))), `crate-type = ["cdylib"]`, `crate-type = ["rlib"]`, 1)
		writeTestFile(t, filepath.Join(dir, "Cargo.toml"), toml)
		err := buildRustModule(ctx, io.Discard, dir, out)
		if err == nil || !strings.Contains(hintFor(err), "cdylib") {
			t.Errorf("got %v; want a hint to make it a cdylib", err)
		}
	})
}

// BenchmarkCallRust is one call of the Rust scaffold's count through the
// runtime.
func BenchmarkCallRust(b *testing.B) {
	needRust(b)
	dir, root := scaffoldProject(b, "rust", "wc")
	benchCount(b, deployTestImage(b, "wc", buildScaffold(b, dir, root)), "wc")
}
