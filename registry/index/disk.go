package index

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// The snapshot file: a header, then the corpus's arrays raw, so that a
// search reads the header and the lengths, then only the postings of its
// terms and the lines of its results. Decoding a whole corpus grew with the
// index (a fifth of a second at 100,000 programs); this grows with the
// query.
//
//	magic (8 bytes) | header length (uint64) | header (gob) |
//	ends (uint32 each) | lens (uint16 each) | postings (uint64 each) | lines
//
// Integers are little-endian.
const snapshotMagic = "bermix01"

// header is what a search reads of a snapshot before it ranks.
type header struct {
	Version  int
	Commit   string
	Warnings []Warning
	Avg      [nFields]float64
	N        int
	// Terms, sorted, and the end of each one's postings in the postings
	// section, counted in postings.
	Terms    []string
	TermEnds []uint32
	// Offsets of the sections in the file.
	EndsOff, LensOff, PostingsOff, LinesOff int64
}

// writeSnapshot writes s to path, through a file renamed into place.
func writeSnapshot(path string, s *snapshot) error {
	c := &s.Corpus
	h := header{Version: s.Version, Commit: s.Commit, Warnings: s.Warnings, Avg: c.Avg, N: c.len()}
	for t := range c.Postings {
		h.Terms = append(h.Terms, t)
	}
	sort.Strings(h.Terms)
	var end uint32
	for _, t := range h.Terms {
		end += uint32(len(c.Postings[t]))
		h.TermEnds = append(h.TermEnds, end)
	}
	// The header's size depends on the offsets it holds: encode it once to
	// learn its size with the offsets at their widest, then for real.
	h.EndsOff, h.LensOff, h.PostingsOff, h.LinesOff = -1, -1, -1, -1
	var probe bytes.Buffer
	if err := gob.NewEncoder(&probe).Encode(&h); err != nil {
		return err
	}
	pad := int64(probe.Len()) + 64
	h.EndsOff = int64(len(snapshotMagic)) + 8 + pad
	h.LensOff = h.EndsOff + 4*int64(c.len())
	h.PostingsOff = h.LensOff + 2*int64(len(c.Lens))
	h.LinesOff = h.PostingsOff + 8*int64(end)
	var hb bytes.Buffer
	if err := gob.NewEncoder(&hb).Encode(&h); err != nil {
		return err
	}
	if int64(hb.Len()) > pad {
		return errors.New("snapshot header grew")
	}
	return writeAtomic(path, func(w io.Writer) error {
		buf := make([]byte, 0, 1<<20)
		flush := func() error {
			_, err := w.Write(buf)
			buf = buf[:0]
			return err
		}
		buf = append(buf, snapshotMagic...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(pad))
		buf = append(buf, hb.Bytes()...)
		buf = append(buf, make([]byte, pad-int64(hb.Len()))...)
		for _, e := range c.Ends {
			buf = binary.LittleEndian.AppendUint32(buf, e)
		}
		for _, l := range c.Lens {
			buf = binary.LittleEndian.AppendUint16(buf, l)
		}
		for _, t := range h.Terms {
			for _, p := range c.Postings[t] {
				buf = binary.LittleEndian.AppendUint64(buf, p)
				if len(buf) > 1<<20-8 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		_, err := w.Write(c.Lines)
		return err
	})
}

// diskCorpus is a snapshot file, read as a search needs it.
type diskCorpus struct {
	path string
	h    header
}

// openSnapshot reads the header of the snapshot at path.
func openSnapshot(path string) (*diskCorpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pre [len(snapshotMagic) + 8]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil || string(pre[:len(snapshotMagic)]) != snapshotMagic {
		return nil, errVersion
	}
	n := binary.LittleEndian.Uint64(pre[len(snapshotMagic):])
	if n > 1<<30 {
		return nil, fmt.Errorf("%s: header of %d bytes: %w", path, n, errVersion)
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(f, hb); err != nil {
		return nil, err
	}
	d := &diskCorpus{path: path}
	if err := gob.NewDecoder(bytes.NewReader(hb)).Decode(&d.h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.h.Version != snapshotVersion || len(d.h.Terms) != len(d.h.TermEnds) {
		return nil, errVersion
	}
	return d, nil
}

func (d *diskCorpus) len() int                   { return d.h.N }
func (d *diskCorpus) averages() [nFields]float64 { return d.h.Avg }

// reader opens the file for one search's reads.
func (d *diskCorpus) reader() (ranker, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, err
	}
	lens := make([]byte, 2*d.h.N*nFields)
	if _, err := f.ReadAt(lens, d.h.LensOff); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", d.path, err)
	}
	l := make([]uint16, d.h.N*nFields)
	for i := range l {
		l[i] = binary.LittleEndian.Uint16(lens[2*i:])
	}
	return &diskReader{d: d, f: f, lens: l}, nil
}

type diskReader struct {
	d    *diskCorpus
	f    *os.File
	lens []uint16
}

func (r *diskReader) close()                       { r.f.Close() }
func (r *diskReader) length(doc uint32, f int) int { return int(r.lens[int(doc)*nFields+f]) }

func (r *diskReader) postings(term string) ([]uint64, error) {
	h := &r.d.h
	i := sort.SearchStrings(h.Terms, term)
	if i == len(h.Terms) || h.Terms[i] != term {
		return nil, nil
	}
	start := uint32(0)
	if i > 0 {
		start = h.TermEnds[i-1]
	}
	b := make([]byte, 8*int(h.TermEnds[i]-start))
	if _, err := r.f.ReadAt(b, h.PostingsOff+8*int64(start)); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	p := make([]uint64, len(b)/8)
	for j := range p {
		p[j] = binary.LittleEndian.Uint64(b[8*j:])
	}
	return p, nil
}

func (r *diskReader) line(doc uint32) ([]byte, error) {
	var b [8]byte
	off := r.d.h.EndsOff + 4*int64(doc) - 4
	n := 8
	if doc == 0 {
		off, n = r.d.h.EndsOff, 4
	}
	if _, err := r.f.ReadAt(b[:n], off); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	var start, end uint32
	if doc == 0 {
		end = binary.LittleEndian.Uint32(b[:4])
	} else {
		start, end = binary.LittleEndian.Uint32(b[:4]), binary.LittleEndian.Uint32(b[4:])
	}
	if end < start || end-start > MaxLine {
		return nil, fmt.Errorf("%s: %w", r.d.path, errVersion)
	}
	line := make([]byte, end-start)
	if _, err := r.f.ReadAt(line, r.d.h.LinesOff+int64(start)); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	return line, nil
}
