package release

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var platforms = []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64", "windows_arm64"}

// dist is the release make release-test built, and its version.
func dist(t *testing.T) (dir, version, commit string) {
	t.Helper()
	dir = os.Getenv("BERM_RELEASE_DIST")
	if dir == "" {
		t.Skip("BERM_RELEASE_DIST unset: make release-test builds a release and sets it")
	}
	var meta struct{ Version, Commit string }
	b, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	return dir, meta.Version, meta.Commit
}

func archiveName(version, platform string) string {
	if strings.HasPrefix(platform, "windows") {
		return fmt.Sprintf("berm_%s_%s.zip", version, platform)
	}
	return fmt.Sprintf("berm_%s_%s.tar.gz", version, platform)
}

type entry struct {
	body    []byte
	mode    os.FileMode
	modTime time.Time
}

// readArchive returns an archive's files by name, below its one directory.
func readArchive(t *testing.T, path string) map[string]entry {
	t.Helper()
	files := map[string]entry{}
	add := func(name string, mode os.FileMode, mt time.Time, r io.Reader) {
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		dir, base, _ := strings.Cut(name, "/")
		if dir+".tar.gz" != filepath.Base(path) && dir+".zip" != filepath.Base(path) {
			t.Errorf("%s: %s is not below %s/", path, name, dir)
		}
		files[base] = entry{body, mode, mt}
	}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			add(f.Name, f.Mode(), f.Modified, rc)
			rc.Close()
		}
		return files
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		add(h.Name, h.FileInfo().Mode(), h.ModTime, tr)
	}
}

// TestArchives: one archive per platform, each with the binary, LICENSE and
// README.md, every file dated by the commit.
func TestArchives(t *testing.T) {
	dir, version, _ := dist(t)
	for _, p := range platforms {
		path := filepath.Join(dir, archiveName(version, p))
		files := readArchive(t, path)
		bin := "berm"
		if strings.HasPrefix(p, "windows") {
			bin = "berm.exe"
		}
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range files {
				if !yield(n) {
					return
				}
			}
		})
		if want := []string{"LICENSE", "README.md", bin}; !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", filepath.Base(path), names, want)
		}
		for n, e := range files {
			if !e.modTime.Equal(files[bin].modTime) {
				t.Errorf("%s: %s dated %v, the binary %v", filepath.Base(path), n, e.modTime, files[bin].modTime)
			}
		}
	}
}

// checksums parses checksums.txt: file name to hex sha256.
func checksums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt: malformed line %q", sc.Text())
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestChecksums: checksums.txt lists every archive and SBOM, and each sum is
// the file's (as sha256sum -c checks it).
func TestChecksums(t *testing.T) {
	dir, version, _ := dist(t)
	sums := checksums(t, dir)
	for _, p := range platforms {
		for _, name := range []string{archiveName(version, p), fmt.Sprintf("berm_%s_%s.cdx.json", version, p)} {
			if _, ok := sums[name]; !ok {
				t.Errorf("checksums.txt lacks %s", name)
			}
		}
	}
	for name, want := range sums {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Errorf("%s: sha256 %x, checksums.txt says %s", name, got, want)
		}
	}
}

// extract writes the linux/amd64 binary from its archive to a temporary
// file and returns its path.
func extract(t *testing.T, dir, version string) string {
	t.Helper()
	files := readArchive(t, filepath.Join(dir, archiveName(version, "linux_amd64")))
	bin := filepath.Join(t.TempDir(), "berm")
	if err := os.WriteFile(bin, files["berm"].body, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestVersion: the linux/amd64 binary of the archive answers berm version
// with the release's version, its commit, and the commit's date, which is
// also the date of the archive's files.
func TestVersion(t *testing.T) {
	dir, version, commit := dist(t)
	bin := extract(t, dir, version)
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit, Date string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != "v"+version || v.Commit != commit {
		t.Errorf("berm version: %s at %s, want v%s at %s", v.Version, v.Commit, version, commit)
	}
	date, err := time.Parse(time.RFC3339, v.Date)
	if err != nil {
		t.Fatalf("berm version's date %q: %v", v.Date, err)
	}
	if mt := readArchive(t, filepath.Join(dir, archiveName(version, "linux_amd64")))["berm"].modTime; !mt.Equal(date) {
		t.Errorf("the binary is dated %v in its archive, berm version says %v", mt, date)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "berm v" + version + "\n"; !strings.HasPrefix(string(text), want) {
		t.Errorf("berm version printed %q, want it to start %q", text, want)
	}
}

// TestSBOM: each platform's CycloneDX SBOM lists wazero and the MCP SDK
// with the versions linked into the binary.
func TestSBOM(t *testing.T) {
	dir, version, _ := dist(t)
	info, err := buildinfo.ReadFile(extract(t, dir, version))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]string{}
	for _, d := range info.Deps {
		linked[d.Path] = d.Version
	}
	for _, p := range platforms {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("berm_%s_%s.cdx.json", version, p)))
		if err != nil {
			t.Fatal(err)
		}
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []struct{ Name, Version string }
		}
		if err := json.Unmarshal(b, &bom); err != nil {
			t.Fatal(err)
		}
		if bom.BOMFormat != "CycloneDX" {
			t.Errorf("%s: bomFormat %q", p, bom.BOMFormat)
		}
		listed := map[string]string{}
		for _, c := range bom.Components {
			listed[c.Name] = c.Version
		}
		for _, mod := range []string{"github.com/tetratelabs/wazero", "github.com/modelcontextprotocol/go-sdk"} {
			if want := linked[mod]; want == "" || listed[mod] != want {
				t.Errorf("%s: SBOM lists %s at %q, the binary links %q", p, mod, listed[mod], want)
			}
		}
	}
}

// TestReproducible: a second build of the same commit (BERM_RELEASE_DIST2)
// gave the same bytes: every file checksums.txt lists, and checksums.txt.
func TestReproducible(t *testing.T) {
	dir, _, _ := dist(t)
	other := os.Getenv("BERM_RELEASE_DIST2")
	if other == "" {
		t.Skip("BERM_RELEASE_DIST2 unset: make release-test builds the release twice")
	}
	names := []string{"checksums.txt"}
	for name := range checksums(t, dir) {
		names = append(names, name)
	}
	for _, name := range names {
		a, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(other, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two builds", name)
		}
	}
	for _, sub := range []string{"image/index.json"} {
		a, _ := os.ReadFile(filepath.Join(dir, sub))
		b, _ := os.ReadFile(filepath.Join(other, sub))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two builds (or is missing)", sub)
		}
	}
}

// TestInstall follows the README's Install section as a new user would
// (testdata/install.sh): verify the download against checksums.txt, unpack
// it, put it on PATH, run berm version.
func TestInstall(t *testing.T) {
	dir, version, commit := dist(t)
	out, err := exec.Command("bash", "testdata/install.sh", dir, version).CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	for _, want := range []string{": OK\n", "berm v" + version + "\n", "rev  " + commit + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("install.sh printed no %q:\n%s", want, out)
		}
	}
}
