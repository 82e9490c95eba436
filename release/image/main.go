package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	dist := fs.String("dist", "release/dist", "goreleaser's dist `DIR`")
	out := fs.String("out", "", "write the image as an OCI image layout in `DIR`")
	push := fs.String("push", "", "push the image to `REF` (host/repo:tag)")
	ca := fs.String("ca", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA roots to put in the image")
	source := fs.String("source", "https://github.com/berm-dev/berm", "the source repository, for the annotations")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" && *push == "" {
		return errors.New("give -out, -push or both")
	}
	s, err := specFromDist(*dist)
	if err != nil {
		return err
	}
	s.Source = *source
	if s.CACerts, err = os.ReadFile(*ca); err != nil {
		return fmt.Errorf("CA roots: %w", err)
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH=%q: want the commit's time in seconds (git log -1 --format=%%ct)", epoch)
	}
	s.Created = time.Unix(sec, 0).UTC()
	im, err := build(s)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := os.RemoveAll(*out); err != nil {
			return err
		}
		if err := im.writeLayout(*out, s.Version); err != nil {
			return err
		}
	}
	if *push != "" {
		if err := im.push(ctx, *push); err != nil {
			return fmt.Errorf("push %s: %w", *push, err)
		}
	}
	fmt.Fprintf(stdout, "image %s %s\n", s.Version, im.Index.Digest)
	return nil
}

// specFromDist reads goreleaser's metadata.json (version, commit) and
// artifacts.json (where the linux binaries are) in dist.
func specFromDist(dist string) (spec, error) {
	var meta struct{ Version, Commit string }
	if err := readJSON(filepath.Join(dist, "metadata.json"), &meta); err != nil {
		return spec{}, err
	}
	var artifacts []struct {
		Type, Path, Goos, Goarch string
	}
	if err := readJSON(filepath.Join(dist, "artifacts.json"), &artifacts); err != nil {
		return spec{}, err
	}
	s := spec{Version: "v" + meta.Version, Revision: meta.Commit, Binaries: map[string]string{}}
	for _, a := range artifacts {
		if a.Type == "Binary" && a.Goos == "linux" && (a.Goarch == "amd64" || a.Goarch == "arm64") {
			// Paths are relative to where goreleaser ran; dist may have moved
			// since, so keep only the part below it.
			s.Binaries[a.Goarch] = filepath.Join(dist, filepath.Base(filepath.Dir(a.Path)), filepath.Base(a.Path))
		}
	}
	if len(s.Binaries) != 2 {
		return spec{}, fmt.Errorf("%s: want linux binaries for amd64 and arm64, found %d", dist, len(s.Binaries))
	}
	return s, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
