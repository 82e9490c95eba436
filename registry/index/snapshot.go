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
const snapshotVersion = 3

// snapshot is a commit of an index, read and ranked once: what search
// loads. A search of 10,000 programs would spend most of its time stemming
// their text; the snapshot holds the terms stemmed. build writes it to its
// file as it reads; one in memory (Corpus.Lines set) is for tests.
type snapshot struct {
	Version  int
	Commit   string
	Corpus   corpus
	Warnings []Warning
	Skipped  int
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

// limits are the bounds build applies to a whole index: MaxFiles, MaxRead
// and MaxHeld, smaller in tests.
type limits struct {
	files      int
	read, held int64
}

var defaultLimits = limits{files: MaxFiles, read: MaxRead, held: MaxHeld}

// warnings keeps the first warnings and counts them all: half of
// MaxWarnings for whole files, half for lines, so that the lines of one
// file of junk do not hide that another file was past a bound. A warning
// that stops the reading of the index (stop) is kept whatever the count,
// first, with the number of files it stopped.
type warnings struct {
	files, lines []Warning
	n            int
	stop         *Warning
	after        int
}

func (w *warnings) add(x Warning) {
	w.n++
	if x.Line == 0 && len(w.files) < MaxWarnings/2 {
		w.files = append(w.files, x)
	} else if x.Line > 0 && len(w.lines) < MaxWarnings/2 {
		w.lines = append(w.lines, x)
	}
}

// stopAt skips file and every listing after it, for why.
func (w *warnings) stopAt(file, why string) {
	w.n++
	x := warning(file, 0, why)
	w.stop = &x
}

// list is the warnings kept: the one that stopped the reading, the whole
// files', the lines'.
func (w *warnings) list() []Warning {
	var l []Warning
	if w.stop != nil {
		s := *w.stop
		if w.after > 0 {
			s.Err += fmt.Sprintf(", as are the %d files after it", w.after)
		}
		l = append(l, s)
	}
	l = append(l, w.files...)
	l = append(l, w.lines...)
	return l[:min(len(l), MaxWarnings)]
}

// fileWarnings holds the warnings of the lines of the file being read: if
// the whole file is then skipped, its one warning says so instead.
type fileWarnings struct {
	kept []Warning
	n    int
}

func (f *fileWarnings) add(x Warning) {
	f.n++
	if len(f.kept) < MaxWarnings {
		f.kept = append(f.kept, x)
	}
}

// pinCost is what a pin holds, for MaxHeld.
func pinCost(key, layer string) int64 { return heldEntry + int64(len(key)+len(layer)) }

// build reads the tree of commit into the snapshot file at path, and
// returns its pins: every regular file ending in Ext, each checked (its
// path, its size, its lines, each line), read a line at a time. The newest
// line of each file is the program search ranks: a file is one repository,
// so a search finds each program once, as last published. Past lim, the
// rest of the index is skipped, with one warning that counts it.
func build(repo *git.Repository, commit plumbing.Hash, path string, lim limits) (*pins, *warnings, error) {
	c, err := repo.CommitObject(commit)
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	sw, err := createSnapshot(path)
	if err != nil {
		return nil, nil, err
	}
	p := &pins{Version: snapshotVersion, Commit: commit.String(), Layers: map[string]string{}}
	b := newBuilder(sw)
	b.maxHeld = lim.held
	ws := &warnings{}
	lr := newLineReader()
	files := 0
	var read int64
	type pin struct{ key, layer string }
	var filePins []pin
	err = walk(repo, tree, "", 0, func(name string, e object.TreeEntry) error {
		if !strings.HasSuffix(name, Ext) {
			return nil // a README, a licence, CI: not listings
		}
		files++
		switch {
		case ws.stop != nil:
			ws.n++
			ws.after++
			return nil
		case files > lim.files:
			ws.stopAt(name, fmt.Sprintf("past the limit of %d files an index", lim.files))
			return nil
		case e.Mode != filemode.Regular && e.Mode != filemode.Executable:
			ws.add(warning(name, 0, "not a regular file"))
			return nil
		}
		if err := checkPath(name); err != nil {
			ws.add(warning(name, 0, err.Error()))
			return nil
		}
		blob, err := repo.BlobObject(e.Hash)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// The size is the object's header: nothing of a blob past the
		// bound is read.
		if blob.Size > MaxFile {
			ws.add(warning(name, 0, pastFile(blob.Size)))
			return nil
		}
		if read+blob.Size > lim.read {
			ws.stopAt(name, fmt.Sprintf("past the limit of %s read an index", size(lim.read)))
			return nil
		}
		read += blob.Size
		r, err := blob.Reader()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var last Entry
		var found bool
		var lines fileWarnings
		filePins = filePins[:0]
		why, err := lr.scan(name, r, func(e *Entry) {
			repo, _, _ := splitReference(e.Reference) // checked by scan
			filePins = append(filePins, pin{repo + "@" + e.Digest, e.Layer})
			last, found = *e, true
		}, lines.add)
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if why != "" {
			ws.add(warning(name, 0, why))
			return nil
		}
		for _, w := range lines.kept {
			ws.add(w)
		}
		ws.n += lines.n - len(lines.kept)
		if !found {
			return nil
		}
		var cost int64
		for _, x := range filePins {
			if _, ok := p.Layers[x.key]; !ok {
				cost += pinCost(x.key, x.layer)
			}
		}
		if err := b.add(&last, cost); errors.Is(err, errHeld) {
			ws.stopAt(name, fmt.Sprintf("past the limit of %s held in reading an index (its words and pins)", size(lim.held)))
			return nil
		} else if errors.Is(err, errUnlistable) {
			ws.add(warning(name, 0, err.Error()))
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, x := range filePins {
			p.Layers[x.key] = x.layer
		}
		return nil
	})
	if err != nil {
		sw.abort()
		return nil, nil, err
	}
	h := header{Version: snapshotVersion, Commit: commit.String(), Warnings: ws.list(), Skipped: ws.n}
	if err := sw.finish(h, b.corpus()); err != nil {
		return nil, nil, err
	}
	return p, ws, nil
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
