package index

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	orasregistry "oras.land/oras-go/v2/registry"
)

// Bounds of what an index may hold, so that reading someone else's index
// costs a bounded memory, disk and time whatever it holds. A reader skips a
// line or a file past them with a warning naming the bound; Publish refuses
// to write one.
const (
	// MaxLine is the largest line, newline excluded: a program's usage and
	// its tools' descriptions, with room to spare.
	MaxLine = 64 << 10
	// MaxFile is the largest file: well over a thousand versions of one
	// program. A file past it is skipped whole, since its newest lines are
	// at its end.
	MaxFile = 8 << 20
	// MaxLines is the most lines a file may have, blank ones included: a
	// file of short junk lines costs as much to read as its lines, not its
	// bytes. Past it the file is skipped whole, as past MaxFile.
	MaxLines = 10000
	// MaxFiles is the most listings (files ending in Ext) an index may
	// have: twice the largest index benchmarked. The files past it, in
	// the tree's order, are skipped.
	MaxFiles = 200000
	// MaxRead is the most bytes of listings read from one index, in all:
	// what bounds the time a hostile index takes to read, and the newest
	// lines a snapshot stores. The files past it are skipped.
	MaxRead = 1 << 30
	// MaxHeld is the most memory reading an index keeps while it builds
	// its snapshot, as estimated: the programs' terms and postings, and a
	// pin of every version. 100,000 generated programs hold 55 MiB. The
	// files past it are skipped.
	MaxHeld = 128 << 20
	// MaxWarnings is how many warnings an index keeps; the rest are
	// counted (Index.Skipped).
	MaxWarnings = 100
)

// maxWarningFile bounds the file name a warning keeps: a tree entry's
// name can be as long as its tree.
const maxWarningFile = 256

// Ext is the extension of every file of the index that lists a program.
const Ext = ".jsonl"

// Entry is one line of the index: one published version of a program.
type Entry struct {
	// Reference is host/repository:tag, without digest.
	Reference string `json:"reference"`
	// Digest is the OCI manifest's digest: Reference@Digest pins it.
	Digest string `json:"digest"`
	// Layer is the digest of the program's single layer, the sha256 of the
	// wasm file: what `berm ls` prints and what a deployment records.
	Layer string `json:"layer"`
	// Publisher is who published the line, as they claim: nothing checks it.
	Publisher string    `json:"publisher"`
	Published time.Time `json:"published"`
	// Usage, Tools, Syscalls and Calls are the program's manifest's: when to
	// reach for it, what it offers, what it says it will reach for.
	Usage    string   `json:"usage"`
	Tools    []Tool   `json:"tools"`
	Syscalls []string `json:"syscalls"`
	Calls    []string `json:"calls"`
}

// Tool is a tool of a listed program.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Pinned is the reference pinned by manifest digest, which `berm deploy`
// takes: host/repo:tag@sha256:...
func (e *Entry) Pinned() string { return e.Reference + "@" + e.Digest }

// Marshal is the entry as one line of the index, newline included.
func (e *Entry) Marshal() ([]byte, error) {
	c := *e
	c.normalize()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// The index is read by people too: "<" stays "<".
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	if b.Len()-1 > MaxLine {
		return nil, fmt.Errorf("%s: a line of %s, past the limit of %s a line: %w", e.Reference, size(int64(b.Len()-1)), size(MaxLine), ErrInvalid)
	}
	return b.Bytes(), nil
}

// normalize makes absent lists empty, so that JSON shows [] and not null.
func (e *Entry) normalize() {
	if e.Tools == nil {
		e.Tools = []Tool{}
	}
	if e.Syscalls == nil {
		e.Syscalls = []string{}
	}
	if e.Calls == nil {
		e.Calls = []string{}
	}
	e.Published = e.Published.UTC()
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// check refuses an entry that a file at file may not hold.
func (e *Entry) check(file string) error {
	repo, tag, err := splitReference(e.Reference)
	if err != nil {
		return err
	}
	if tag == "" {
		return fmt.Errorf("reference %q: no tag", e.Reference)
	}
	want, err := Path(repo)
	if err != nil {
		return err
	}
	if want != file {
		// Otherwise any file could list any program.
		return fmt.Errorf("reference %q belongs in %s, not here", e.Reference, want)
	}
	if !digestRE.MatchString(e.Digest) {
		return fmt.Errorf("digest %q: want sha256:<64 hex digits>", e.Digest)
	}
	if !digestRE.MatchString(e.Layer) {
		return fmt.Errorf("layer %q: want sha256:<64 hex digits>", e.Layer)
	}
	if e.Published.IsZero() {
		return fmt.Errorf("published: missing")
	}
	for i, t := range e.Tools {
		if t.Name == "" {
			return fmt.Errorf("tools[%d]: no name", i)
		}
	}
	return nil
}

// splitReference parses host/repo:tag into host/repo and tag, refusing a
// digest: an index line names a tag, and pins it with its digest field.
func splitReference(ref string) (repo, tag string, err error) {
	if strings.Contains(ref, "@") {
		return "", "", fmt.Errorf("reference %q: a digest in the reference (the index keeps it apart): %w", ref, ErrReference)
	}
	r, err := orasregistry.ParseReference(ref)
	if err != nil {
		return "", "", fmt.Errorf("reference %q: %w", ref, ErrReference)
	}
	return r.Registry + "/" + r.Repository, r.Reference, nil
}

// windowsReserved are the file names Windows refuses, whatever the
// extension: an index must check out on every OS.
var windowsReserved = map[string]bool{
	"con": true, "prn": true, "aux": true, "nul": true,
	"com1": true, "com2": true, "com3": true, "com4": true, "com5": true, "com6": true, "com7": true, "com8": true, "com9": true,
	"lpt1": true, "lpt2": true, "lpt3": true, "lpt4": true, "lpt5": true, "lpt6": true, "lpt7": true, "lpt8": true, "lpt9": true,
}

// Path is the file of the index that lists the repository of reference
// (host/repo, with or without tag or digest): host/repo.jsonl, the host in
// lower case and its port after '_' instead of ':', which Windows refuses in
// a path and no host name contains ("localhost:5000/org/x" is
// "localhost_5000/org/x.jsonl"). An IP v6 host, and a repository with a
// component Windows reserves (con, nul, ...), have no path.
func Path(reference string) (string, error) {
	r, err := orasregistry.ParseReference(reference)
	if err != nil {
		return "", fmt.Errorf("reference %q: %w", reference, ErrReference)
	}
	host := strings.ToLower(r.Registry)
	if strings.HasPrefix(host, "[") {
		return "", fmt.Errorf("reference %q: an IPv6 host has no path in an index: %w", reference, ErrReference)
	}
	host = strings.Replace(host, ":", "_", 1)
	p := host + "/" + r.Repository
	for _, c := range strings.Split(p, "/") {
		if base, _, _ := strings.Cut(c, "."); windowsReserved[base] {
			return "", fmt.Errorf("reference %q: %q is a name Windows reserves: %w", reference, c, ErrReference)
		}
	}
	return p + Ext, nil
}

// checkPath refuses a file path of an index someone else wrote that could
// leave the index, or that no reference maps to.
func checkPath(p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return fmt.Errorf("absolute or not a slash path: %w", ErrPath)
	case p != path.Clean(p):
		return fmt.Errorf("not a clean path: %w", ErrPath)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." || c == "." {
			return fmt.Errorf("%q escapes the index: %w", c, ErrPath)
		}
	}
	host, repo, ok := strings.Cut(strings.TrimSuffix(p, Ext), "/")
	if !ok {
		return fmt.Errorf("no host/repository: %w", ErrPath)
	}
	if i := strings.LastIndex(host, "_"); i >= 0 {
		host = host[:i] + ":" + host[i+1:]
	}
	want, err := Path(host + "/" + repo)
	if err != nil || want != p {
		return fmt.Errorf("not the path of a reference (host/repository%s, the port after '_'): %w", Ext, ErrPath)
	}
	return nil
}

// Warning is a line or file of an index that was skipped, and why.
type Warning struct {
	File string
	// Line is 1-based; 0 means the whole file.
	Line int
	Err  string
}

func (w Warning) String() string {
	if w.Line == 0 {
		return fmt.Sprintf("%s: %s: skipped", w.File, w.Err)
	}
	return fmt.Sprintf("%s:%d: %s: skipped", w.File, w.Line, w.Err)
}

// warning is a Warning with its file's name cut to maxWarningFile bytes.
func warning(file string, line int, err string) Warning {
	if len(file) > maxWarningFile {
		cut := maxWarningFile
		for cut > 0 && !utf8.RuneStart(file[cut]) {
			cut--
		}
		file = file[:cut] + "…"
	}
	return Warning{File: file, Line: line, Err: err}
}

// size is n bytes as a bound is read: 64 KiB, 8 MiB, 9.5 MiB, 65548 bytes.
func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20 && !strings.HasSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0"):
		// Not so near a round size that it reads as one: 8.0 MiB past
		// a limit of 8 MiB.
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// pastFile is why a file over MaxFile is skipped.
func pastFile(n int64) string {
	return fmt.Sprintf("%s, past the limit of %s a file", size(n), size(MaxFile))
}

// lineReader reads the files of an index a line at a time, holding one
// line of at most MaxLine (and a little whitespace): a longer one is
// drained, counted and skipped, never held. One reader serves every file of
// an index, so that each file costs no buffer of its own.
type lineReader struct {
	br *bufio.Reader
}

func newLineReader() *lineReader {
	return &lineReader{br: bufio.NewReaderSize(nil, MaxLine+1<<10)}
}

// scan reads the lines of the file of an index named file (its path in
// the index) from r, in order: it calls entry with each valid one, and skip
// with each line that is over MaxLine, that does not parse or that the file
// may not hold; blank lines are skipped without a word. When the whole file
// must be skipped (past MaxFile or MaxLines), scan stops and says why: the
// entries it gave are then void. err is a read error.
func (lr *lineReader) scan(file string, r io.Reader, entry func(*Entry), skip func(Warning)) (why string, err error) {
	lr.br.Reset(io.LimitReader(r, MaxFile+1))
	defer lr.br.Reset(nil)
	var read int64
	for n := 1; ; n++ {
		line, err := lr.br.ReadSlice('\n')
		drained := 0 // bytes of a line too long to hold
		for errors.Is(err, bufio.ErrBufferFull) {
			drained += len(line)
			line, err = lr.br.ReadSlice('\n')
		}
		read += int64(drained + len(line))
		switch {
		case read > MaxFile:
			return pastFile(read), nil
		case err != nil && err != io.EOF:
			return "", err
		case drained == 0 && len(line) == 0: // the end, after a newline
			return "", nil
		case n > MaxLines:
			return fmt.Sprintf("past the limit of %d lines a file", MaxLines), nil
		}
		last := err == io.EOF
		if drained > 0 {
			skip(warning(file, n, fmt.Sprintf("%s, past the limit of %s a line", size(int64(drained+len(bytes.TrimRight(line, "\r\n")))), size(MaxLine))))
		} else if line = bytes.TrimSpace(line); len(line) > MaxLine {
			skip(warning(file, n, fmt.Sprintf("%s, past the limit of %s a line", size(int64(len(line))), size(MaxLine))))
		} else if len(line) > 0 {
			var e Entry
			if err := json.Unmarshal(line, &e); err != nil {
				skip(warning(file, n, "not JSON: "+err.Error()))
			} else if err := e.check(file); err != nil {
				skip(warning(file, n, err.Error()))
			} else {
				e.normalize()
				entry(&e)
			}
		}
		if last {
			return "", nil
		}
	}
}

// Parse reads the lines of one file of an index, named file (its path in
// the index), in order, as a search reads them: lines that are over
// MaxLine, that do not parse or that the file may not hold are skipped,
// each with a warning; blank lines are skipped without one. A file at a
// path that could leave the index, or past MaxFile or MaxLines, gives no
// entry and a warning for the whole file.
func Parse(file string, data []byte) ([]Entry, []Warning) {
	if err := checkPath(file); err != nil {
		return nil, []Warning{warning(file, 0, err.Error())}
	}
	if len(data) > MaxFile {
		return nil, []Warning{warning(file, 0, pastFile(int64(len(data))))}
	}
	var entries []Entry
	var warnings []Warning
	// No line of data is longer than data: a buffer of its size holds any.
	lr := &lineReader{br: bufio.NewReaderSize(nil, min(len(data), MaxLine)+1<<10)}
	why, _ := lr.scan(file, bytes.NewReader(data),
		func(e *Entry) { entries = append(entries, *e) },
		func(w Warning) { warnings = append(warnings, w) })
	if why != "" {
		return nil, append(warnings, warning(file, 0, why))
	}
	return entries, warnings
}
