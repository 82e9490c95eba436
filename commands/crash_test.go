package commands_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashImage is a fixture a deploy may leave behind, with a call that shows
// the program runs.
type crashImage struct {
	file             string
	tool, args, want string
	image            []byte // of a fixture; nil for a variant
	digest           string
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// appendCustomSection appends a custom section, which berm and wazero skip.
func appendCustomSection(module []byte, name string, payload []byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(name)))
	body = append(append(body, name...), payload...)
	module = append(module, 0) // custom section id
	module = binary.AppendUvarint(module, uint64(len(body)))
	return append(module, body...)
}

// TestCrashConsistency kills `berm deploy` at random moments, a few hundred
// times, replacing three names with one image after another in one root. The
// README promises that a process killed mid-write leaves the old file: so
// afterwards every record must parse and name an image whose bytes hash to
// its digest, `berm ls` must list every name without an error, and every
// program must run. The temporary files the kills left are counted (and must
// never be taken for records or images); at the end, aged by two hours, berm
// serve must collect them when it starts.
func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills a few hundred deploys")
	}
	const (
		rounds = 200
		budget = 40 * time.Second // on two cores; the rounds left are skipped past it
	)
	images := []*crashImage{
		{file: fixturePath("echo.wasm"), tool: "echo", args: `{"message":"hi"}`, want: `{"message":"hi"}`},
		{file: fixturePath("core.wasm"), tool: "echo", args: `{"n":1}`, want: `{"n":1}`},
		{file: fixturePath("kv.wasm"), tool: "get", args: `{}`, want: "absent"},
		{file: fixturePath("nest.wasm"), tool: "echo", args: `{"x":[1]}`, want: `{"x":[1]}`},
	}
	byDigest := map[string]*crashImage{}
	for _, im := range images {
		b, err := os.ReadFile(im.file)
		if err != nil {
			t.Fatal(err)
		}
		im.image = b
		im.digest = digestOf(b)
		byDigest[im.digest] = im
	}
	// A variant is an image made new by a custom section of 256 KiB, so that
	// its deploy writes an image and a compiled module, not only a record.
	variants := t.TempDir()
	variant := func(base *crashImage, n int) *crashImage {
		pad := make([]byte, 256<<10)
		binary.LittleEndian.PutUint64(pad, uint64(n))
		b := appendCustomSection(slices.Clone(base.image), "crash-pad", pad)
		v := *base
		v.file, v.image, v.digest = filepath.Join(variants, strconv.Itoa(n)+".wasm"), nil, digestOf(b)
		if err := os.WriteFile(v.file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		byDigest[v.digest] = &v
		return &v
	}
	root := t.TempDir()
	names := []string{"crash-a", "crash-b", "crash-c"}
	deployed := map[string]*crashImage{} // what each name's record names now

	// Each image deployed once to fill the compile cache, then each name
	// deployed to the end with a variant; the slowest of these sets the window
	// the kills fall in, so that they land all along a deploy.
	bermBinary(t) // built before the clock starts
	for _, im := range images {
		crashBerm(t, root, "deploy", names[0], im.file)
	}
	var slowest time.Duration
	for i, name := range names {
		im := variant(images[i], -1-i)
		start := time.Now()
		crashBerm(t, root, "deploy", name, im.file)
		slowest = max(slowest, time.Since(start))
		deployed[name] = im
	}
	window := max(30*time.Millisecond, slowest*5/4)

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	var killed, finished, beforeWrite, midWrite, landed, strays int
	began := time.Now()
	done := 0
	for ; done < rounds && time.Since(began) < budget; done++ {
		name := names[done%len(names)]
		im := images[rng.IntN(len(images))]
		if rng.IntN(2) == 0 || im.digest == deployed[name].digest {
			im = variant(im, done)
		}
		cmd := exec.Command(bermBinary(t), "--root", root, "deploy", name, im.file)
		cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(window))))
		cmd.Process.Kill() // SIGKILL; an error means it had exited already
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			finished++
		case errors.As(err, &exit) && exit.ExitCode() == -1:
			killed++ // ended by the signal
		default:
			t.Fatalf("round %d: berm deploy %s %s failed on its own: %v\n%s", done, name, im.file, err, stderr.String())
		}

		// The record names the old image or the new one, never anything else.
		d, err := readCrashRecord(root, name)
		if err != nil {
			t.Fatalf("round %d (seed %d): after berm deploy %s %s: %v", done, seed, name, im.file, err)
		}
		wasKilled := exit != nil
		now := strayTemps(t, root)
		switch d.Digest {
		case im.digest:
			if wasKilled {
				landed++ // killed after the rename
			}
			deployed[name] = im
		case deployed[name].digest:
			if !wasKilled {
				t.Fatalf("round %d: berm deploy %s %s exited 0 but the record still names %s", done, name, im.file, deployed[name].file)
			}
			if len(now) > strays {
				midWrite++
			} else {
				beforeWrite++
			}
		default:
			t.Fatalf("round %d: the record of %s names %s, neither %s nor %s", done, name, d.Digest, deployed[name].file, im.file)
		}
		strays = len(now)
	}
	left := strayTemps(t, root)
	t.Logf("%d deploys in %v (window %v, seed %d): %d killed, %d finished first; of the killed, %d with the old record and nothing torn (before a write or between two), %d mid-write (a temporary file left), %d after the new record landed; %d temporary files left: %s",
		done, time.Since(began).Round(time.Millisecond), window, seed, killed, finished, beforeWrite, midWrite, landed, len(left), summarizeTemps(left))
	if killed == 0 {
		t.Errorf("no deploy was killed in flight: the window of %v is too short", window)
	}

	// Every record parses and names an image that is there and whole.
	records, err := os.ReadDir(filepath.Join(root, "deployments"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, e := range records {
		if isStrayTemp(e.Name()) {
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			t.Errorf("deployments/%s: neither a record nor a temporary file", e.Name())
			continue
		}
		recorded = append(recorded, name)
		d, err := readCrashRecord(root, name)
		if err != nil {
			t.Error(err)
			continue
		}
		if d.Digest != deployed[name].digest {
			t.Errorf("record %s names %s, want %s (%s)", name, d.Digest, deployed[name].digest, deployed[name].file)
		}
	}
	if strings.Join(recorded, " ") != strings.Join(names, " ") {
		t.Errorf("records %v, want %v: a record was lost", recorded, names)
	}
	// Every image stored under a digest hashes to it: a killed write never
	// leaves part of an image under its final name.
	stored, err := os.ReadDir(filepath.Join(root, "images", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range stored {
		if isStrayTemp(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "images", "sha256", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.Name() {
			t.Errorf("images/sha256/%s: its %d bytes hash to %x", e.Name(), len(b), sum)
		}
		if byDigest["sha256:"+e.Name()] == nil {
			t.Errorf("images/sha256/%s: not one of the images deployed", e.Name())
		}
	}

	// berm ls lists every name, and none with an error.
	cmd := exec.Command(bermBinary(t), "--root", root, "ls", "--json")
	cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berm ls --json: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("berm ls --json warned:\n%s", stderr.String())
	}
	var list []struct {
		Name   string   `json:"name"`
		Digest string   `json:"digest"`
		Tools  []string `json:"tools"`
		Error  string   `json:"error"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("berm ls --json: %v\n%s", err, out)
	}
	var listed []string
	for _, p := range list {
		listed = append(listed, p.Name)
		if p.Error != "" {
			t.Errorf("berm ls: %s: %s", p.Name, p.Error)
		}
		if want := deployed[p.Name]; want == nil || p.Digest != want.digest {
			t.Errorf("berm ls: %s has %s", p.Name, p.Digest)
		}
	}
	sort.Strings(listed)
	if strings.Join(listed, " ") != strings.Join(names, " ") {
		t.Errorf("berm ls lists %v, want %v", listed, names)
	}
	// And every program runs (from the compile cache the kills may have torn).
	for _, name := range names {
		im := deployed[name]
		if got := strings.TrimSpace(crashBerm(t, root, "run", name, im.tool, im.args)); got != im.want {
			t.Errorf("berm run %s %s %s = %q, want %q", name, im.tool, im.args, got, im.want)
		}
	}

	// The final cleanup: berm serve, starting, removes the store's temporary
	// files old enough not to be a write in progress (an hour).
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range left {
		if err := os.Chtimes(filepath.Join(root, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serve := exec.CommandContext(ctx, bermBinary(t), "--root", root, "serve", "--stdio")
	serve.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
	if out, err := serve.CombinedOutput(); err != nil { // stdin at EOF: it starts and ends
		t.Errorf("berm serve --stdio with no client: %v\n%s", err, out)
	}
	var cacheLeft []string
	for _, p := range strayTemps(t, root) {
		if strings.HasPrefix(filepath.Base(p), ".tmp-") {
			t.Errorf("berm serve left %s, a temporary file of two hours ago", p)
		} else {
			cacheLeft = append(cacheLeft, p)
		}
	}
	// wazero's own temporary files in cache/ are not the store's to collect
	// (yet): counted, not failed.
	t.Logf("after berm serve started: %d of wazero's temporary files left in cache/", len(cacheLeft))
}

// crashBerm runs berm --root root with args, failing the test unless it
// exits 0, and returns its stdout.
func crashBerm(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bermBinary(t), append([]string{"--root", root}, args...)...)
	cmd.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_TOKEN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

type crashRecord struct {
	Name     string    `json:"name"`
	Digest   string    `json:"digest"`
	Source   string    `json:"source"`
	Deployed time.Time `json:"deployed"`
}

// readCrashRecord reads deployments/NAME.json and checks it: its name, and an
// image that exists and hashes to its digest.
func readCrashRecord(root, name string) (crashRecord, error) {
	var d crashRecord
	b, err := os.ReadFile(filepath.Join(root, "deployments", name+".json"))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, errors.New("record " + name + ": " + err.Error() + ": " + string(b))
	}
	if d.Name != name {
		return d, errors.New("record " + name + " names " + d.Name)
	}
	hexPart, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return d, errors.New("record " + name + ": digest " + d.Digest)
	}
	image, err := os.ReadFile(filepath.Join(root, "images", "sha256", hexPart))
	if err != nil {
		return d, errors.New("record " + name + ": its image: " + err.Error())
	}
	if sum := sha256.Sum256(image); hex.EncodeToString(sum[:]) != hexPart {
		return d, errors.New("record " + name + ": its image does not hash to " + d.Digest)
	}
	return d, nil
}

// isStrayTemp reports whether a file name is a write in progress: the
// store's .tmp-* or wazero's cache entries, KEY.*.tmp.
func isStrayTemp(name string) bool {
	return strings.HasPrefix(name, ".tmp-") || strings.HasSuffix(name, ".tmp")
}

// strayTemps lists the temporary files under root, relative to it.
func strayTemps(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if isStrayTemp(d.Name()) || (d.IsDir() && strings.HasPrefix(d.Name(), "repair-")) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// summarizeTemps counts temporary files by directory.
func summarizeTemps(paths []string) string {
	by := map[string]int{}
	for _, p := range paths {
		by[filepath.Dir(p)]++
	}
	var parts []string
	for dir, n := range by {
		parts = append(parts, dir+": "+strconv.Itoa(n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
