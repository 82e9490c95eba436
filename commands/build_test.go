package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/sdk/describe"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/build")

func needGo(t testing.TB) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	return goTool
}

// offline makes the go command fail rather than download: what berm new
// and berm build need is on the machine.
func offline(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
}

// TestBuildSchema: the manifest derived from testdata/build/schema, whose
// argument type has nested objects, slices, optional fields, enums (of
// strings and integers), descriptions, a time, raw JSON, a map and an
// embedded struct, is manifest.json, byte for byte.
func TestBuildSchema(t *testing.T) {
	t.Parallel()
	goTool := needGo(t)
	dir, _ := filepath.Abs(filepath.Join("testdata", "build", "schema"))
	d, err := describeGo(context.Background(), goTool, dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	payload, err := goManifest(d)
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, payload, "", "  "); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	golden := filepath.Join(dir, "manifest.json")
	if *update {
		if err := os.WriteFile(golden, indented.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(indented.Bytes(), want) {
		t.Errorf("manifest differs from %s (go test -update to rewrite it):\n%s", golden, indented.Bytes())
	}
	// The manifest is one the host takes: every schema compiles.
	if _, err := manifest.Decode(payload); err != nil {
		t.Errorf("manifest.Decode: %v", err)
	}
	// And the same bytes again.
	again, err := goManifest(d)
	if err != nil || !bytes.Equal(again, payload) {
		t.Errorf("a second derivation differs: %v", err)
	}
}

// TestBuildRefusesType: an argument type with a channel, two levels down,
// is refused with the field's path.
func TestBuildRefusesType(t *testing.T) {
	t.Parallel()
	goTool := needGo(t)
	dir, _ := filepath.Abs(filepath.Join("testdata", "build", "badtype"))
	d, err := describeGo(context.Background(), goTool, dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = goManifest(d)
	if !errors.Is(err, errSchema) {
		t.Fatalf("goManifest = %v, want errSchema", err)
	}
	if want := `tool "watch": field Options.Notify (chan string) is a chan`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestInferSchemaRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		desc *describe.Type
		want string
	}{
		{"not an object", &describe.Type{Kind: "string", Type: "string"}, "want a struct or a map"},
		{"int keys", &describe.Type{Kind: "struct", Type: "main.A", Fields: []describe.Field{
			{Name: "M", Type: &describe.Type{Kind: "map", Type: "map[int]string", Key: &describe.Type{Kind: "int", Type: "int"}, Elem: &describe.Type{Kind: "string"}}},
		}}, "field M (map[int]string) has keys of type int"},
		{"cycle", &describe.Type{Kind: "struct", Type: "main.N", Fields: []describe.Field{
			{Name: "Next", Type: &describe.Type{Kind: "ptr", Type: "*main.N", Elem: &describe.Type{Kind: "cycle", Type: "main.N"}}},
		}}, "field Next (main.N) contains itself"},
		{"custom", &describe.Type{Kind: "struct", Type: "main.A", Fields: []describe.Field{
			{Name: "V", Type: &describe.Type{Kind: "struct", Type: "main.V", As: "custom"}},
		}}, "field V (main.V) has its own UnmarshalJSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inferSchema(tc.desc)
			if !errors.Is(err, errSchema) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("inferSchema = %v, want errSchema saying %q", err, tc.want)
			}
		})
	}
}

// TestBuildRefusesUndeclared: a program that calls berm.Set and berm.Now
// but declares only berm.get is refused, naming both.
func TestBuildRefusesUndeclared(t *testing.T) {
	t.Parallel()
	needGo(t)
	dir := filepath.Join("testdata", "build", "undeclared")
	_, _, err := buildGoModule(context.Background(), dir, nil)
	if err == nil || !strings.Contains(err.Error(), `calls berm.now, berm.set without declaring it`) {
		t.Fatalf("build = %v, want a refusal naming berm.now and berm.set", err)
	}
	if hint := hintFor(err); !strings.Contains(hint, `berm.Syscalls("berm.now", "berm.set")`) {
		t.Errorf("hint %q", hint)
	}
}

// TestBuildWarnsInitialize: berm build runs _initialize, as berm deploy
// does, and warns when it traps.
func TestBuildWarnsInitialize(t *testing.T) {
	t.Parallel()
	needGo(t)
	ctx := context.Background()
	module, payload, err := buildGoModule(ctx, filepath.Join("testdata", "build", "inittrap"), nil)
	if err != nil {
		t.Fatal(err)
	}
	image, err := manifest.Attach(module, payload)
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := checkImage(ctx, t.TempDir(), "inittrap", image)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "inittrap: _initialize trapped: ") || !strings.Contains(warnings[0], "berm.now") ||
		!strings.Contains(warnings[1], "without grants") {
		t.Errorf("warnings %q, want one that _initialize traps, naming berm.now, and that it ran without grants", warnings)
	}
}

// mainHere runs the command line in this process, in the current directory.
func mainHere(t *testing.T, root string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), append([]string{"berm", "--root", root}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// newProject runs berm new NAME in dir, offline, and returns the project's
// directory.
func newProject(t *testing.T, root, dir, name string) string {
	t.Helper()
	t.Chdir(dir)
	if out, errOut, code := mainHere(t, root, "new", name); code != 0 {
		t.Fatalf("berm new: %d\n%s%s", code, out, errOut)
	}
	return filepath.Join(dir, name)
}

// TestNewBuildDeployRun is the README's path, offline: berm new, the
// scaffold's own test with plain go test, berm build, berm deploy, berm run.
func TestNewBuildDeployRun(t *testing.T) {
	goTool := needGo(t)
	offline(t)
	root := t.TempDir()
	proj := newProject(t, root, t.TempDir(), "notes")
	for _, f := range []string{"berm.toml", "go.mod", "main.go", "main_test.go", "README.md"} {
		if _, err := os.Stat(filepath.Join(proj, f)); err != nil {
			t.Errorf("berm new wrote no %s", f)
		}
	}
	test := exec.Command(goTool, "test", "./...")
	test.Dir = proj
	if out, err := test.CombinedOutput(); err != nil {
		t.Fatalf("go test in the scaffold: %v\n%s", err, out)
	}
	t.Chdir(proj)
	out, errOut, code := mainHere(t, root, "build", "--json")
	if code != 0 {
		t.Fatalf("berm build: %d\n%s", code, errOut)
	}
	var built buildOutput
	if err := json.Unmarshal([]byte(out), &built); err != nil {
		t.Fatal(err)
	}
	if built.Path != filepath.Join(proj, "notes.wasm") || !strings.HasPrefix(built.Digest, "sha256:") || strings.Join(built.Tools, ",") != "count" || built.Warnings != nil {
		t.Errorf("build = %+v", built)
	}
	if out, errOut, code = mainHere(t, root, "deploy"); code != 0 || strings.TrimSpace(out) != built.Digest {
		t.Fatalf("berm deploy: %d %q\n%s", code, out, errOut)
	}
	out, errOut, code = mainHere(t, root, "run", "notes", "count", `{"text":"to be or not to be","word":"be"}`)
	if want := `{"lines":1,"words":6,"chars":18,"occurrences":2}`; code != 0 || out != want {
		t.Errorf("berm run = %d %q, want %q\n%s", code, out, want, errOut)
	}
	// The same project in another directory: the same bytes (-trimpath;
	// the go.mod's replace, which Go records in the image, names the same
	// SDK copy under the same root).
	root2 := root
	proj2 := newProject(t, root2, t.TempDir(), "notes")
	t.Chdir(proj2)
	out, errOut, code = mainHere(t, root2, "build", "--json")
	var built2 buildOutput
	if code != 0 || json.Unmarshal([]byte(out), &built2) != nil {
		t.Fatalf("berm build elsewhere: %d\n%s", code, errOut)
	}
	if built2.Digest != built.Digest {
		t.Errorf("the same project built elsewhere is %s, not %s", built2.Digest, built.Digest)
	}
	// And again in place, from the build cache.
	_, errOut, code = mainHere(t, root2, "build")
	if code != 0 {
		t.Fatalf("berm build again: %d\n%s", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(proj2, "notes.wasm")); manifest.Digest(b) != built.Digest {
		t.Errorf("a rebuild is %s, not %s", manifest.Digest(b), built.Digest)
	}
}

func TestNewRefuses(t *testing.T) {
	root := t.TempDir()
	t.Chdir(t.TempDir())
	if err := os.Mkdir("taken", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"exists", []string{"new", "taken"}, "taken already exists"},
		{"bad name", []string{"new", "Bad_Name"}, "Bad_Name"},
		{"bad lang", []string{"new", "--lang", "cobol", "x"}, `no "cobol" scaffold`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := mainHere(t, root, tc.args...)
			if code != exitHost || !strings.Contains(errOut, tc.want) {
				t.Errorf("berm %s = %d\n%s, want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
			}
		})
	}
	if _, err := os.Stat("x"); err == nil {
		t.Error("a refused berm new left ./x")
	}
}

// TestSDKCopy: the Go SDK's copy is a module of std alone, with no test
// files and no embed.go, and writing it twice changes nothing.
func TestSDKCopy(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, err := writeSDK(root, "go")
	if err != nil {
		t.Fatal(err)
	}
	again, err := writeSDK(root, "go")
	if err != nil || again != dir {
		t.Fatalf("second writeSDK = %q, %v; want %q", again, err, dir)
	}
	for _, f := range []string{"go.mod", "sdk/berm.go", "sdk/tool.go", "sdk/bermhttp/transport.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("copy has no %s", f)
		}
	}
	for _, f := range []string{"sdk/embed.go", "sdk/berm_test.go"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("copy has %s", f)
		}
	}
	goTool := needGo(t)
	list := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
	list.Dir = dir
	list.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/berm-dev/berm/sdk") {
			t.Errorf("the SDK depends on %s, beyond the standard library", p)
		}
	}
}

// BenchmarkBuildScaffold is berm build of the Go scaffold from a warm Go
// build cache (-cold: an empty one each time), with where the time went.
var cold = flag.Bool("cold", false, "BenchmarkBuildScaffold with an empty Go build cache each time")

func BenchmarkBuildScaffold(b *testing.B) {
	needGo(b)
	root := b.TempDir()
	dir := b.TempDir()
	b.Chdir(dir)
	if _, errOut, code := benchMain(root, "new", "bench"); code != 0 {
		b.Fatal(errOut)
	}
	proj := filepath.Join(dir, "bench")
	if !*cold {
		// Go's build cache and berm's compile cache, warm.
		if _, err := buildProject(context.Background(), buildOptions{root: root}, proj); err != nil {
			b.Fatal(err)
		}
	}
	var total buildTimes
	for b.Loop() {
		if *cold {
			b.StopTimer()
			cache := b.TempDir()
			b.Setenv("GOCACHE", cache)
			b.StartTimer()
		}
		var times buildTimes
		if _, err := buildProject(context.Background(), buildOptions{root: root, times: &times}, proj); err != nil {
			b.Fatal(err)
		}
		total.describe += times.describe
		total.wasm += times.wasm
		total.derive += times.derive
		total.attach += times.attach
		total.validate += times.validate
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(total.describe/n)/1e6, "describe-ms/op")
	b.ReportMetric(float64(total.wasm/n)/1e6, "wasm-ms/op")
	b.ReportMetric(float64((total.derive+total.attach)/n)/1e6, "derive+attach-ms/op")
	b.ReportMetric(float64(total.validate/n)/1e6, "validate-ms/op")
}

// BenchmarkScaffoldCall is one call of the scaffold's tool through the
// runtime, and its image's size.
func BenchmarkScaffoldCall(b *testing.B) {
	needGo(b)
	root := b.TempDir()
	dir := b.TempDir()
	b.Chdir(dir)
	if _, errOut, code := benchMain(root, "new", "bench"); code != 0 {
		b.Fatal(errOut)
	}
	built, err := buildProject(context.Background(), buildOptions{root: root}, filepath.Join(dir, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	image, err := os.ReadFile(built.Path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := openState(ctx, root, "", createRoot)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := newRuntime(ctx, root, st, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	if _, err := rt.Deploy(ctx, "bench", image, nil); err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"text":"to be or not to be","word":"be"}`)
	for b.Loop() {
		out, err := rt.Call(ctx, "bench", "count", args)
		if err != nil || out.Failed {
			b.Fatal(err, out.Failure)
		}
	}
	b.ReportMetric(float64(len(image)), "image-bytes")
}

func benchMain(root string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), append([]string{"berm", "--root", root}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}
