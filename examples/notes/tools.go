// Command notes is berm's example of a program that keeps data: short notes,
// with titles and tags, in the program's own key-value store. It is written
// as `berm new` writes a program: the tools are plain functions registered
// in init, and `berm build` derives the manifest from the registrations and
// writes the exports (see examples/README.md).
//
// The store holds one key per note ("note/<id>", the note as JSON) and an
// index ("index": the next id, and each note's id, title and tags), which
// list reads without reading the notes. A note is written before the index
// that lists it, so that a call that fails between the two leaves nothing
// listed that is not there (and the id is used again). The store has no
// transactions: two calls that add or delete at the same moment can lose
// one's change to the index.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	berm "github.com/berm-dev/berm/sdk"
)

// Bounds of what the program keeps: the index of maxNotes notes, at most
// ~720 bytes each, stays under the store's 1 MiB a value.
const (
	maxNotes   = 1000
	maxTitle   = 100      // characters
	maxText    = 16 << 10 // bytes
	maxTags    = 8
	maxTag     = 32 // characters of [a-z0-9-]
	maxQuery   = 200
	maxMatches = 50
	maxLine    = 200 // characters of a match's line
)

func init() {
	berm.Usage("**notes** keeps short notes (a title, a text, tags) that outlive the conversation, in this program's own store. " +
		"Reach for it when the user asks you to remember something, or to recall, find or drop what was noted before.\n\n" +
		"It keeps up to 1000 notes, each a title of up to 100 characters, a text of up to 16 KiB and up to 8 tags. " +
		"Notes are numbered from 1 and a number is never used again once its note is deleted.")
	berm.Syscalls("berm.get", "berm.set", "berm.delete", "berm.now")
	berm.Tool("add", "Adds a note and returns its id. Reach for it when the user asks you to remember, note or write down something.", addTool)
	berm.Tool("list", "Lists the notes' ids, titles and tags, oldest first, or only those with a tag. Reach for it to see what is noted before get or delete.", listTool)
	berm.Tool("get", "Returns a note: its title, text, tags and when it was added. Reach for it to read a note whose id list or search gave.", getTool)
	berm.Tool("search", "Finds the notes whose title or text holds a text, ignoring case, with the first line that holds it (up to 50 notes). Reach for it to recall what was noted about something.", searchTool)
	berm.Tool("delete", "Deletes a note for good. Reach for it when the user says a note is done or wrong.", deleteTool)
}

// main never runs: the host calls the tools, after package initialization.
func main() {}

// AddArgs are add's arguments.
type AddArgs struct {
	Title string   `json:"title" jsonschema:"a short title on one line, up to 100 characters"`
	Text  string   `json:"text,omitempty" jsonschema:"the note itself, up to 16 KiB"`
	Tags  []string `json:"tags,omitempty" jsonschema:"up to 8 tags to find it by, each 1 to 32 characters of a-z, 0-9 and -"`
}

// IDArgs are the arguments of get and delete.
type IDArgs struct {
	ID int `json:"id" jsonschema:"the note's id, as add, list and search give it"`
}

// ListArgs are list's arguments.
type ListArgs struct {
	Tag string `json:"tag,omitempty" jsonschema:"only the notes with this tag"`
}

// SearchArgs are search's arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"the text to find in titles and texts, ignoring case, up to 200 characters"`
}

// Note is a note as the store keeps it and get returns it.
type Note struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Text    string   `json:"text"`
	Tags    []string `json:"tags"`
	Created string   `json:"created"` // RFC 3339, UTC
}

// Entry is a note in the index, and in what list and search return.
type Entry struct {
	ID    int      `json:"id"`
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
	// Line is, in search's result, the first line that holds the query.
	Line string `json:"line,omitempty"`
}

// Added is add's result.
type Added struct {
	ID    int `json:"id"`
	Notes int `json:"notes"` // how many notes there are now
}

// Listed is the result of list and search.
type Listed struct {
	Notes []Entry `json:"notes"`
	// Truncated is set when search found more than maxMatches.
	Truncated bool `json:"truncated,omitempty"`
}

// Deleted is delete's result.
type Deleted struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Notes int    `json:"notes"` // how many notes are left
}

// index is what the store keeps under indexKey.
type index struct {
	Next  int     `json:"next"` // the id of the next note added
	Notes []Entry `json:"notes"`
}

const indexKey = "index"

func noteKey(id int) string { return "note/" + strconv.Itoa(id) }

func addTool(a AddArgs) (Added, error) {
	title, err := checkTitle(a.Title)
	if err != nil {
		return Added{}, err
	}
	if len(a.Text) > maxText {
		return Added{}, fmt.Errorf("text is %d bytes, over %d (16 KiB): split it into several notes", len(a.Text), maxText)
	}
	tags, err := checkTags(a.Tags)
	if err != nil {
		return Added{}, err
	}
	idx, err := readIndex()
	if err != nil {
		return Added{}, err
	}
	if len(idx.Notes) >= maxNotes {
		return Added{}, fmt.Errorf("there are %d notes, the most this program keeps: delete some first (list shows them)", len(idx.Notes))
	}
	n := Note{ID: idx.Next, Title: title, Text: a.Text, Tags: tags, Created: berm.Now().UTC().Format(time.RFC3339)}
	b, err := json.Marshal(n)
	if err != nil {
		return Added{}, err
	}
	if err := berm.Set(noteKey(n.ID), b); err != nil {
		return Added{}, fmt.Errorf("the store refused the note: %w", err)
	}
	idx.Notes = append(idx.Notes, Entry{ID: n.ID, Title: n.Title, Tags: n.Tags})
	idx.Next++
	if err := writeIndex(idx); err != nil {
		return Added{}, err
	}
	return Added{ID: n.ID, Notes: len(idx.Notes)}, nil
}

func listTool(a ListArgs) (Listed, error) {
	tag := strings.ToLower(strings.TrimSpace(a.Tag))
	idx, err := readIndex()
	if err != nil {
		return Listed{}, err
	}
	out := Listed{Notes: []Entry{}}
	for _, e := range idx.Notes {
		if tag == "" || slices.Contains(e.Tags, tag) {
			out.Notes = append(out.Notes, e)
		}
	}
	return out, nil
}

func getTool(a IDArgs) (Note, error) {
	idx, err := readIndex()
	if err != nil {
		return Note{}, err
	}
	if _, ok := find(idx, a.ID); !ok {
		return Note{}, noSuchNote(a.ID)
	}
	return readNote(a.ID)
}

func searchTool(a SearchArgs) (Listed, error) {
	query := strings.TrimSpace(a.Query)
	if query == "" {
		return Listed{}, errors.New(`query is empty: give the text to find, as in {"query": "milk"}`)
	}
	if n := utf8.RuneCountInString(query); n > maxQuery {
		return Listed{}, fmt.Errorf("query is %d characters, over %d: search for a shorter part of it", n, maxQuery)
	}
	q := strings.ToLower(query)
	idx, err := readIndex()
	if err != nil {
		return Listed{}, err
	}
	out := Listed{Notes: []Entry{}}
	for _, e := range idx.Notes {
		n, err := readNote(e.ID)
		if err != nil {
			return Listed{}, err
		}
		line, ok := matchLine(n, q)
		if !ok {
			continue
		}
		if len(out.Notes) == maxMatches {
			out.Truncated = true
			break
		}
		e.Line = line
		out.Notes = append(out.Notes, e)
	}
	return out, nil
}

func deleteTool(a IDArgs) (Deleted, error) {
	idx, err := readIndex()
	if err != nil {
		return Deleted{}, err
	}
	i, ok := find(idx, a.ID)
	if !ok {
		return Deleted{}, noSuchNote(a.ID)
	}
	e := idx.Notes[i]
	idx.Notes = slices.Delete(idx.Notes, i, i+1)
	// The index first: a note the index no longer lists is never read, and
	// its id is never given again.
	if err := writeIndex(idx); err != nil {
		return Deleted{}, err
	}
	berm.Delete(noteKey(e.ID))
	return Deleted{ID: e.ID, Title: e.Title, Notes: len(idx.Notes)}, nil
}

func noSuchNote(id int) error {
	return fmt.Errorf("no note %d: list or search gives the ids of the notes there are", id)
}

// checkTitle returns the title trimmed, or why it is refused.
func checkTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	switch n := utf8.RuneCountInString(title); {
	case n == 0:
		return "", errors.New(`title is empty: give the note a short title, as in {"title": "Call Ada", "text": "about the report"}`)
	case n > maxTitle:
		return "", fmt.Errorf("title is %d characters, over %d: shorten it and put the rest in text", n, maxTitle)
	}
	if strings.IndexFunc(title, unicode.IsControl) >= 0 {
		return "", errors.New("title holds a line break or another control character: keep it to one line and put the rest in text")
	}
	return title, nil
}

// checkTags returns the tags in lower case without repeats, or why they
// are refused.
func checkTags(tags []string) ([]string, error) {
	out := []string{}
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if !validTag(t) {
			return nil, fmt.Errorf("tag %q: a tag is 1 to %d characters of a-z, 0-9 and -", t, maxTag)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > maxTags {
		return nil, fmt.Errorf("%d tags, over %d: keep the ones the note will be looked for by", len(out), maxTags)
	}
	return out, nil
}

func validTag(t string) bool {
	if t == "" || len(t) > maxTag {
		return false
	}
	for _, r := range t {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// matchLine reports whether the note's title or text holds q (in lower
// case), and the first line that does, cut to maxLine characters.
func matchLine(n Note, q string) (string, bool) {
	if strings.Contains(strings.ToLower(n.Title), q) {
		return cut(n.Title), true
	}
	for line := range strings.Lines(n.Text) {
		if strings.Contains(strings.ToLower(line), q) {
			return cut(strings.TrimSpace(line)), true
		}
	}
	return "", false
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxLine {
		return s
	}
	r := []rune(s)
	return string(r[:maxLine-1]) + "…"
}

func find(idx index, id int) (int, bool) {
	return slices.BinarySearchFunc(idx.Notes, id, func(e Entry, id int) int { return e.ID - id })
}

// readIndex reads the index; with no notes ever added there is none.
func readIndex() (index, error) {
	b, ok := berm.Get(indexKey)
	if !ok {
		return index{Next: 1, Notes: []Entry{}}, nil
	}
	var idx index
	if err := json.Unmarshal(b, &idx); err != nil || idx.Next < 1 {
		return index{}, fmt.Errorf("the stored index of notes is damaged (%q is not what this program writes): the notes cannot be read", firstBytes(b))
	}
	return idx, nil
}

func writeIndex(idx index) error {
	b, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	if err := berm.Set(indexKey, b); err != nil {
		return fmt.Errorf("the store refused the index of notes: %w", err)
	}
	return nil
}

func readNote(id int) (Note, error) {
	b, ok := berm.Get(noteKey(id))
	if !ok {
		return Note{}, fmt.Errorf("note %d is listed but not stored: delete it and add it again", id)
	}
	var n Note
	if err := json.Unmarshal(b, &n); err != nil {
		return Note{}, fmt.Errorf("note %d is damaged in the store (%q is not what this program writes): delete it", id, firstBytes(b))
	}
	return n, nil
}

func firstBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
