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
	"sync"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

var (
	// ErrNotDeployed: nothing is deployed under the name.
	ErrNotDeployed = errors.New("not deployed")
	// ErrNoImage: the store does not hold an image of that digest.
	ErrNoImage = errors.New("no such image")
	// ErrDamaged: a file no longer matches what was written (its digest, its
	// JSON, its name).
	ErrDamaged = errors.New("damaged on disk")
)

// Store is a root directory of berm state.
type Store struct {
	root string

	mu   sync.Mutex
	data map[string]*usage // by program, once its data is written or removed
}

// Layout of the root.
const (
	imagesDir      = "images/sha256"
	deploymentsDir = "deployments"
	cacheDir       = "cache"
	dataDir        = "data"
	tmpPrefix      = ".tmp-"
)

// OpenDir opens (creating it when needed) the store at root.
func OpenDir(root string) (*Store, error) {
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

// OpenDirExisting opens the store at root and creates nothing, so that commands
// that only read leave no root behind. A root that does not exist is an error
// wrapping fs.ErrNotExist; a missing directory under it reads as empty. The
// first write creates the directory it writes to.
func OpenDirExisting(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("store: no root directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("store: %s is not a directory: %w", abs, fs.ErrInvalid)
	}
	return &Store{root: abs}, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

// CacheDir is where compiled code is cached. A store from OpenDirExisting may
// not have it yet.
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
	if got, err := readBounded(path, manifest.DefaultMaxImage); err == nil && bytes.Equal(got, image) {
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
	image, err := readBounded(path, manifest.DefaultMaxImage)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image %s: %w", digest, ErrNoImage)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", digest, err)
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
	// Grants are what the deployment lets the program reach.
	Grants *sandbox.Grants `json:"grants,omitempty"`
}

// Damaged is a deployment record that Deployments could not read: Name is
// its file's name without ".json", which may not be a valid program name,
// and Err wraps ErrDamaged.
type Damaged struct {
	Name string
	Err  error
}

// deploymentPath is the record of a name that manifest.CheckProgramName
// accepted: only such a name stays inside the directory.
func (s *Store) deploymentPath(name string) string {
	return filepath.Join(s.root, deploymentsDir, name+".json")
}

// Deploy records a deployment, replacing any under the same name atomically.
// The image must be stored first.
func (s *Store) Deploy(d Deployment) error {
	if err := manifest.CheckProgramName(d.Name); err != nil {
		return err
	}
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

// Deployment returns the deployment under name; a record that does not read
// back as a deployment of that name and a valid digest is ErrDamaged.
func (s *Store) Deployment(name string) (Deployment, error) {
	if err := manifest.CheckProgramName(name); err != nil {
		return Deployment{}, err
	}
	b, err := readBounded(s.deploymentPath(name), maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return Deployment{}, fmt.Errorf("program %q: %w", name, ErrNotDeployed)
	}
	if err != nil {
		return Deployment{}, fmt.Errorf("deployment %q: %w", name, err)
	}
	var d Deployment
	if err := json.Unmarshal(b, &d); err != nil || d.Name != name {
		return Deployment{}, fmt.Errorf("deployment %q: %w", name, ErrDamaged)
	}
	if _, err := s.imagePath(d.Digest); err != nil {
		return Deployment{}, fmt.Errorf("deployment %q: %w: %w", name, ErrDamaged, err)
	}
	return d, nil
}

// Deployments lists every deployment by name, and apart from them the
// records it could not read. The error is only for the directory itself.
func (s *Store) Deployments() ([]Deployment, []Damaged, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, deploymentsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []Deployment{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("deployments: %w", err)
	}
	out := []Deployment{}
	var damaged []Damaged
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		// A name no deploy could have written is reported, never opened:
		// it might lead anywhere.
		if err := manifest.CheckProgramName(name); err != nil {
			damaged = append(damaged, Damaged{Name: name, Err: fmt.Errorf("deployment file %q: %w: %w", e.Name(), ErrDamaged, err)})
			continue
		}
		d, err := s.Deployment(name)
		switch {
		case errors.Is(err, ErrNotDeployed):
			continue // removed since the directory was read
		case errors.Is(err, ErrDamaged):
			damaged = append(damaged, Damaged{Name: name, Err: err})
		case err != nil:
			damaged = append(damaged, Damaged{Name: name, Err: fmt.Errorf("%w: %w", ErrDamaged, err)})
		default:
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Slice(damaged, func(i, j int) bool { return damaged[i].Name < damaged[j].Name })
	return out, damaged, nil
}

// Remove deletes the deployment under name and, unless keepData, its data.
func (s *Store) Remove(name string, keepData bool) error {
	if err := manifest.CheckProgramName(name); err != nil {
		return err
	}
	err := os.Remove(s.deploymentPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("program %q: %w", name, ErrNotDeployed)
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if !keepData {
		return s.removeData(name)
	}
	return nil
}

// writeAtomic writes b to path through a temporary file in the same
// directory, synced before it is renamed into place and the directory synced
// after, so that the file is either the old one or all of the new one.
func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if errors.Is(err, fs.ErrNotExist) {
		// A store from OpenDirExisting, or a directory removed by hand: the
		// write creates what it needs.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err = os.CreateTemp(dir, tmpPrefix+"*")
	}
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
