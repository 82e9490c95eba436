package commands

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

// needClang skips a test without a clang for wasm32; CI installs Debian's
// clang and lld.
func needClang(tb testing.TB) {
	tb.Helper()
	if _, err := findClang(); err != nil {
		tb.Skipf("no clang for wasm32 (CI installs Debian's clang and lld): %v", err)
	}
}

// TestBuildC builds the C scaffold with berm build's code (buildCModule, the
// manifest from berm.toml), checks the module, and calls its tool through the
// runtime; then runs the scaffold's own native test, as make test does.
func TestBuildC(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, root := scaffoldProject(t, "c", "wc")
	image := buildScaffold(t, dir, root)
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 1 || m.Tools[0].Name != "count" || !strings.Contains(m.Usage, "**wc**") {
		t.Errorf("manifest: %+v", m)
	}
	t.Logf("the C scaffold's image: %d bytes", len(image))
	checkScaffoldCount(t, deployTestImage(t, "wc", image), "wc")

	// Reproducible: the same sources, the same module.
	a, b := filepath.Join(t.TempDir(), "a.wasm"), filepath.Join(t.TempDir(), "b.wasm")
	for _, out := range []string{a, b} {
		if err := buildCModule(context.Background(), dir, out); err != nil {
			t.Fatal(err)
		}
	}
	if ba, bb := readTestFile(t, a), readTestFile(t, b); !bytes.Equal(ba, bb) {
		t.Error("two builds of the same sources differ")
	} else if imports := string(ba); !strings.Contains(imports, "berm") || strings.Contains(imports, "wasi_snapshot_preview1") {
		t.Error("the module imports other than berm.syscall")
	}

	cc, errCC := exec.LookPath("cc")
	mk, errMake := exec.LookPath("make")
	if errCC != nil || errMake != nil {
		t.Logf("no cc or make: the scaffold's native test is not run")
		return
	}
	cmd := exec.Command(mk, "test", "CC="+cc)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok: 4 checks") {
		t.Errorf("make test: %v\n%s", err, out)
	}
}

// TestBuildCErrors: what berm build says when the C program cannot be built.
func TestBuildCErrors(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "raw.wasm")

	t.Run("no clang", func(t *testing.T) {
		t.Setenv("BERM_CLANG", "no-such-clang")
		err := buildCModule(ctx, t.TempDir(), out)
		if err == nil || !strings.Contains(err.Error(), "no clang") || !strings.Contains(hintFor(err), "apt-get install clang lld") {
			t.Errorf("got %v (hint %q); want no clang, with the apt packages", err, hintFor(err))
		}
	})

	needClang(t)
	t.Run("no source", func(t *testing.T) {
		dir := t.TempDir()
		writeTestFile(t, filepath.Join(dir, "tools_test.c"), "int main(void) { return 0; }\n")
		err := buildCModule(ctx, dir, out)
		if err == nil || !strings.Contains(err.Error(), "no .c file") {
			t.Errorf("got %v; want no .c file", err)
		}
	})
	t.Run("compile error", func(t *testing.T) {
		dir, _ := scaffoldProject(t, "c", "broken")
		writeTestFile(t, filepath.Join(dir, "tools.c"), "#include \"berm.h\"\nBERM_TOOL(count) { undeclared(); }\n")
		err := buildCModule(ctx, dir, out)
		if err == nil || !strings.Contains(err.Error(), "tools.c:2") || !strings.Contains(err.Error(), "undeclared") {
			t.Errorf("got %v; want clang's diagnostic", err)
		}
	})
	t.Run("a libc function", func(t *testing.T) {
		// Freestanding: a call to what libc would have is a link error,
		// not an import that traps when called.
		dir, _ := scaffoldProject(t, "c", "libc")
		writeTestFile(t, filepath.Join(dir, "tools.c"),
			"#include \"berm.h\"\nint puts(const char *);\nBERM_TOOL(count) { puts(\"x\"); }\n")
		err := buildCModule(ctx, dir, out)
		if err == nil || !strings.Contains(err.Error(), "undefined symbol: puts") {
			t.Errorf("got %v; want the linker's undefined symbol", err)
		}
	})
}

// BenchmarkCallC is one call of the C scaffold's count through the runtime.
func BenchmarkCallC(b *testing.B) {
	needClang(b)
	dir, root := scaffoldProject(b, "c", "wc")
	benchCount(b, deployTestImage(b, "wc", buildScaffold(b, dir, root)), "wc")
}

func readTestFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func writeTestFile(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}
