package index

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	orasregistry "oras.land/oras-go/v2/registry"
)

// Bounds of what an index may hold. A reader skips a line or a file past
// them with a warning; Publish refuses to write one.
const (
	// MaxLine is the largest line, newline excluded: a program's usage and
	// its tools' descriptions, with room to spare.
	MaxLine = 64 << 10
	// MaxFile is the largest file: well over a thousand versions of one
	// program. A file past it is skipped whole, since its newest lines are
	// at its end.
	MaxFile = 8 << 20
	// maxFiles bounds the files of one index that are read.
	maxFiles = 1 << 20
)

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
		return nil, fmt.Errorf("%s: a line of %d bytes, over the index's bound of %d: %w", e.Reference, b.Len()-1, MaxLine, ErrInvalid)
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
		return fmt.Sprintf("%s: skipped: %s", w.File, w.Err)
	}
	return fmt.Sprintf("%s:%d: skipped: %s", w.File, w.Line, w.Err)
}

// Parse reads the lines of one file of an index, named file (its path in
// the index), in order. Lines that are over MaxLine, that do not parse or
// that the file may not hold are skipped, each with a warning; blank lines
// are skipped without one. A file over MaxFile is not read.
func Parse(file string, data []byte) ([]Entry, []Warning) {
	if err := checkPath(file); err != nil {
		return nil, []Warning{{File: file, Err: err.Error()}}
	}
	if len(data) > MaxFile {
		return nil, []Warning{{File: file, Err: fmt.Sprintf("%d bytes, over the bound of %d", len(data), MaxFile)}}
	}
	var entries []Entry
	var warnings []Warning
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > MaxLine {
			warnings = append(warnings, Warning{file, n, fmt.Sprintf("%d bytes, over the bound of %d", len(line), MaxLine)})
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			warnings = append(warnings, Warning{file, n, "not JSON: " + err.Error()})
			continue
		}
		if err := e.check(file); err != nil {
			warnings = append(warnings, Warning{file, n, err.Error()})
			continue
		}
		e.normalize()
		entries = append(entries, e)
	}
	return entries, warnings
}
