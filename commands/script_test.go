package commands_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/berm-dev/berm/commands"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"berm": func() {
			os.Exit(commands.Main(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScripts runs the command line as a user would, from the scripts in
// testdata/script. Each starts with an empty root ($BERM_ROOT) and the
// fixture images of ../testdata in its work directory.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("BERM_ROOT", filepath.Join(env.WorkDir, "root"))
			for _, pattern := range []string{"../testdata/*.wasm", "../testdata/broken/*.wasm"} {
				files, err := filepath.Glob(pattern)
				if err != nil {
					return err
				}
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						return err
					}
					dst := filepath.Join(env.WorkDir, filepath.Base(f))
					if filepath.Base(filepath.Dir(f)) == "broken" {
						dst = filepath.Join(env.WorkDir, "broken", filepath.Base(f))
					}
					if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
						return err
					}
					if err := os.WriteFile(dst, b, 0o644); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exitcode N command [args...]: command exits with exactly N.
			// `! exec` takes any failure, and the exit codes are a contract
			// (README, Exit codes) that scripts call berm under.
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exitcode N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				got := 0
				var exit *exec.ExitError
				if err := ts.Exec(args[1], args[2:]...); errors.As(err, &exit) {
					got = exit.ExitCode()
				} else if err != nil {
					ts.Fatalf("%s: %v", args[1], err)
				}
				if got != want {
					ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
				}
			},
			// images N: the root holds exactly N image files.
			"images": func(ts *testscript.TestScript, neg bool, args []string) {
				files, err := filepath.Glob(filepath.Join(ts.Getenv("BERM_ROOT"), "images", "sha256", "*"))
				ts.Check(err)
				if got := strconv.Itoa(len(files)); (got == args[0]) == neg {
					ts.Fatalf("the root holds %s images, want %s: %v", got, args[0], files)
				}
			},
		},
	})
}
