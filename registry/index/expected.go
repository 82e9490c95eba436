package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrLayer: a registry served a layer other than the one an index lists for
// the manifest digest it pinned.
var ErrLayer = errors.New("layer differs from the index's")

// Expected returns the layer digest that the indexes cloned under root list
// for the manifest digest of reference's repository: what a deploy of
// reference@manifestDigest must pull, when an index lists it. reference is
// host/repo[:tag]; it may carry the digest itself (host/repo:tag@sha256:...,
// as search prints it) when manifestDigest is "". found is false when no
// index under root lists the digest, or there is no digest to look for. It
// reads only what searches cloned already: it never fetches.
func Expected(root, reference, manifestDigest string) (layer string, found bool, err error) {
	if root == "" {
		return "", false, nil // no root, no clones: never the working directory's
	}
	if manifestDigest == "" {
		ref, digest, ok := strings.Cut(reference, "@")
		if !ok {
			return "", false, nil
		}
		reference, manifestDigest = ref, digest
	}
	repo, _, err := splitReference(reference)
	if err != nil {
		return "", false, err
	}
	want := repo + "@" + manifestDigest
	dirs, err := os.ReadDir(filepath.Join(root, Dir))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var from string
	for _, d := range dirs {
		dir := filepath.Join(root, Dir, d.Name())
		cur, err := readCurrent(dir)
		if err != nil {
			continue // not a clone, or never finished
		}
		p, err := loadPins(dir, cur)
		if err != nil {
			return "", false, fmt.Errorf("index %s: %w", cur.URL, err)
		}
		l, ok := p.Layers[want]
		switch {
		case !ok:
		case found && l != layer:
			return "", false, fmt.Errorf("%s: %s lists layer %s, %s lists %s: %w", want, from, layer, cur.URL, l, ErrConflict)
		default:
			layer, found, from = l, true, cur.URL
		}
	}
	return layer, found, nil
}

// Verify refuses a pull of pinned (host/repo:tag@sha256:..., what a deploy
// records as its source) whose layer is not the one an index under root
// lists for it. A reference no index lists passes.
func Verify(root, pinned, layer string) error {
	want, found, err := Expected(root, pinned, "")
	if err != nil || !found || want == layer {
		return err
	}
	return fmt.Errorf("%s: the registry served layer %s, the index lists %s: %w", pinned, layer, want, ErrLayer)
}

// loadPins reads a generation's pins, built again from its clone when they
// are missing or of another version.
func loadPins(dir string, cur *current) (*pins, error) {
	gen := filepath.Join(dir, cur.Gen)
	var p pins
	if err := readGob(filepath.Join(gen, pinsFile), &p); err == nil && p.Version == snapshotVersion && p.Commit == cur.Commit {
		return &p, nil
	}
	return rebuild(gen, cur.Commit, nil)
}
