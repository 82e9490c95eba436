// Package store keeps berm's state in one root directory: images addressed by
// digest, the table of deployments, the compiled-code cache and the programs'
// data. Several processes share a root without locks: every write lands in a
// temporary file that is renamed into place, so a reader sees the old file or
// the new one, never half of one, and a kill mid-write loses nothing that was
// there.
//
//	s, err := store.Open(root)
//	digest, err := s.PutImage(image)
//	err = s.Deploy(store.Deployment{Name: "hello", Digest: digest})
//	d, err := s.Deployment("hello")
//	image, err = s.Image(d.Digest) // checked against its digest
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/berm-dev/berm/manifest"
)

var (
	// ErrNotDeployed: nothing is deployed under the name.
	ErrNotDeployed = errors.New("not deployed")
	// ErrNoImage: the store does not hold an image of that digest.
	ErrNoImage = errors.New("no such image")
	// ErrDamaged: a file no longer matches what was written (its digest, its
	// JSON).
	ErrDamaged = errors.New("damaged on disk")
)

// Store is a root directory of berm state.
type Store struct {
	root string
}

// Layout of the root.
const (
	imagesDir      = "images/sha256"
	deploymentsDir = "deployments"
	cacheDir       = "cache"
	dataDir        = "data"
	tmpPrefix      = ".tmp-"
)

// Open opens (creating it when needed) the store at root.
func Open(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("store: no root directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{imagesDir, deploymentsDir, cacheDir, dataDir} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return &Store{root: abs}, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

// CacheDir is where compiled code is cached.
func (s *Store) CacheDir() string { return filepath.Join(s.root, cacheDir) }

func (s *Store) imagePath(digest string) (string, error) {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", fmt.Errorf("digest %q: want sha256:<64 lowercase hex>", digest)
	}
	return filepath.Join(s.root, imagesDir, hexPart), nil
}

// PutImage stores an image under its digest and returns the digest. The same
// bytes are stored once.
func (s *Store) PutImage(image []byte) (string, error) {
	digest := manifest.Digest(image)
	path, _ := s.imagePath(digest)
	// Held already: the same bytes are stored once. Bytes that differ are a
	// damaged file, which the write below repairs.
	if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, image) {
		return digest, nil
	}
	if err := writeAtomic(path, image); err != nil {
		return "", fmt.Errorf("store image %s: %w", digest, err)
	}
	return digest, nil
}

// Image reads back the image of a digest, checking its bytes against it.
func (s *Store) Image(digest string) ([]byte, error) {
	path, err := s.imagePath(digest)
	if err != nil {
		return nil, err
	}
	image, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image %s: %w", digest, ErrNoImage)
	}
	if err != nil {
		return nil, err
	}
	if got := manifest.Digest(image); got != digest {
		return nil, fmt.Errorf("image %s: its bytes hash to %s: %w", digest, got, ErrDamaged)
	}
	return image, nil
}

// HasImage reports whether the store holds a file for the digest (unchecked).
func (s *Store) HasImage(digest string) bool {
	path, err := s.imagePath(digest)
	if err != nil {
		return false
	}
	_, err = os.Stat(path)
	return err == nil
}

// Deployment is one row of the table of deployments.
type Deployment struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	// Source is where the image came from: a file path or an OCI reference.
	Source   string    `json:"source,omitempty"`
	Deployed time.Time `json:"deployed"`
}

func (s *Store) deploymentPath(name string) string {
	return filepath.Join(s.root, deploymentsDir, name+".json")
}

// Deploy records a deployment, replacing any under the same name atomically.
// The image must be stored first.
func (s *Store) Deploy(d Deployment) error {
	if !s.HasImage(d.Digest) {
		return fmt.Errorf("deploy %s: image %s: %w", d.Name, d.Digest, ErrNoImage)
	}
	if d.Deployed.IsZero() {
		d.Deployed = time.Now().UTC()
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(s.deploymentPath(d.Name), append(b, '\n')); err != nil {
		return fmt.Errorf("deploy %s: %w", d.Name, err)
	}
	return nil
}

// Deployment returns the deployment under name.
func (s *Store) Deployment(name string) (Deployment, error) {
	b, err := os.ReadFile(s.deploymentPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return Deployment{}, fmt.Errorf("program %q: %w", name, ErrNotDeployed)
	}
	if err != nil {
		return Deployment{}, err
	}
	var d Deployment
	if err := json.Unmarshal(b, &d); err != nil || d.Name != name {
		return Deployment{}, fmt.Errorf("deployment %q: %w", name, ErrDamaged)
	}
	return d, nil
}

// Deployments lists every deployment by name.
func (s *Store) Deployments() ([]Deployment, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, deploymentsDir))
	if err != nil {
		return nil, err
	}
	out := []Deployment{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		d, err := s.Deployment(name)
		if errors.Is(err, ErrNotDeployed) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes the deployment under name and, unless keepData, its data.
func (s *Store) Remove(name string, keepData bool) error {
	err := os.Remove(s.deploymentPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("program %q: %w", name, ErrNotDeployed)
	}
	if err != nil {
		return err
	}
	if !keepData {
		return os.RemoveAll(s.dataPath(name))
	}
	return nil
}

// writeAtomic writes b to path through a temporary file in the same
// directory, synced before it is renamed into place and the directory synced
// after, so that the file is either the old one or all of the new one.
func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some platforms (Windows) cannot sync a directory; the rename stands.
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, os.ErrPermission) {
		return err
	}
	return nil
}
