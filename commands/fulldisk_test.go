//go:build linux

package commands_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// fullDisk is a root whose disk is full for the commands full gives.
type fullDisk struct {
	root string
	// enospc: writes fail with ENOSPC, a disk really full, which a program
	// is told of as such; EFBIG (a file size limit) it may be told of only
	// as the host's error.
	enospc bool
	// fill makes the disk full, after the programs are deployed.
	fill func(t *testing.T)
	// full runs berm on the full disk.
	full func(t *testing.T, args ...string) *exec.Cmd
}

// tmpfsDisk is a root on a 2 MiB tmpfs, filled by a file beside it: every
// write fails with ENOSPC, for every process. Mounting needs root (or
// CAP_SYS_ADMIN); where it is refused, the test is skipped.
func tmpfsDisk(t *testing.T) fullDisk {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("mount a tmpfs: %v (needs root)", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	root := filepath.Join(mnt, "root")
	return fullDisk{
		root:   root,
		enospc: true,
		fill: func(t *testing.T) {
			f, err := os.Create(filepath.Join(mnt, "filler"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, chunk := range []int{64 << 10, 4 << 10, 1} {
				buf := make([]byte, chunk)
				for {
					if _, err := f.Write(buf); err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatal(err)
						}
						break
					}
				}
			}
			var st syscall.Statfs_t
			if err := syscall.Statfs(mnt, &st); err != nil {
				t.Fatal(err)
			}
			if st.Bavail != 0 {
				t.Fatalf("the tmpfs still has %d blocks free", st.Bavail)
			}
		},
		full: func(t *testing.T, args ...string) *exec.Cmd {
			return bermCmd(t, root, append([]string{"--root", root}, args...)...)
		},
	}
}

// fsizeDisk runs the failing commands under RLIMIT_FSIZE of 64 bytes (with
// prlimit), which any record, image or compiled module passes: a write past
// it fails with EFBIG. The kernel sends SIGXFSZ first, whose default action
// kills the process; berm, a Go program, catches every signal the runtime
// does not need and ignores SIGXFSZ, so the write's error is what it sees.
// The disk is full for those commands only: the checks after them run on a
// disk with room.
func fsizeDisk(t *testing.T) fullDisk {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux) to run berm under RLIMIT_FSIZE")
	}
	root := t.TempDir()
	return fullDisk{
		root: root,
		fill: func(*testing.T) {},
		full: func(t *testing.T, args ...string) *exec.Cmd {
			cmd := bermCmd(t, root, append([]string{"--root", root}, args...)...)
			cmd.Args = append([]string{prlimit, "--fsize=64", "--", cmd.Path}, cmd.Args[1:]...)
			cmd.Path = prlimit
			return cmd
		},
	}
}

// TestFullDisk: on a full disk, a deploy fails saying so (not "invalid
// image"), with exit 2, and changes nothing: the deployment before it is
// listed and runs, its record and image are the same bytes, and no temporary
// file is left. A program's berm.set is refused to the program, which goes on.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		disk func(*testing.T) fullDisk
	}{
		{"tmpfs", tmpfsDisk},
		{"rlimit-fsize", fsizeDisk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.disk(t)
			root := d.root
			bermFull(t, d, false, "deploy", "prev", fixturePath("echo.wasm"))
			bermFull(t, d, false, "deploy", "kv", fixturePath("kv.wasm"))
			if got := bermFull(t, d, false, "run", "kv", "set", `{"v":1}`); got != "set" {
				t.Fatalf("kv set before the disk is full: %q", got)
			}
			d.fill(t)
			before := snapshotRoot(t, root)

			// A new image under the old name (its compile and its image must
			// be written); the image of another deployment under a new name
			// (only the record must be).
			for _, deploy := range [][]string{
				{"deploy", "prev", fixturePath("core.wasm")},
				{"deploy", "other", fixturePath("echo.wasm")},
				{"deploy", "--json", "third", fixturePath("nest.wasm")},
			} {
				cmd := d.full(t, deploy...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 2 {
					t.Errorf("berm %s on a full disk: %v, want exit 2\nstdout:\n%s\nstderr:\n%s", strings.Join(deploy, " "), err, &stdout, &stderr)
					continue
				}
				msg := stderr.String()
				if !saysDiskFull(msg) {
					t.Errorf("berm %s on a full disk does not say the disk is full:\n%s", strings.Join(deploy, " "), msg)
				}
				if strings.Contains(msg, "invalid") {
					t.Errorf("berm %s on a full disk blames the image:\n%s", strings.Join(deploy, " "), msg)
				}
				if stdout.Len() > 0 {
					t.Errorf("berm %s on a full disk printed %q", strings.Join(deploy, " "), &stdout)
				}
			}

			// berm.set is the program's to handle: kv's set says "refused:"
			// and the host's message, and the call succeeds.
			cmd := d.full(t, "run", "kv", "set", `{"v":2,"pad":"`+strings.Repeat("x", 200)+`"}`)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("berm run kv set on a full disk: %v (a trap?), want exit 0 and refused:\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
			} else if got := stdout.String(); !strings.HasPrefix(got, "refused:") || (d.enospc && !saysDiskFull(got)) {
				t.Errorf("berm run kv set on a full disk = %q, want refused: and the disk's problem", got)
			}

			// Nothing changed, and nothing was left behind.
			after := snapshotRoot(t, root)
			diffSnapshots(t, before, after)
			if left := strayTemps(t, root); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			// The deployments before are listed and run, on the full disk.
			cmd = d.full(t, "ls", "--json")
			stdout.Reset()
			stderr.Reset()
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("berm ls --json on a full disk: %v\n%s", err, &stderr)
			}
			var list []struct {
				Name  string `json:"name"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
				t.Fatalf("berm ls --json: %v\n%s", err, &stdout)
			}
			var names []string
			for _, p := range list {
				names = append(names, p.Name)
				if p.Error != "" {
					t.Errorf("berm ls: %s: %s", p.Name, p.Error)
				}
			}
			if strings.Join(names, " ") != "kv prev" {
				t.Errorf("berm ls lists %v, want [kv prev]", names)
			}
			if got := bermFull(t, d, true, "run", "prev", "echo", `{"message":"hi"}`); got != `{"message":"hi"}` {
				t.Errorf("berm run prev echo = %q", got)
			}
			if got := bermFull(t, d, true, "run", "kv", "get"); got != `{"v":1}` {
				t.Errorf("berm run kv get = %q, want the value set before the disk was full", got)
			}
		})
	}
}

// bermFull runs berm on d's root, on the full disk when full, and returns
// its stdout, failing the test unless it exits 0.
func bermFull(t *testing.T, d fullDisk, full bool, args ...string) string {
	t.Helper()
	var cmd *exec.Cmd
	if full {
		cmd = d.full(t, args...)
	} else {
		cmd = bermCmd(t, d.root, append([]string{"--root", d.root}, args...)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berm %s: %v\n%s", strings.Join(args, " "), err, &stderr)
	}
	return strings.TrimSpace(string(out))
}

// saysDiskFull reports whether a message names the disk's problem.
func saysDiskFull(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"no space left", "file too large", "disk quota", "disk full", "disk is full"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// snapshotRoot maps every file and directory under root to the hash of its
// bytes ("dir" for a directory). A program's data/NAME/.lock is left out: it
// is the store's, not the program's, and holds a token of the last write
// attempt that tells other processes to count the data again.
func snapshotRoot(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			snap[rel] = "dir"
			return nil
		}
		if d.Name() == ".lock" && filepath.Base(filepath.Dir(filepath.Dir(path))) == "data" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		snap[rel] = string(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnapshots(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for p, h := range before {
		switch a, ok := after[p]; {
		case !ok:
			diffs = append(diffs, "removed "+p)
		case a != h:
			diffs = append(diffs, "changed "+p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the root changed on a full disk:\n%s", strings.Join(diffs, "\n"))
	}
}
