// Command files is berm's example of the directory grant: it reads, lists
// and searches the files of the directories its deployment grants, and
// writes in those granted read-write, with Go's os package over WASI:
//
//	berm deploy --example files --allow-dir ./notes:/notes
//
// It sees the host's ./notes at /notes, and nothing else: a path outside
// every granted directory is refused here, with a message that names the
// granted ones, and the host refuses whatever gets past (a symbolic link
// out of the directory, a write through a read-only grant).
//
// It is built as a wasip1 reactor (see examples/README.md); its tools are
// methods of files, so that they test on the host over a temporary
// directory.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

// main never runs: a reactor's host calls its tools, after _initialize.
func main() {}

// Bounds of what one call reads and returns.
const (
	// maxRead bounds a file read returns whole.
	maxRead = 1 << 20
	// maxEntries bounds the entries list returns.
	maxEntries = 1000
	// Bounds of search: matches returned, bytes and files read, entries
	// walked, the longest line read and the part of a line returned.
	defaultMatches = 50
	maxMatches     = 500
	maxScan        = 64 << 20
	maxFiles       = 10000
	maxWalk        = 100000
	maxLine        = 1 << 20
	maxShown       = 300
)

// files is the file system a deployment grants: roots are its directories,
// absolute as the program sees them.
type files struct {
	roots []string
}

// resolve makes p absolute and clean (a relative path starts at the
// working directory: the first granted directory unless the deployment
// sets another), and refuses it unless it lies in a granted directory.
// Go's os on wasip1 picks a directory by the path's string prefix, so
// /database would reach into a grant of /data: the check is by path
// element.
func (f files) resolve(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("path is empty: give a path in a granted directory (%s)", f.granted())
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	for _, r := range f.roots {
		r = filepath.Clean(r)
		if abs == r || strings.HasPrefix(abs, strings.TrimSuffix(r, string(filepath.Separator))+string(filepath.Separator)) {
			return abs, nil
		}
	}
	if len(f.roots) == 0 {
		return "", errors.New("this deployment grants no directory: there are no files to reach (berm deploy --allow-dir HOST:GUEST grants one)")
	}
	return "", fmt.Errorf("%s is outside the directories this deployment grants (%s): give a path in one of them", p, f.granted())
}

// granted names the granted directories for a message.
func (f files) granted() string {
	if len(f.roots) == 0 {
		return "none"
	}
	return strings.Join(f.roots, ", ")
}

// explain turns an error of os into a message that says what to do.
func explain(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file or directory: list its directory to see what is there", p)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s: the directory is granted read-only: writing needs a read-write grant (--allow-dir HOST:GUEST:rw)", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: not permitted (a symbolic link out of the granted directory, or the host's permissions)", p)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s is a directory", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", p, pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %w", p, err)
}

type readArgs struct {
	Path string `json:"path"`
}

// read returns a file's text whole, up to maxRead.
func (f files) read(a readArgs) (string, error) {
	p, err := f.resolve(a.Path)
	if err != nil {
		return "", err
	}
	// Stat first: opening a FIFO would wait for a writer.
	info, err := os.Stat(p)
	if err != nil {
		return "", explain(a.Path, err)
	}
	switch {
	case info.IsDir():
		return "", fmt.Errorf("%s is a directory: list it, or read a file in it", a.Path)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s)", a.Path, info.Mode().Type())
	case info.Size() > maxRead:
		return "", overRead(a.Path, info.Size())
	}
	file, err := os.Open(p)
	if err != nil {
		return "", explain(a.Path, err)
	}
	defer file.Close()
	// Bounded again: the file may have grown since.
	b, err := io.ReadAll(io.LimitReader(file, maxRead+1))
	if err != nil {
		return "", explain(a.Path, err)
	}
	if len(b) > maxRead {
		return "", overRead(a.Path, int64(len(b)))
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not UTF-8 text (%d bytes): read returns text only", a.Path, len(b))
	}
	return string(b), nil
}

func overRead(p string, size int64) error {
	return fmt.Errorf("%s is %d bytes, over the %d (1 MiB) that read returns: search finds the lines you need in it", p, size, maxRead)
}

type listArgs struct {
	Path string `json:"path"`
}

type entry struct {
	Name string `json:"name"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	// Size is a file's size in bytes.
	Size int64 `json:"size,omitempty"`
}

type listResult struct {
	Path    string  `json:"path"`
	Entries []entry `json:"entries"`
	// Truncated says the directory holds more than maxEntries: Entries are
	// the first the directory gave, sorted.
	Truncated bool `json:"truncated,omitempty"`
}

// list lists a directory; with no path, the granted directories.
func (f files) list(a listArgs) (listResult, error) {
	if a.Path == "" {
		r := listResult{Entries: []entry{}}
		for _, root := range f.roots {
			r.Entries = append(r.Entries, entry{Name: root, Type: "dir"})
		}
		return r, nil
	}
	p, err := f.resolve(a.Path)
	if err != nil {
		return listResult{}, err
	}
	info, err := os.Stat(p)
	if err != nil {
		return listResult{}, explain(a.Path, err)
	}
	if !info.IsDir() {
		return listResult{}, fmt.Errorf("%s is not a directory (%d bytes): read it instead", a.Path, info.Size())
	}
	dir, err := os.Open(p)
	if err != nil {
		return listResult{}, explain(a.Path, err)
	}
	defer dir.Close()
	// Bounded: a directory may hold millions of entries.
	des, err := dir.ReadDir(maxEntries + 1)
	if err != nil && err != io.EOF {
		return listResult{}, explain(a.Path, err)
	}
	r := listResult{Path: a.Path, Entries: make([]entry, 0, len(des))}
	if len(des) > maxEntries {
		des, r.Truncated = des[:maxEntries], true
	}
	for _, de := range des {
		e := entry{Name: de.Name(), Type: "other"}
		switch t := de.Type(); {
		case t.IsDir():
			e.Type = "dir"
		case t&fs.ModeSymlink != 0:
			e.Type = "symlink"
		case t.IsRegular():
			e.Type = "file"
			if info, err := de.Info(); err == nil {
				e.Size = info.Size()
			}
		}
		r.Entries = append(r.Entries, e)
	}
	slices.SortFunc(r.Entries, func(x, y entry) int { return strings.Compare(x.Name, y.Name) })
	return r, nil
}

type searchArgs struct {
	Path       string `json:"path"`
	Text       string `json:"text"`
	IgnoreCase bool   `json:"ignore_case"`
	MaxResults int    `json:"max_results"`
}

type match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	// Text is the line, cut at maxShown bytes.
	Text string `json:"text"`
}

type searchResult struct {
	Matches []match `json:"matches"`
	// Files is how many text files were searched.
	Files int `json:"files"`
	// Truncated says the search stopped at a bound before the end, and
	// Stopped which one.
	Truncated bool   `json:"truncated,omitempty"`
	Stopped   string `json:"stopped,omitempty"`
}

// search finds the lines that hold a text, in a file or in the text files
// under a directory, within bounds.
func (f files) search(a searchArgs) (searchResult, error) {
	if a.Text == "" {
		return searchResult{}, errors.New(`text is empty: say what to look for, as in {"path": "/notes", "text": "TODO"}`)
	}
	if strings.ContainsAny(a.Text, "\n\r") {
		return searchResult{}, errors.New("text holds a line break: search looks within one line")
	}
	p, err := f.resolve(a.Path)
	if err != nil {
		return searchResult{}, err
	}
	if _, err := os.Stat(p); err != nil {
		return searchResult{}, explain(a.Path, err)
	}
	want := a.MaxResults
	if want <= 0 {
		want = defaultMatches
	}
	s := &searcher{text: []byte(a.Text), fold: a.IgnoreCase, want: min(want, maxMatches), r: searchResult{Matches: []match{}}}
	if s.fold {
		s.text = bytes.ToLower(s.text)
	}
	walked := 0
	filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if walked++; walked > maxWalk {
			return s.stop(fmt.Sprintf("walked %d entries", maxWalk))
		}
		// An entry that cannot be read is passed over, not the search; so
		// are symbolic links, which are not followed.
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if s.r.Files == maxFiles {
			return s.stop(fmt.Sprintf("searched %d files", maxFiles))
		}
		return s.file(path)
	})
	return s.r, nil
}

type searcher struct {
	text    []byte
	fold    bool
	want    int
	scanned int64
	r       searchResult
}

func (s *searcher) stop(why string) error {
	s.r.Truncated, s.r.Stopped = true, why
	return filepath.SkipAll
}

// file searches one file; it returns filepath.SkipAll once a bound is met.
func (s *searcher) file(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	// A NUL byte near the start says the file is not text.
	if head, _ := br.Peek(512); bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	s.r.Files++
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if s.scanned += int64(len(line)) + 1; s.scanned > maxScan {
			return s.stop(fmt.Sprintf("read %d bytes", maxScan))
		}
		hay := line
		if s.fold {
			hay = bytes.ToLower(line)
		}
		if !bytes.Contains(hay, s.text) {
			continue
		}
		if len(s.r.Matches) == s.want {
			return s.stop(fmt.Sprintf("found %d matches", s.want))
		}
		s.r.Matches = append(s.r.Matches, match{Path: path, Line: n, Text: shown(line)})
	}
	// A line over maxLine ends the file's search (sc.Err), not the search.
	return nil
}

// shown is a line as a match returns it: no carriage return, at most
// maxShown bytes, cut on a character's boundary, and valid UTF-8.
func shown(line []byte) string {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxShown {
		line = line[:maxShown]
		for i := 0; i < utf8.UTFMax && len(line) > 0 && !utf8.Valid(line); i++ {
			line = line[:len(line)-1]
		}
	}
	return strings.ToValidUTF8(string(line), "\uFFFD")
}

type writeArgs struct {
	Path   string `json:"path"`
	Text   string `json:"text"`
	Append bool   `json:"append"`
}

// write creates or replaces a file with a text, or appends it, in a
// directory granted read-write.
func (f files) write(a writeArgs) (string, error) {
	p, err := f.resolve(a.Path)
	if err != nil {
		return "", err
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if a.Append {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	file, err := os.OpenFile(p, flag, 0o644)
	if err != nil {
		return "", explain(a.Path, err)
	}
	n, err := file.WriteString(a.Text)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", explain(a.Path, err)
	}
	if a.Append {
		return fmt.Sprintf("appended %d bytes to %s", n, a.Path), nil
	}
	return fmt.Sprintf("wrote %d bytes to %s", n, a.Path), nil
}
