package index

import "bytes"

// What the external tests (bench_test.go) reach inside the package for.

// Corpus is a corpus, built and searched as a snapshot holds it.
type Corpus = corpus

// BuildCorpus builds the corpus of the newest line of each of files.
func BuildCorpus(files map[string]string) (*Corpus, error) {
	b := newBuilder(&bytes.Buffer{})
	for p, content := range files {
		entries, _ := Parse(p, []byte(content))
		if len(entries) > 0 {
			if err := b.add(&entries[len(entries)-1], 0); err != nil {
				return nil, err
			}
		}
	}
	return b.corpus(), nil
}

// SearchCorpus ranks c against query.
func SearchCorpus(c *Corpus, query string, limit int) ([]Hit, error) { return search(c, query, limit) }

// WriteSnapshot writes c as a snapshot file.
func WriteSnapshot(path string, c *Corpus) error {
	return writeSnapshot(path, &snapshot{Version: snapshotVersion, Corpus: *c})
}

// Snapshot is a snapshot file opened as Open opens it.
type Snapshot = diskCorpus

// OpenSnapshot reads a snapshot file's header, as Open does.
func OpenSnapshot(path string) (*Snapshot, error) { return openSnapshot(path) }

// SearchSnapshot ranks a snapshot file's programs against query, as
// Index.Search does.
func SearchSnapshot(s *Snapshot, query string, limit int) ([]Hit, error) {
	return search(s, query, limit)
}

// WithLimits is o with the bounds of an index set to files (MaxFiles),
// read (MaxRead) and held (MaxHeld), so that a test reaches them with a
// small index.
func WithLimits(o Options, files int, read, held int64) *Options {
	o.lim = &limits{files: files, read: read, held: held}
	return &o
}

// WithCloneLimits is o with the bounds of a clone set: bytes (MaxClone),
// object (MaxObject), chain and objects (MaxObjects).
func WithCloneLimits(o Options, bytes, object, chain int64, objects uint32) *Options {
	o.clone = &cloneLimits{bytes: bytes, object: object, chain: chain, objects: objects}
	return &o
}

// MaxRefs is maxRefs, the bound of a server's list of references.
const MaxRefs = maxRefs
