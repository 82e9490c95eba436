package index

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// The snapshot file: the programs' newest lines first, written as they are
// read, then the arrays raw, then a small header and a trailer that points
// at it. A search reads the trailer, the header and the lengths, then only
// what its terms need: a binary search of the sorted terms on disk, their
// postings and the lines of its results. Nothing it reads grows with the
// index's terms (a hostile index's words are all distinct), and the header
// is bounded: its warnings are the first MaxWarnings.
//
//	magic (8 bytes) | lines | ends (uint32 each) | lens (uint16 each) |
//	postings (uint64 each) | term ends (uint32 each, in postings) |
//	term offsets (uint32 each, the end of each term's bytes) | terms |
//	header (gob) | header offset (uint64) | header length (uint64) | magic
//
// Integers are little-endian.
const snapshotMagic = "bermix03"

const (
	trailerSize = 8 + 8 + len(snapshotMagic)
	// maxHeader bounds the header a search decodes: MaxWarnings warnings
	// of bounded names, and a few numbers.
	maxHeader = 1 << 20
	// maxTerm bounds a term read from disk: terms are stems of words of
	// at most maxToken bytes.
	maxTerm = 4 * maxToken
)

// header is what a search reads of a snapshot before it ranks.
type header struct {
	Version  int
	Commit   string
	Warnings []Warning
	// Skipped counts every line and file skipped, Warnings the first few.
	Skipped int
	Avg     [nFields]float64
	N       int
	Terms   int
	// Offsets of the sections in the file.
	EndsOff, LensOff, PostingsOff, TermEndsOff, TermOffsOff, TermsOff int64
}

// snapshotWriter writes a snapshot file: the lines as they come (Write),
// then the rest (finish), through a temporary file renamed into place.
type snapshotWriter struct {
	path string
	f    *os.File
	w    *bufio.Writer
	off  int64
}

// createSnapshot starts the snapshot file at path.
func createSnapshot(path string) (*snapshotWriter, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return nil, err
	}
	sw := &snapshotWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	if _, err := sw.Write([]byte(snapshotMagic)); err != nil {
		sw.abort()
		return nil, err
	}
	return sw, nil
}

func (sw *snapshotWriter) Write(p []byte) (int, error) {
	n, err := sw.w.Write(p)
	sw.off += int64(n)
	return n, err
}

func (sw *snapshotWriter) u32(v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	_, err := sw.Write(b[:])
	return err
}

// abort removes the temporary file.
func (sw *snapshotWriter) abort() {
	sw.f.Close()
	os.Remove(sw.f.Name())
}

// finish writes c's arrays (its lines went through Write) and h, and
// renames the file into place. h's counts and offsets are finish's.
func (sw *snapshotWriter) finish(h header, c *corpus) (err error) {
	defer func() {
		if err != nil {
			sw.abort()
		}
	}()
	terms := make([]string, 0, len(c.Postings))
	for t := range c.Postings {
		terms = append(terms, t)
	}
	sort.Strings(terms)
	h.N, h.Terms, h.Avg = c.len(), len(terms), c.Avg
	h.EndsOff = sw.off
	for _, e := range c.Ends {
		if err := sw.u32(e); err != nil {
			return err
		}
	}
	h.LensOff = sw.off
	var b [8]byte
	for _, l := range c.Lens {
		binary.LittleEndian.PutUint16(b[:2], l)
		if _, err := sw.Write(b[:2]); err != nil {
			return err
		}
	}
	h.PostingsOff = sw.off
	for _, t := range terms {
		for _, p := range c.Postings[t] {
			binary.LittleEndian.PutUint64(b[:], p)
			if _, err := sw.Write(b[:]); err != nil {
				return err
			}
		}
	}
	h.TermEndsOff = sw.off
	var end uint32
	for _, t := range terms {
		end += uint32(len(c.Postings[t]))
		if err := sw.u32(end); err != nil {
			return err
		}
	}
	h.TermOffsOff = sw.off
	end = 0
	for _, t := range terms {
		end += uint32(len(t))
		if err := sw.u32(end); err != nil {
			return err
		}
	}
	h.TermsOff = sw.off
	for _, t := range terms {
		if _, err := io.WriteString(sw, t); err != nil {
			return err
		}
	}
	var hb bytes.Buffer
	if err := gob.NewEncoder(&hb).Encode(&h); err != nil {
		return err
	}
	if hb.Len() > maxHeader {
		return fmt.Errorf("snapshot header of %d bytes", hb.Len())
	}
	at := sw.off
	if _, err := sw.Write(hb.Bytes()); err != nil {
		return err
	}
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(at))
	binary.LittleEndian.PutUint64(tr[8:], uint64(hb.Len()))
	copy(tr[16:], snapshotMagic)
	if _, err := sw.Write(tr[:]); err != nil {
		return err
	}
	if err := sw.w.Flush(); err != nil {
		return err
	}
	if err := sw.f.Sync(); err != nil {
		return err
	}
	if err := sw.f.Close(); err != nil {
		return err
	}
	return os.Rename(sw.f.Name(), sw.path)
}

// writeSnapshot writes s, whose corpus is in memory, to path.
func writeSnapshot(path string, s *snapshot) error {
	sw, err := createSnapshot(path)
	if err != nil {
		return err
	}
	if _, err := sw.Write(s.Corpus.Lines); err != nil {
		sw.abort()
		return err
	}
	return sw.finish(header{Version: s.Version, Commit: s.Commit, Warnings: s.Warnings, Skipped: s.Skipped}, &s.Corpus)
}

// diskCorpus is a snapshot file, read as a search needs it.
type diskCorpus struct {
	path string
	h    header
}

// openSnapshot reads the trailer and header of the snapshot at path.
func openSnapshot(path string) (*diskCorpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fsize := info.Size()
	var pre [len(snapshotMagic)]byte
	var tr [trailerSize]byte
	if fsize < int64(len(pre)+trailerSize) {
		return nil, errVersion
	}
	if _, err := f.ReadAt(pre[:], 0); err != nil || string(pre[:]) != snapshotMagic {
		return nil, errVersion
	}
	if _, err := f.ReadAt(tr[:], fsize-int64(trailerSize)); err != nil || string(tr[16:]) != snapshotMagic {
		return nil, errVersion
	}
	at, n := int64(binary.LittleEndian.Uint64(tr[0:])), binary.LittleEndian.Uint64(tr[8:])
	if n > maxHeader || at < int64(len(pre)) || at+int64(n) != fsize-int64(trailerSize) {
		return nil, fmt.Errorf("%s: header of %d bytes at %d: %w", path, n, at, errVersion)
	}
	hb := make([]byte, n)
	if _, err := f.ReadAt(hb, at); err != nil {
		return nil, err
	}
	d := &diskCorpus{path: path}
	if err := gob.NewDecoder(bytes.NewReader(hb)).Decode(&d.h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h := &d.h
	if h.Version != snapshotVersion || h.N < 0 || h.Terms < 0 ||
		h.EndsOff != h.LensOff-4*int64(h.N) || h.LensOff != h.PostingsOff-2*int64(h.N)*nFields ||
		h.PostingsOff > h.TermEndsOff || h.TermEndsOff != h.TermOffsOff-4*int64(h.Terms) ||
		h.TermOffsOff != h.TermsOff-4*int64(h.Terms) || h.TermsOff > at || h.EndsOff < int64(len(pre)) {
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

// span reads the start and end of element i of an array of uint32 ends at
// off: where element i begins (the end of i-1, or 0) and ends.
func (r *diskReader) span(off int64, i int) (start, end uint32, err error) {
	var b [8]byte
	if i == 0 {
		_, err = r.f.ReadAt(b[4:], off)
	} else {
		_, err = r.f.ReadAt(b[:], off+4*int64(i-1))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", r.d.path, err)
	}
	start, end = binary.LittleEndian.Uint32(b[:4]), binary.LittleEndian.Uint32(b[4:])
	if end < start {
		return 0, 0, fmt.Errorf("%s: %w", r.d.path, errVersion)
	}
	return start, end, nil
}

// term is the i-th term, in sorted order.
func (r *diskReader) term(i int, buf []byte) ([]byte, error) {
	start, end, err := r.span(r.d.h.TermOffsOff, i)
	if err != nil {
		return nil, err
	}
	if end-start > maxTerm {
		return nil, fmt.Errorf("%s: %w", r.d.path, errVersion)
	}
	buf = buf[:end-start]
	if _, err := r.f.ReadAt(buf, r.d.h.TermsOff+int64(start)); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	return buf, nil
}

func (r *diskReader) postings(term string) ([]uint64, error) {
	// A binary search over the terms on disk, as sort.Search does it.
	buf := make([]byte, maxTerm)
	lo, hi := 0, r.d.h.Terms
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		t, err := r.term(mid, buf)
		if err != nil {
			return nil, err
		}
		if string(t) < term {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == r.d.h.Terms {
		return nil, nil
	}
	if t, err := r.term(lo, buf); err != nil || string(t) != term {
		return nil, err
	}
	start, end, err := r.span(r.d.h.TermEndsOff, lo)
	if err != nil {
		return nil, err
	}
	if int64(end) > (r.d.h.TermEndsOff-r.d.h.PostingsOff)/8 || int(end-start) > r.d.h.N {
		return nil, fmt.Errorf("%s: %w", r.d.path, errVersion)
	}
	b := make([]byte, 8*int(end-start))
	if _, err := r.f.ReadAt(b, r.d.h.PostingsOff+8*int64(start)); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	p := make([]uint64, len(b)/8)
	for j := range p {
		p[j] = binary.LittleEndian.Uint64(b[8*j:])
		if int(p[j]>>32) >= r.d.h.N {
			return nil, fmt.Errorf("%s: %w", r.d.path, errVersion)
		}
	}
	return p, nil
}

func (r *diskReader) line(doc uint32) ([]byte, error) {
	start, end, err := r.span(r.d.h.EndsOff, int(doc))
	if err != nil {
		return nil, err
	}
	if end-start > MaxLine || int64(end) > r.d.h.EndsOff-int64(len(snapshotMagic)) {
		return nil, fmt.Errorf("%s: %w", r.d.path, errVersion)
	}
	line := make([]byte, end-start)
	if _, err := r.f.ReadAt(line, int64(len(snapshotMagic))+int64(start)); err != nil {
		return nil, fmt.Errorf("%s: %w", r.d.path, err)
	}
	return line, nil
}
