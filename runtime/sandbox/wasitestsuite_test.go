package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envWASITestsuite names the WASI test suite's directory. Set, it makes the
// suite required: TestWASITestsuite fails when it is not there, as in CI
// (.ci/run sets it), rather than skip. Unset, the suite is looked for at
// defaultWASITestsuite, and a developer without it skips.
const envWASITestsuite = "BERM_WASI_TESTSUITE"

// defaultWASITestsuite is where the suite's preview 1 programs are when
// envWASITestsuite is not set: in shared/ beside the repository (see its
// README).
const defaultWASITestsuite = "../../../shared/wasi-testsuite"

// wasiTestsuite returns the suite's directory, skipping the test when the
// suite is missing and not required.
func wasiTestsuite(t *testing.T) string {
	t.Helper()
	dir, required := os.LookupEnv(envWASITestsuite)
	if !required || dir == "" {
		dir, required = defaultWASITestsuite, false
	}
	_, err := os.Stat(filepath.Join(dir, "tests"))
	switch {
	case err == nil:
		return dir
	case required:
		t.Fatalf("the WASI test suite is not at %s, where %s says it is: %v", dir, envWASITestsuite, err)
	default:
		t.Skipf("the WASI test suite is not at %s (shared/wasi-testsuite beside the repository; set %s to run it from elsewhere): %v",
			dir, envWASITestsuite, err)
	}
	return ""
}

// wasiSkips is the file naming each test of the suite that is skipped, and
// why.
const wasiSkips = "testdata/wasi-testsuite-skips.txt"

// wasiSpec is a test's JSON: the legacy form (args, root, env, exit_code,
// stdout) or the operations of the newer one.
type wasiSpec struct {
	Args       []string          `json:"args"`
	Root       *string           `json:"root"`
	Env        map[string]string `json:"env"`
	ExitCode   *uint32           `json:"exit_code"`
	Stdout     *string           `json:"stdout"`
	Proposals  []string          `json:"proposals"`
	Operations []struct {
		Type     string            `json:"type"`
		Args     []string          `json:"args"`
		Root     *string           `json:"root"`
		Env      map[string]string `json:"env"`
		ExitCode *uint32           `json:"exit_code"`
		ID       string            `json:"id"`
		Payload  *string           `json:"payload"`
	} `json:"operations"`
}

// run is what one test runs and expects, from either form.
type wasiRun struct {
	args   []string
	root   string
	env    map[string]string
	exit   uint32
	stdout *string
}

func (s *wasiSpec) run() (wasiRun, error) {
	var r wasiRun
	if len(s.Proposals) > 0 {
		return r, errors.New("proposals beyond preview 1: " + strings.Join(s.Proposals, ", "))
	}
	if s.Operations == nil {
		r.args, r.env = s.Args, s.Env
		if s.Root != nil {
			r.root = *s.Root
		}
		if s.ExitCode != nil {
			r.exit = *s.ExitCode
		}
		r.stdout = s.Stdout
		return r, nil
	}
	for _, op := range s.Operations {
		switch op.Type {
		case "run":
			r.args, r.env = op.Args, op.Env
			if op.Root != nil {
				r.root = *op.Root
			}
		case "wait":
			if op.ExitCode != nil {
				r.exit = *op.ExitCode
			}
		case "read":
			if op.ID == "" || op.ID == "stdout" {
				payload := ""
				if op.Payload != nil {
					payload = *op.Payload
				}
				r.stdout = &payload
			}
		default:
			return r, errors.New("operation " + op.Type + " needs a network")
		}
	}
	return r, nil
}

// readSkips reads the skip file: "NAME: reason" a line, # for comments.
func readSkips(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(wasiSkips)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	skips := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, ok := strings.Cut(line, ": ")
		if !ok || strings.TrimSpace(why) == "" {
			t.Fatalf("%s: %q: want NAME: reason", wasiSkips, line)
		}
		skips[name] = why
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return skips
}

// TestWASITestsuite runs every preview 1 program of the WASI test suite
// under plain wazero, its directory mounted read-write at / through Mount
// (from a copy: some tests write), with the arguments and environment its
// JSON gives, and compares the exit code and, when given, stdout. A test
// named in testdata/wasi-testsuite-skips.txt is skipped, saying why; it
// still runs, and fails if it passes, so that the list stays true.
func TestWASITestsuite(t *testing.T) {
	suite := wasiTestsuite(t)
	tests, err := filepath.Glob(filepath.Join(suite, "tests", "*", "testsuite", "wasm32-wasip1", "*.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatalf("no tests under %s", suite)
	}
	skips := readSkips(t)
	var names []string
	for _, wasm := range tests {
		lang := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(wasm))))
		name := lang + "/" + strings.TrimSuffix(filepath.Base(wasm), ".wasm")
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			skip, skipped := skips[name]
			err := runWASITest(t, wasm)
			switch {
			case skipped && err == nil:
				t.Fatalf("passes, but %s skips it (%s): remove the line", wasiSkips, skip)
			case skipped:
				t.Skipf("%s (it fails: %v)", skip, err)
			case err != nil:
				t.Fatal(err)
			}
		})
	}
	for name := range skips {
		if !slices.Contains(names, name) {
			t.Errorf("%s names %s, which the suite does not have", wasiSkips, name)
		}
	}
}

// runWASITest runs one test, reporting how it differed from its spec.
func runWASITest(t *testing.T, wasm string) error {
	dir := filepath.Dir(wasm)
	var spec wasiSpec
	if b, err := os.ReadFile(strings.TrimSuffix(wasm, ".wasm") + ".json"); err == nil {
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatalf("%s: %v", wasm, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	want, err := spec.run()
	if err != nil {
		t.Skip(err)
	}
	var mounts []mountPoint
	if want.root != "" {
		root := filepath.Join(t.TempDir(), "root")
		if err := os.CopyFS(root, os.DirFS(filepath.Join(dir, want.root))); err != nil {
			t.Fatal(err)
		}
		removeCleanups(t, root)
		f := mount(t, root, true)
		mounts = append(mounts, mountPoint{f, "/"})
	}
	bin, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	c, err := env().rt.CompileModule(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	got := runWASI(t, c, mounts, want.args, want.env)
	var diffs []string
	if got.trap != nil {
		msg := got.trap.Error()
		if i := strings.Index(msg, "\n"); i > 0 {
			msg = msg[:i] // the first line, not the stack
		}
		diffs = append(diffs, "trapped: "+msg)
	} else if got.exit != want.exit {
		diffs = append(diffs, "exit code "+itoa(got.exit)+", want "+itoa(want.exit))
	}
	if want.stdout != nil && got.stdout != *want.stdout {
		diffs = append(diffs, "stdout "+quote(got.stdout)+", want "+quote(*want.stdout))
	}
	if diffs != nil {
		return errors.New(strings.Join(diffs, "; ") + "; stderr " + quote(got.stderr))
	}
	return nil
}

// removeCleanups removes the artifacts of earlier runs (*.cleanup), as the
// suite's specification asks.
func removeCleanups(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".cleanup") {
			err = os.RemoveAll(p)
			if d.IsDir() && err == nil {
				return filepath.SkipDir
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(n uint32) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func quote(s string) string {
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
