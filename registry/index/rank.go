package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Fields of a listed program that a search looks in, and their weights in
// BM25F: a word of the name or of a tool's name says more of what the
// program is than one of its prose.
const (
	fieldName        = iota // the repository's path, without host or tag
	fieldTools              // the tools' names
	fieldUsage              // the usage
	fieldDescription        // the tools' descriptions
	nFields
)

var fieldWeights = [nFields]float64{fieldName: 3, fieldTools: 2, fieldUsage: 1, fieldDescription: 1}

// BM25 parameters: the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// MaxQueryTerms is the most distinct terms of a query searched; the rest
// are ignored. Each is a search of the snapshot's terms on disk and a read
// of its postings, and a model's query can be as long as it likes.
const MaxQueryTerms = 32

// maxTF is the largest count of a term in a field that postings keep.
const maxTF = 255

// corpus is what a search ranks: the newest line of each program and, for
// each term, which of them hold it how often in which field. It is built
// once per fetched commit and kept on disk (snapshot.go), so that a search
// reads no JSON but its results'.
type corpus struct {
	// Lines holds each program's newest line, one after another; Ends[i]
	// is where program i's ends.
	Lines []byte
	Ends  []uint32
	// Lens are the fields' lengths in terms, nFields per program.
	Lens []uint16
	Avg  [nFields]float64
	// Postings of each term: program<<32 | its counts in each field, a
	// byte each, field 0 lowest.
	Postings map[string][]uint64
}

// searchable is a corpus in memory, as built, or in a snapshot file.
type searchable interface {
	len() int
	averages() [nFields]float64
	// reader gives what one search reads; close it after.
	reader() (ranker, error)
}

// ranker reads what ranking needs of a corpus.
type ranker interface {
	postings(term string) ([]uint64, error)
	length(doc uint32, field int) int
	line(doc uint32) ([]byte, error)
	close()
}

func (c *corpus) len() int                            { return len(c.Ends) }
func (c *corpus) averages() [nFields]float64          { return c.Avg }
func (c *corpus) reader() (ranker, error)             { return c, nil }
func (c *corpus) close()                              {}
func (c *corpus) length(doc uint32, f int) int        { return int(c.Lens[int(doc)*nFields+f]) }
func (c *corpus) postings(t string) ([]uint64, error) { return c.Postings[t], nil }

// line is program doc's newest line.
func (c *corpus) line(doc uint32) ([]byte, error) {
	start := uint32(0)
	if doc > 0 {
		start = c.Ends[doc-1]
	}
	return c.Lines[start:c.Ends[doc]], nil
}

// builder makes a corpus from entries. Each program's newest line goes to
// lines as it is added (a snapshot file, as build writes it), so that what
// the builder holds is the terms, their postings and the lengths: counted
// in held, which add keeps under maxHeld.
type builder struct {
	c        corpus
	lines    io.Writer
	linesLen int64
	stems    map[string]string
	buf      []string
	sums     [nFields]float64
	held     int64
	maxHeld  int64
}

// Estimates of what the builder holds, for MaxHeld: a map entry with its
// string and slice headers, and one posting, a program's ends and lens.
const (
	heldEntry   = 64
	heldPosting = 8
	heldProgram = 4 + 2*nFields
)

// errHeld: adding a program would take the builder past its maxHeld.
var errHeld = errors.New("past the memory bound")

// errUnlistable: a line read well is refused once written again, as a line
// of under MaxLine can come out over it (each byte that is not UTF-8 becomes
// three of U+FFFD): that file is skipped, as a line too long is.
var errUnlistable = errors.New("its newest line cannot be listed")

// newBuilder makes a builder whose lines go to lines.
func newBuilder(lines io.Writer) *builder {
	return &builder{c: corpus{Postings: map[string][]uint64{}}, lines: lines, stems: map[string]string{}, maxHeld: MaxHeld}
}

// add lists e, which is a program's newest line, unless that takes what
// the builder holds, with extra more, past maxHeld (errHeld): then nothing
// of e is added.
func (b *builder) add(e *Entry, extra int64) error {
	line, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", errUnlistable, err)
	}
	line = line[:len(line)-1]
	if b.linesLen+int64(len(line)) > math.MaxUint32 {
		return errHeld // Ends are 32-bit; MaxRead keeps the lines far below
	}
	counts := map[string]*[nFields]uint8{}
	var lens [nFields]int
	for f, text := range b.fieldTexts(e) {
		b.buf = b.terms(text, b.buf[:0])
		lens[f] = len(b.buf)
		for _, t := range b.buf {
			c := counts[t]
			if c == nil {
				c = new([nFields]uint8)
				counts[t] = c
			}
			if c[f] < maxTF {
				c[f]++
			}
		}
	}
	cost := extra + heldProgram + heldPosting*int64(len(counts))
	for t := range counts {
		if _, ok := b.c.Postings[t]; !ok {
			cost += heldEntry + int64(len(t))
		}
	}
	if b.held+cost > b.maxHeld {
		return errHeld
	}
	b.held += cost
	if _, err := b.lines.Write(line); err != nil {
		return err
	}
	doc := uint64(b.c.len())
	b.linesLen += int64(len(line))
	b.c.Ends = append(b.c.Ends, uint32(b.linesLen))
	for f, n := range lens {
		b.c.Lens = append(b.c.Lens, uint16(min(n, math.MaxUint16)))
		b.sums[f] += float64(n)
	}
	for t, c := range counts {
		p := doc << 32
		for f := range nFields {
			p |= uint64(c[f]) << (8 * f)
		}
		b.c.Postings[t] = append(b.c.Postings[t], p)
	}
	return nil
}

// terms is terms with the builder's cache of stems, whose growth counts in
// held: a hostile index's words are all distinct.
func (b *builder) terms(text string, out []string) []string {
	before := len(b.stems)
	out = terms(text, b.stems, out)
	if grown := len(b.stems) - before; grown > 0 {
		b.held += int64(grown) * (heldEntry + 2*maxToken)
	}
	return out
}

// fieldTexts is the text of each field of e.
func (b *builder) fieldTexts(e *Entry) [nFields]string {
	var out [nFields]string
	if repo, _, err := splitReference(e.Reference); err == nil {
		if _, path, ok := strings.Cut(repo, "/"); ok {
			out[fieldName] = path // the host would match every program of it
		}
	}
	var names, descs strings.Builder
	for _, t := range e.Tools {
		names.WriteString(t.Name)
		names.WriteByte(' ')
		descs.WriteString(t.Description)
		descs.WriteByte('\n')
	}
	out[fieldTools] = names.String()
	out[fieldUsage] = e.Usage
	out[fieldDescription] = descs.String()
	return out
}

// corpus is what was added; its Lines only when they went to a
// bytes.Buffer (a corpus in memory).
func (b *builder) corpus() *corpus {
	if buf, ok := b.lines.(*bytes.Buffer); ok {
		b.c.Lines = buf.Bytes()
	}
	if n := b.c.len(); n > 0 {
		for f := range nFields {
			b.c.Avg[f] = b.sums[f] / float64(n)
		}
	}
	return &b.c
}

// Hit is a program a search found.
type Hit struct {
	Entry
	Score float64 `json:"score"`
}

// search ranks the programs of c against query with BM25F and returns the
// best limit (all when limit <= 0), best first; equal scores in the index's
// order, which is its files' paths'.
func search(c searchable, query string, limit int) ([]Hit, error) {
	r, err := c.reader()
	if err != nil {
		return nil, err
	}
	defer r.close()
	avg := c.averages()
	n := float64(c.len())
	seen := map[string]bool{}
	scores := map[uint32]float64{}
	for _, t := range terms(query, nil, nil) {
		if seen[t] {
			continue
		}
		if len(seen) == MaxQueryTerms {
			break
		}
		seen[t] = true
		postings, err := r.postings(t)
		if err != nil {
			return nil, err
		}
		if len(postings) == 0 {
			continue
		}
		df := float64(len(postings))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range postings {
			doc := uint32(p >> 32)
			tf := 0.0
			for f := range nFields {
				count := float64(uint8(p >> (8 * f)))
				if count == 0 {
					continue
				}
				norm := 1.0
				if avg[f] > 0 {
					norm = 1 - bm25B + bm25B*float64(r.length(doc, f))/avg[f]
				}
				tf += fieldWeights[f] * count / norm
			}
			scores[doc] += idf * tf / (bm25K1 + tf)
		}
	}
	type scored struct {
		doc   uint32
		score float64
	}
	ranked := make([]scored, 0, len(scores))
	for doc, s := range scores {
		ranked = append(ranked, scored{doc: doc, score: s})
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].score != ranked[j].score {
			return ranked[i].score > ranked[j].score
		}
		return ranked[i].doc < ranked[j].doc
	})
	if limit > 0 && len(ranked) > limit {
		ranked = ranked[:limit]
	}
	hits := make([]Hit, len(ranked))
	for i, s := range ranked {
		line, err := r.line(s.doc)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(line, &hits[i].Entry); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err) // it was written as JSON: damaged
		}
		hits[i].Entry.normalize()
		hits[i].Score = math.Round(s.score*1e4) / 1e4
	}
	return hits, nil
}
