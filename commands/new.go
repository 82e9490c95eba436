package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	berm "github.com/berm-dev/berm/sdk"
)

// scaffolds holds a project template per language, scaffold/<lang>/: every
// file is copied into the new project, those ending in .tmpl rendered by
// text/template (with scaffoldData) and the suffix dropped.
//
//go:embed all:scaffold
var scaffolds embed.FS

// scaffoldData is what a template sees.
type scaffoldData struct {
	Name   string // the program's name
	Image  string // the default image reference
	SDKDir string // the absolute path of the language's SDK copy under the root
}

type newOptions struct {
	root string
	lang string
}

func newNewCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "new",
		Usage:     "create a program's project: berm.toml, one tool, its test, a README",
		ArgsUsage: "NAME",
		Description: `Creates ./NAME with a program of one tool, a test that runs it under the
SDK's fake host, berm.toml and a README. The project builds and its test
passes offline: the SDK it uses is the one this berm carries, written under
the root (ROOT/sdk/LANG/VERSION) and pointed at by the project (for Go, a
replace in go.mod).

   berm new notes
   cd notes && go test && berm build && berm deploy
   berm new --lang rust notes

NAME is the program's name: 1 to 63 characters of [a-z0-9-].`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lang", Value: "go", Usage: "the program's language: go, rust or c"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("new takes NAME")
			}
			return runNew(ctx, e, newOptions{root: cmd.String("root"), lang: cmd.String("lang")}, cmd.Args().First())
		},
	}
}

func runNew(_ context.Context, e *env, opts newOptions, name string) error {
	if err := manifest.CheckProgramName(name); err != nil {
		return err
	}
	tmpl, err := fs.Sub(scaffolds, "scaffold/"+opts.lang)
	if err != nil || !hasFiles(tmpl) {
		return withHint(fmt.Errorf("new: no %q scaffold in this berm", opts.lang), "give --lang go, rust or c")
	}
	if opts.root == "" {
		return noRoot()
	}
	if _, err := os.Lstat(name); err == nil {
		return withHint(fmt.Errorf("new: %s already exists", name), "choose another NAME, or remove ./%s", name)
	}
	sdkDir, err := writeSDK(opts.root, opts.lang)
	if err != nil {
		return err
	}
	data := scaffoldData{Name: name, Image: "localhost:5000/" + name, SDKDir: sdkDir}
	// Rendered into a temporary directory beside NAME, then renamed: a
	// failure leaves nothing half made.
	tmp, err := os.MkdirTemp(".", "."+name+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var files []string
	err = fs.WalkDir(tmpl, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		out := filepath.Join(tmp, filepath.FromSlash(strings.TrimSuffix(p, ".tmpl")))
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
		files = append(files, strings.TrimSuffix(p, ".tmpl"))
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	sort.Strings(files)
	fmt.Fprintf(e.stdout, "created ./%s (%s): %s\n", name, opts.lang, strings.Join(files, ", "))
	fmt.Fprintf(e.stdout, "the %s SDK it uses: %s\n", opts.lang, sdkDir)
	fmt.Fprintf(e.stdout, "next: cd %s && %s && berm build && berm deploy\n", name, map[string]string{"go": "go test", "rust": "cargo test", "c": "make test"}[opts.lang])
	return nil
}

func render(name string, b []byte, data scaffoldData) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("scaffold %s: %w", name, err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("scaffold %s: %w", name, err)
	}
	return out.Bytes(), nil
}

func hasFiles(fsys fs.FS) bool {
	entries, err := fs.ReadDir(fsys, ".")
	return err == nil && len(entries) > 0
}

// sdkGoMod makes the Go SDK's copy a module of its own path: the
// programs' go.mod replace github.com/berm-dev/berm with it. It requires
// nothing, so go test and go build need no download.
const sdkGoMod = "module github.com/berm-dev/berm\n\ngo 1.24\n"

// sdkFiles lists the files of a language's SDK copy, by their path in it.
// The Go copy is the SDK package and bermhttp under sdk/, with a go.mod of
// their own: their tests, and embed.go (whose patterns name what the copy
// leaves out), stay behind.
func sdkFiles(lang string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var root string
	switch lang {
	case "go":
		files["go.mod"] = []byte(sdkGoMod)
	case "rust", "c":
		root = lang
	default:
		return nil, fmt.Errorf("no %q SDK", lang)
	}
	err := fs.WalkDir(berm.Sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var out string
		switch lang {
		case "go":
			top, _, _ := strings.Cut(p, "/")
			if top == "rust" || top == "c" || strings.HasSuffix(p, "_test.go") || p == "embed.go" {
				return nil
			}
			out = path.Join("sdk", p)
		default:
			rel, ok := strings.CutPrefix(p, root+"/")
			if !ok {
				return nil
			}
			out = rel
		}
		b, err := berm.Sources.ReadFile(p)
		files[out] = b
		return err
	})
	return files, err
}

// writeSDK writes the copy of a language's SDK that this berm carries
// under root, at ROOT/sdk/LANG/VERSION-HASH (the SDK's version, and the
// first 12 hex digits of the sha256 of its files, so that a copy never
// changes once written and two berm binaries never overwrite each other's),
// unless it is there. It returns the copy's absolute path.
func writeSDK(root, lang string) (string, error) {
	files, err := sdkFiles(lang)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return "", err
	}
	parent := filepath.Join(root, "sdk", lang)
	dir := filepath.Join(parent, berm.Version+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, n := range names {
		out := filepath.Join(tmp, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(out, files[n], 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another berm wrote the same copy first.
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir, nil
		}
		return "", errors.Join(fmt.Errorf("sdk copy: %w", err))
	}
	return dir, nil
}
