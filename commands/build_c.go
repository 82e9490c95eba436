package commands

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// cFlags are berm build's flags for a C program: freestanding wasm32, no
// libc. -mbulk-memory makes the copies clang emits memory.copy (there is no
// memcpy to call); wasm-ld exports the memory, and berm.h's BERM_TOOL each
// tool. The flags of compile_flags.txt come after, so they can override
// these (-std, -O).
var cFlags = []string{"--target=wasm32", "-std=c11", "-O2", "-mbulk-memory", "-nostdlib", "-Wl,--no-entry"}

// cCompilers are the names clang goes by, tried in order; $BERM_CLANG, when
// set, is the only one.
var cCompilers = []string{"clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14"}

const cHint = "install clang and lld (Debian, Ubuntu: apt-get install clang lld), or set BERM_CLANG to a clang that targets wasm32"

// buildCModule builds the C program in dir into the raw module (without a
// manifest) at out: every *.c in dir and dir/src but *_test.c, in name
// order, with clang for freestanding wasm32 and the flags of
// dir/compile_flags.txt (one a line, as clangd reads them: berm new writes
// the -I of berm.h there).
func buildCModule(ctx context.Context, dir, out string) error {
	clang, err := findClang()
	if err != nil {
		return err
	}
	sources, err := cSources(dir)
	if err != nil {
		return err
	}
	flags, err := readCompileFlags(filepath.Join(dir, "compile_flags.txt"))
	if err != nil {
		return err
	}
	args := append(append(append([]string{}, cFlags...), flags...), "-o", out)
	args = append(args, sources...)
	cmd := exec.CommandContext(ctx, clang, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "wasm-ld") && (strings.Contains(msg, "not found") || strings.Contains(msg, "doesn't exist") ||
			strings.Contains(msg, "unable to execute")) {
			return withHint(fmt.Errorf("build: %s cannot link wasm32: no wasm-ld\n%s", clang, msg),
				"install lld (Debian, Ubuntu: apt-get install lld)")
		}
		if ctx.Err() != nil {
			return fmt.Errorf("build: %s: %w", clang, ctx.Err())
		}
		return fmt.Errorf("build: %s %s: %v\n%s", clang, strings.Join(args, " "), err, msg)
	}
	return nil
}

// findClang returns the first clang of cCompilers on the PATH that can
// target wasm32 (Apple's, say, cannot), and checks wasm-ld is there.
func findClang() (string, error) {
	names := cCompilers
	if c := os.Getenv("BERM_CLANG"); c != "" {
		names = []string{c}
	}
	var found []string
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		found = append(found, path)
		out, err := exec.Command(path, "--print-targets").Output()
		if err != nil || !bytes.Contains(out, []byte("wasm32")) {
			continue
		}
		ld, _ := exec.Command(path, "--target=wasm32", "-print-prog-name=wasm-ld").Output()
		if l := strings.TrimSpace(string(ld)); !filepath.IsAbs(l) {
			if _, err := exec.LookPath("wasm-ld"); err != nil {
				return "", withHint(fmt.Errorf("build: lang c: %s has no wasm-ld to link with", path),
					"install lld (Debian, Ubuntu: apt-get install lld)")
			}
		}
		return path, nil
	}
	if len(found) > 0 {
		return "", withHint(fmt.Errorf("build: lang c: %s cannot target wasm32", strings.Join(found, ", ")), "%s", cHint)
	}
	return "", withHint(fmt.Errorf("build: lang c: no clang on the PATH (%s)", strings.Join(names, ", ")), "%s", cHint)
}

// cSources lists the *.c of dir and dir/src but *_test.c, relative to dir.
func cSources(dir string) ([]string, error) {
	var sources []string
	for _, sub := range []string{".", "src"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, os.ErrNotExist) && sub != "." {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		for _, e := range entries {
			n := e.Name()
			if !e.Type().IsRegular() || !strings.HasSuffix(n, ".c") || strings.HasSuffix(n, "_test.c") {
				continue
			}
			sources = append(sources, filepath.Join(sub, n))
		}
	}
	if len(sources) == 0 {
		return nil, withHint(fmt.Errorf("build: lang c: no .c file in %s", dir),
			"write the tools in DIR/*.c (berm new --lang c makes one); *_test.c files are left out")
	}
	sort.Strings(sources)
	return sources, nil
}

// readCompileFlags reads compile_flags.txt, one flag a line; none when there
// is no file.
func readCompileFlags(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	var flags []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.TrimSpace(sc.Text()); f != "" && !strings.HasPrefix(f, "#") {
			flags = append(flags, f)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("build: %s: %w", path, err)
	}
	return flags, nil
}
