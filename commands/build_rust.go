package commands

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

const rustTarget = "wasm32-unknown-unknown"

const rustHint = "install a Rust for " + rustTarget + ": on Debian or Ubuntu, apt-get install rustc libstd-rust-dev-wasm32 cargo; " +
	"with rustup, rustup target add " + rustTarget + " (or set BERM_RUSTC to a rustc that has it)"

// buildRustModule builds the Rust crate in dir (its Cargo.toml, a cdylib)
// into the raw module (without a manifest) at out:
//
//	cargo build --release --target wasm32-unknown-unknown
//
// with a rustc that has the target (the first of $BERM_RUSTC, or rustc on
// the PATH, /usr/bin/rustc and ~/.cargo/bin/rustc) and the cargo beside it.
// The crate's release profile decides optimization (berm new writes
// opt-level "s", LTO, panic=abort, strip="debuginfo"); berm adds only
// --remap-path-prefix, so that the image does not carry the paths of this
// machine in its panic messages (unless RUSTFLAGS is set, which replaces
// it). When the first rustc found has no wasm32 target, stderr gets one
// line saying so and which toolchain builds instead.
func buildRustModule(ctx context.Context, stderr io.Writer, dir, out string) error {
	return buildRust(ctx, stderr, rustcCandidates(), dir, out)
}

// buildRust is buildRustModule with the first of rustcs (names or paths)
// that has the target.
func buildRust(ctx context.Context, w io.Writer, rustcs []string, dir, out string) error {
	if !isFile(filepath.Join(dir, "Cargo.toml")) {
		return withHint(fmt.Errorf("build: lang rust: no Cargo.toml in %s", dir),
			"berm new NAME --lang rust makes a crate berm build can build")
	}
	rustc, without, err := findRustc(rustcs)
	if err != nil {
		return err
	}
	cargo, err := findCargo(rustc)
	if err != nil {
		return err
	}
	if len(without) > 0 {
		// Otherwise a build that fails names a toolchain the user never
		// chose (Debian's, older than rustup's on the PATH).
		fmt.Fprintf(w, "berm: warning: build: %s has no %s standard library: building with %s and %s\n",
			strings.Join(withVersions(without), ", "), rustTarget, withVersion(rustc), cargo)
	}
	var remap []string
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		remap = append(remap, "--remap-path-prefix="+home+"=~")
	}
	// The last prefix that matches wins: path dependencies (the SDK's copy
	// under berm's root) become their names, the project's own paths
	// relative ones.
	for _, d := range pathDependencies(dir) {
		remap = append(remap, "--remap-path-prefix="+d.dir+"="+d.name)
	}
	remap = append(remap, "--remap-path-prefix="+dir+"=.")
	rustflags, err := json.Marshal(remap)
	if err != nil {
		return err
	}
	args := []string{"build", "--release", "--target", rustTarget, "--message-format=json-render-diagnostics",
		"--config", "build.rustflags=" + string(rustflags)}
	cmd := exec.CommandContext(ctx, cargo, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUSTC="+rustc)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("build: %s: %w", cargo, ctx.Err())
		}
		err := fmt.Errorf("build: %s %s (RUSTC=%s): %v\n%s", cargo, strings.Join(args, " "), rustc, err,
			strings.TrimSpace(stderr.String()))
		if strings.Contains(stderr.String(), "lock file version") {
			return withHint(err, "%s", lockFileHint(cargo, without))
		}
		return err
	}
	wasm, err := cargoArtifact(stdout.Bytes(), filepath.Join(dir, "Cargo.toml"))
	if err != nil {
		return err
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}

type pathDependency struct{ name, dir string }

// pathDependencies lists the dependencies of dir/Cargo.toml given by path,
// as absolute directories; an unreadable Cargo.toml has none (cargo will
// say what is wrong with it).
func pathDependencies(dir string) []pathDependency {
	b, err := os.ReadFile(filepath.Join(dir, "Cargo.toml"))
	if err != nil {
		return nil
	}
	var manifest struct {
		Dependencies map[string]any `toml:"dependencies"`
	}
	if toml.Unmarshal(b, &manifest) != nil {
		return nil
	}
	var deps []pathDependency
	for name, v := range manifest.Dependencies {
		t, ok := v.(map[string]any)
		if !ok {
			continue
		}
		p, ok := t["path"].(string)
		if !ok || p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		deps = append(deps, pathDependency{name: name, dir: filepath.Clean(p)})
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].name < deps[j].name })
	return deps
}

// cargoArtifact finds the .wasm of the cdylib of the package whose manifest
// is manifestPath in cargo's JSON messages.
func cargoArtifact(messages []byte, manifestPath string) (string, error) {
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(messages))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			Reason       string `json:"reason"`
			ManifestPath string `json:"manifest_path"`
			Target       struct {
				Kind []string `json:"kind"`
			} `json:"target"`
			Filenames []string `json:"filenames"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Reason != "compiler-artifact" {
			continue
		}
		cdylib := false
		for _, k := range m.Target.Kind {
			cdylib = cdylib || k == "cdylib"
		}
		if !cdylib || !sameFile(m.ManifestPath, manifestPath) {
			continue
		}
		for _, f := range m.Filenames {
			if strings.HasSuffix(f, ".wasm") {
				found = append(found, f)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("build: cargo's messages: %w", err)
	}
	if len(found) != 1 {
		return "", withHint(fmt.Errorf("build: lang rust: cargo built %d .wasm for %s, want 1", len(found), manifestPath),
			"make the crate a cdylib: [lib] crate-type = [\"cdylib\"] in Cargo.toml")
	}
	return found[0], nil
}

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// lockFileHint is the way out of a Cargo.lock that cargo cannot read: one
// written by a newer cargo, often that of the rustc on the PATH, which berm
// passed over (without) for want of the target.
func lockFileHint(cargo string, without []string) string {
	hint := fmt.Sprintf("Cargo.lock was written by a newer cargo than %s: delete Cargo.lock, and this one writes its own", withVersion(cargo))
	if len(without) > 0 {
		hint += fmt.Sprintf("; or give the newer Rust (%s) the target, and berm builds with it: rustup target add %s", without[0], rustTarget)
	}
	return hint
}

// rustcCandidates are the rustcs berm build tries, in order: $BERM_RUSTC
// alone, or rustc on the PATH, /usr/bin/rustc and ~/.cargo/bin/rustc.
func rustcCandidates() []string {
	if r := os.Getenv("BERM_RUSTC"); r != "" {
		return []string{r}
	}
	names := []string{"rustc", "/usr/bin/rustc"}
	if home, err := os.UserHomeDir(); err == nil {
		names = append(names, filepath.Join(home, ".cargo", "bin", "rustc"))
	}
	return names
}

// findRustc returns the first of names that has the wasm32-unknown-unknown
// standard library, and those found before it without.
func findRustc(names []string) (rustc string, without []string, err error) {
	seen := map[string]bool{}
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err != nil || seen[path] {
			continue
		}
		seen[path] = true
		if hasRustTarget(path) {
			return path, without, nil
		}
		without = append(without, path)
	}
	if len(without) > 0 {
		return "", nil, withHint(fmt.Errorf("build: lang rust: no %s standard library for %s", rustTarget, strings.Join(without, ", ")), "%s", rustHint)
	}
	return "", nil, withHint(fmt.Errorf("build: lang rust: no rustc (%s)", strings.Join(names, ", ")), "%s", rustHint)
}

// withVersion is a tool's path and the version its --version says, when
// it says: "/usr/bin/rustc (rustc 1.63.0)".
func withVersion(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) >= 2 {
		return fmt.Sprintf("%s (%s %s)", path, f[0], f[1])
	}
	return path
}

func withVersions(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = withVersion(p)
	}
	return out
}

// hasRustTarget tells whether rustc has the standard library of the wasm32
// target.
func hasRustTarget(rustc string) bool {
	out, err := exec.Command(rustc, "--print", "target-libdir", "--target", rustTarget).Output()
	if err != nil {
		return false
	}
	entries, err := os.ReadDir(strings.TrimSpace(string(out)))
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "libstd-") && strings.HasSuffix(e.Name(), ".rlib") {
			return true
		}
	}
	return false
}

// findCargo returns the cargo beside rustc (the same toolchain: Debian's
// /usr/bin, or rustup's proxies), or else the one on the PATH.
func findCargo(rustc string) (string, error) {
	beside := filepath.Join(filepath.Dir(rustc), "cargo")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside, nil
	}
	path, err := exec.LookPath("cargo")
	if errors.Is(err, exec.ErrNotFound) || path == "" {
		return "", withHint(fmt.Errorf("build: lang rust: no cargo (beside %s, or on the PATH)", rustc),
			"install cargo (Debian, Ubuntu: apt-get install cargo)")
	}
	if err != nil {
		return "", fmt.Errorf("build: lang rust: cargo: %w", err)
	}
	return path, nil
}
