package commands

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// TestHintDiskFull: a deploy that fails because the disk is full gets the
// disk's hint, never one that sends the user to fix an image that is fine,
// however the error chain also reads.
func TestHintDiskFull(t *testing.T) {
	t.Parallel()
	full := &fs.PathError{Op: "write", Path: "/root/.berm/cache/x", Err: syscall.ENOSPC}
	for name, err := range map[string]error{
		"store write":        fmt.Errorf("deploy p: %w", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.ENOSPC}),
		"host error":         fmt.Errorf("deploy p: compile: %w: %w", runtime.ErrHost, full),
		"taken for an image": fmt.Errorf("deploy p: compile: %w: %w", full, manifest.ErrInvalid),
		"and its manifest":   fmt.Errorf("deploy p: %w: %w", full, manifest.ErrNoManifest),
		"under another hint": withHint(fmt.Errorf("deploy p: %w", full), "a berm program carries its manifest"),
		"quota":              fmt.Errorf("deploy p: %w: %w", syscall.EDQUOT, manifest.ErrInvalid),
	} {
		t.Run(name, func(t *testing.T) {
			var w bytes.Buffer
			printError(&w, err)
			out := w.String()
			if !strings.Contains(out, "berm: hint: the disk") {
				t.Errorf("no disk hint:\n%s", out)
			}
			if strings.Count(out, "berm: hint:") != 1 || strings.Contains(out, "hint: a berm program") {
				t.Errorf("an image's hint for the disk's fault:\n%s", out)
			}
		})
	}
}

func TestHints(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		hint string
	}{
		"no manifest":    {fmt.Errorf("deploy p: %w", manifest.ErrNoManifest), "a berm program carries"},
		"usage":          {usagef("run takes NAME"), "see `berm --help`"},
		"own hint":       {withHint(errors.New("x"), "do y"), "do y"},
		"lost output":    {outputError{syscall.ENOSPC}, ""},
		"no root":        {noRoot(), "give --root"},
		"plain":          {errors.New("x"), ""},
		"lost, wrapped":  {fmt.Errorf("ls: %w", outputError{syscall.EPIPE}), ""},
		"args too big":   {fmt.Errorf("p.t: %w: %w: 9 bytes", runtime.ErrArguments, runtime.ErrLimit), "raise the limit with --max-args"},
		"result too big": {fmt.Errorf("p.t: %w: result of 9 bytes", runtime.ErrLimit), "raise the limit with --max-result"},
		"out of memory":  {fmt.Errorf("p.t: %w: %w", runtime.ErrTrap, runtime.ErrOutOfMemory), "more memory with --memory"},
		"other trap":     {fmt.Errorf("p.t: %w: wasm error: unreachable", runtime.ErrTrap), ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := hintFor(tc.err)
			if (tc.hint == "") != (got == "") || !strings.Contains(got, tc.hint) {
				t.Errorf("hint %q, want one with %q", got, tc.hint)
			}
			// A limit's hint names its own flag alone.
			if strings.Contains(got, "--max-args") && strings.Contains(got, "--max-result") {
				t.Errorf("hint %q names both limits", got)
			}
		})
	}
}

func TestPrintErrorEscapes(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	printError(&w, fmt.Errorf("registry said %s: %w", "\x1b]0;pwned\x07", errors.New("no")))
	if strings.ContainsAny(w.String(), "\x1b\x07") {
		t.Errorf("printed raw: %q", w.String())
	}
}
