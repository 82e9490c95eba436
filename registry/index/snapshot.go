package index

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// snapshotVersion changes whenever what build writes does: a snapshot of
// another version is built again from its clone.
const snapshotVersion = 2

// snapshot is a commit of an index, read and ranked once: what search
// loads. A search of 10,000 programs would spend most of its time stemming
// their text; the snapshot holds the terms stemmed.
type snapshot struct {
	Version  int
	Commit   string
	Corpus   corpus
	Warnings []Warning
}

// pins maps every valid line's repository and manifest digest
// (host/repo@sha256:...) to its layer, newest lines and older alike: what
// deploy checks a pull against. The tag is left out: the digest pins the
// manifest whatever tag led to it. Kept apart from the snapshot, which every
// search loads.
type pins struct {
	Version int
	Commit  string
	Layers  map[string]string
}

// build reads the tree of commit: every regular file ending in Ext, each
// checked (its path, its size, each of its lines). The newest line of each
// file is the program search ranks: a file is one repository, so a search
// finds each program once, as last published.
func build(repo *git.Repository, commit plumbing.Hash) (*snapshot, *pins, error) {
	c, err := repo.CommitObject(commit)
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	s := &snapshot{Version: snapshotVersion, Commit: commit.String()}
	p := &pins{Version: snapshotVersion, Commit: commit.String(), Layers: map[string]string{}}
	b := newBuilder()
	files := 0
	err = walk(repo, tree, "", 0, func(name string, e object.TreeEntry) error {
		if !strings.HasSuffix(name, Ext) {
			return nil // a README, a licence, CI: not listings
		}
		if files++; files > maxFiles {
			if files == maxFiles+1 {
				s.Warnings = append(s.Warnings, Warning{File: name, Err: fmt.Sprintf("over %d files: this one and the rest", maxFiles)})
			}
			return nil
		}
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable {
			s.Warnings = append(s.Warnings, Warning{File: name, Err: "not a regular file"})
			return nil
		}
		if err := checkPath(name); err != nil {
			s.Warnings = append(s.Warnings, Warning{File: name, Err: err.Error()})
			return nil
		}
		blob, err := repo.BlobObject(e.Hash)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if blob.Size > MaxFile {
			s.Warnings = append(s.Warnings, Warning{File: name, Err: fmt.Sprintf("%d bytes, over the bound of %d", blob.Size, MaxFile)})
			return nil
		}
		r, err := blob.Reader()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(r, MaxFile+1))
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		entries, warnings := Parse(name, data)
		s.Warnings = append(s.Warnings, warnings...)
		for i := range entries {
			repo, _, _ := splitReference(entries[i].Reference) // checked by Parse
			p.Layers[repo+"@"+entries[i].Digest] = entries[i].Layer
		}
		if len(entries) > 0 {
			return b.add(&entries[len(entries)-1])
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	s.Corpus = *b.corpus()
	return s, p, nil
}

// maxDepth bounds the directories of an index: a host, an organization
// and a few levels of repository.
const maxDepth = 32

// walk calls fn with the path of every file of tree, in git's order. It
// reads the entries as they are: go-git's own walker stops at the first name
// it finds unsafe, where an index should lose that file only (checkPath).
func walk(repo *git.Repository, tree *object.Tree, prefix string, depth int, fn func(string, object.TreeEntry) error) error {
	if depth > maxDepth {
		return nil
	}
	for _, e := range tree.Entries {
		name := e.Name
		if prefix != "" {
			name = prefix + "/" + e.Name
		}
		switch e.Mode {
		case filemode.Dir:
			sub, err := repo.TreeObject(e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := walk(repo, sub, name, depth+1, fn); err != nil {
				return err
			}
		case filemode.Submodule:
		default:
			if err := fn(name, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeGob writes v to path through a temporary file renamed into place,
// so that a reader sees the old file or the new one.
func writeGob(path string, v any) error {
	return writeAtomic(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := gob.NewEncoder(bw).Encode(v); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// readGob reads what writeGob wrote.
func readGob(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(v)
}

// writeAtomic writes a file with write, synced, and renames it into place.
func writeAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// errVersion: a snapshot written by another version of berm.
var errVersion = errors.New("snapshot of another version")
