package commands

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime"
)

// scaffoldProject renders scaffold/<lang> into a temporary directory as
// berm new does, over the copy of the SDK it writes under a temporary root;
// it returns the project's directory and the root.
func scaffoldProject(tb testing.TB, lang, name string) (dir, root string) {
	tb.Helper()
	root = tb.TempDir()
	sdkDir, err := writeSDK(root, lang)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl, err := fs.Sub(scaffolds, "scaffold/"+lang)
	if err != nil {
		tb.Fatal(err)
	}
	dir = filepath.Join(tb.TempDir(), name)
	data := scaffoldData{Name: name, Image: "localhost:5000/" + name, SDKDir: sdkDir}
	err = fs.WalkDir(tmpl, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(p, ".tmpl")))
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := fs.ReadFile(tmpl, p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".tmpl") {
			if b, err = render(p, b, data); err != nil {
				return err
			}
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dir, root
}

// buildScaffold builds the project with berm build's own code, returning the
// image.
func buildScaffold(tb testing.TB, dir, root string) []byte {
	tb.Helper()
	res, err := buildProject(context.Background(), buildOptions{root: root}, dir)
	if err != nil {
		tb.Fatal(err)
	}
	image, err := os.ReadFile(res.Path)
	if err != nil {
		tb.Fatal(err)
	}
	return image
}

// deployImage deploys image as name in a runtime with no host syscalls.
func deployTestImage(tb testing.TB, name string, image []byte) *runtime.Runtime {
	tb.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(ctx) })
	if _, err := rt.Deploy(ctx, name, image, nil); err != nil {
		tb.Fatal(err)
	}
	return rt
}

// checkScaffoldCount calls the scaffolds' tool, count, through the runtime.
func checkScaffoldCount(t *testing.T, rt *runtime.Runtime, name string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct{ args, want, failure string }{
		{`{"text":"one two three\nThe end. The END\n","word":"the"}`, `{"lines":2,"words":7,"chars":31,"occurrences":2}`, ""},
		{`{"text":"h\u00e9llo"}`, `{"lines":1,"words":1,"chars":5}`, ""},
		{`{"text":""}`, "", `text is empty: give the text to count, as in {"text": "one two"}`},
	} {
		out, err := rt.Call(ctx, name, "count", []byte(c.args))
		if err != nil {
			t.Fatalf("count %s: %v", c.args, err)
		}
		if string(out.Result) != c.want || string(out.Failure) != c.failure {
			t.Errorf("count %s: result %s, failure %q; want %s, %q", c.args, out.Result, out.Failure, c.want, c.failure)
		}
	}
	// The schema of berm.toml is the manifest's: the host refuses what it
	// does not allow.
	if _, err := rt.Call(ctx, name, "count", []byte(`{"text":"x","other":1}`)); err == nil {
		t.Error("count with an unknown argument: no error; want the host's refusal")
	}
}

// benchCount is one call of the scaffold's count through the runtime.
func benchCount(b *testing.B, rt *runtime.Runtime, name string) {
	ctx := context.Background()
	args := []byte(`{"text":"the quick brown fox\njumps over the lazy dog\n","word":"the"}`)
	b.ReportAllocs()
	for b.Loop() {
		out, err := rt.Call(ctx, name, "count", args)
		if err != nil || out.Failed {
			b.Fatal(err, string(out.Failure))
		}
	}
}
