//go:build !wasip1

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	berm "github.com/berm-dev/berm/sdk"
)

// call runs the registered tool under h with args, and returns its result,
// or its failure as the error.
func call(t *testing.T, h *berm.FakeHost, tool, args string) (string, error) {
	t.Helper()
	h.Args = []byte(args)
	h.RunTool(tool)
	if h.Failed {
		return "", fmt.Errorf("%s", h.Failure)
	}
	return string(h.Result), nil
}

func must(t *testing.T, h *berm.FakeHost, tool, args string) string {
	t.Helper()
	out, err := call(t, h, tool, args)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return out
}

func fails(t *testing.T, h *berm.FakeHost, tool, args, want string) {
	t.Helper()
	out, err := call(t, h, tool, args)
	if err == nil || err.Error() != want {
		t.Errorf("%s %s = %q, %v; want the failure %q", tool, args, out, err, want)
	}
}

func TestNotes(t *testing.T) {
	h := &berm.FakeHost{Time: time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)}
	if got := must(t, h, "list", `{}`); got != `{"notes":[]}` {
		t.Errorf("list of nothing = %s", got)
	}
	if got := must(t, h, "add", `{"title":"  Milk ","text":"two litres\nand Eggs","tags":["Shop","shop","home"]}`); got != `{"id":1,"notes":1}` {
		t.Errorf("add = %s", got)
	}
	must(t, h, "add", `{"title":"Call Ada","text":"about the report"}`)
	must(t, h, "add", `{"title":"Eggs benedict","tags":["recipe"]}`)

	if got, want := must(t, h, "get", `{"id":1}`), `{"id":1,"title":"Milk","text":"two litres\nand Eggs","tags":["shop","home"],"created":"2026-05-04T03:02:01Z"}`; got != want {
		t.Errorf("get = %s, want %s", got, want)
	}
	if got, want := must(t, h, "list", `{}`), `{"notes":[{"id":1,"title":"Milk","tags":["shop","home"]},{"id":2,"title":"Call Ada","tags":[]},{"id":3,"title":"Eggs benedict","tags":["recipe"]}]}`; got != want {
		t.Errorf("list = %s, want %s", got, want)
	}
	if got, want := must(t, h, "list", `{"tag":"SHOP"}`), `{"notes":[{"id":1,"title":"Milk","tags":["shop","home"]}]}`; got != want {
		t.Errorf("list by tag = %s, want %s", got, want)
	}
	if got, want := must(t, h, "list", `{"tag":"none"}`), `{"notes":[]}`; got != want {
		t.Errorf("list by a tag nobody has = %s, want %s", got, want)
	}
	// In the title or the text, ignoring case; the line that holds it.
	if got, want := must(t, h, "search", `{"query":"eggs"}`), `{"notes":[{"id":1,"title":"Milk","tags":["shop","home"],"line":"and Eggs"},{"id":3,"title":"Eggs benedict","tags":["recipe"],"line":"Eggs benedict"}]}`; got != want {
		t.Errorf("search = %s, want %s", got, want)
	}
	if got := must(t, h, "search", `{"query":"nowhere"}`); got != `{"notes":[]}` {
		t.Errorf("search for nothing = %s", got)
	}

	if got, want := must(t, h, "delete", `{"id":2}`), `{"id":2,"title":"Call Ada","notes":2}`; got != want {
		t.Errorf("delete = %s, want %s", got, want)
	}
	if _, ok := h.Store["note/2"]; ok {
		t.Error("delete left the note in the store")
	}
	fails(t, h, "get", `{"id":2}`, "no note 2: list or search gives the ids of the notes there are")
	fails(t, h, "delete", `{"id":2}`, "no note 2: list or search gives the ids of the notes there are")
	fails(t, h, "get", `{"id":0}`, "no note 0: list or search gives the ids of the notes there are")
	// An id is never given again.
	if got := must(t, h, "add", `{"title":"again"}`); got != `{"id":4,"notes":3}` {
		t.Errorf("add after a delete = %s", got)
	}
}

func TestRefusals(t *testing.T) {
	h := &berm.FakeHost{}
	long := strings.Repeat("é", 101)
	for _, tc := range []struct{ tool, args, want string }{
		{"add", `{"title":" "}`, `title is empty: give the note a short title, as in {"title": "Call Ada", "text": "about the report"}`},
		{"add", `{"title":"` + long + `"}`, "title is 101 characters, over 100: shorten it and put the rest in text"},
		{"add", `{"title":"a\nb"}`, "title holds a line break or another control character: keep it to one line and put the rest in text"},
		{"add", `{"title":"t","text":"` + strings.Repeat("x", 16<<10+1) + `"}`, "text is 16385 bytes, over 16384 (16 KiB): split it into several notes"},
		{"add", `{"title":"t","tags":["a b"]}`, `tag "a b": a tag is 1 to 32 characters of a-z, 0-9 and -`},
		{"add", `{"title":"t","tags":[""]}`, `tag "": a tag is 1 to 32 characters of a-z, 0-9 and -`},
		{"add", `{"title":"t","tags":["` + strings.Repeat("a", 33) + `"]}`, `tag "` + strings.Repeat("a", 33) + `": a tag is 1 to 32 characters of a-z, 0-9 and -`},
		{"add", `{"title":"t","tags":["a","b","c","d","e","f","g","h","i"]}`, "9 tags, over 8: keep the ones the note will be looked for by"},
		{"add", `{"title":3}`, "arguments: json: cannot unmarshal number into Go struct field AddArgs.title of type string"},
		{"search", `{"query":""}`, `query is empty: give the text to find, as in {"query": "milk"}`},
		{"search", `{"query":"` + strings.Repeat("q", 201) + `"}`, "query is 201 characters, over 200: search for a shorter part of it"},
	} {
		fails(t, h, tc.tool, tc.args, tc.want)
	}
	if len(h.Store) != 0 {
		t.Errorf("refused calls stored %d keys", len(h.Store))
	}
	// Exactly at the bounds.
	must(t, h, "add", `{"title":"`+strings.Repeat("é", 100)+`","text":"`+strings.Repeat("x", 16<<10)+`","tags":["a","b","c","d","e","f","g","`+strings.Repeat("h", 32)+`"]}`)
}

func TestCount(t *testing.T) {
	// maxNotes-1 notes with the longest title and tags JSON writes, put
	// in the store as add puts them (adding them one by one takes seconds).
	h := &berm.FakeHost{Store: map[string][]byte{}}
	idx := index{Next: maxNotes, Notes: []Entry{}}
	for id := 1; id < maxNotes; id++ {
		n := Note{ID: id, Title: strings.Repeat("<", maxTitle), Tags: []string{strings.Repeat("a", 31) + fmt.Sprint(id%8), "b", "c", "d", "e", "f", "g", "h"}}
		b, _ := json.Marshal(n)
		h.Store[noteKey(id)] = b
		idx.Notes = append(idx.Notes, Entry{ID: n.ID, Title: n.Title, Tags: n.Tags})
	}
	b, _ := json.Marshal(idx)
	h.Store[indexKey] = b
	must(t, h, "add", `{"title":"`+strings.Repeat("<", maxTitle)+`","tags":["`+strings.Repeat("a", 32)+`","b","c","d","e","f","g","h"]}`)
	// The index of the most notes, with the longest titles and tags JSON
	// writes, fits a value of the store.
	if n := len(h.Store[indexKey]); n > 1<<20 {
		t.Errorf("the index of %d notes is %d bytes, over the store's 1 MiB a value", maxNotes, n)
	} else {
		t.Logf("the index of %d notes at their longest: %d bytes", maxNotes, n)
	}
	fails(t, h, "add", `{"title":"one more"}`, "there are 1000 notes, the most this program keeps: delete some first (list shows them)")
	must(t, h, "delete", `{"id":500}`)
	if got := must(t, h, "add", `{"title":"one more"}`); got != `{"id":1001,"notes":1000}` {
		t.Errorf("add after a delete = %s", got)
	}
	// search stops at maxMatches and says so.
	var found Listed
	if err := json.Unmarshal([]byte(must(t, h, "search", `{"query":"<"}`)), &found); err != nil {
		t.Fatal(err)
	}
	if len(found.Notes) != maxMatches || !found.Truncated {
		t.Errorf("search of every note: %d notes, truncated %v; want %d, true", len(found.Notes), found.Truncated, maxMatches)
	}
}

func TestStoreRefusesAndDamage(t *testing.T) {
	// A store over its quota: add fails saying so, and lists nothing.
	h := &berm.FakeHost{StoreLimit: 200}
	fails(t, h, "add", `{"title":"big","text":"`+strings.Repeat("x", 300)+`"}`, "the store refused the note: berm.set: refused: the store would exceed its quota")
	if got := must(t, h, "list", `{}`); got != `{"notes":[]}` {
		t.Errorf("list after a refused add = %s", got)
	}
	// The note fits, its index does not: nothing is listed, and the id is
	// given again.
	h = &berm.FakeHost{StoreLimit: 120}
	fails(t, h, "add", `{"title":"small"}`, "the store refused the index of notes: berm.set: refused: the store would exceed its quota")
	h.StoreLimit = 0
	if got := must(t, h, "add", `{"title":"small"}`); got != `{"id":1,"notes":1}` {
		t.Errorf("add after a refused index = %s", got)
	}

	h = &berm.FakeHost{Store: map[string][]byte{indexKey: []byte("not json")}}
	fails(t, h, "list", `{}`, `the stored index of notes is damaged ("not json" is not what this program writes): the notes cannot be read`)
	h = &berm.FakeHost{Store: map[string][]byte{indexKey: []byte(`{"next":2,"notes":[{"id":1,"title":"x","tags":[]}]}`)}}
	fails(t, h, "get", `{"id":1}`, "note 1 is listed but not stored: delete it and add it again")
	if got := must(t, h, "delete", `{"id":1}`); got != `{"id":1,"title":"x","notes":0}` {
		t.Errorf("delete of a note not stored = %s", got)
	}
}

// TestImageManifest checks that the committed image carries what the
// program registers (its usage, syscalls, tools and their descriptions):
// run `make examples` when it does not. The schemas are berm build's to
// infer; `make check-examples` rebuilds the image and compares all of it.
func TestImageManifest(t *testing.T) {
	image, err := os.ReadFile("notes.wasm")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := berm.Describe(&buf); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Usage    string
		Syscalls []string
		Calls    []string
		Tools    []struct{ Name, Description string }
	}
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if m.Usage != d.Usage || !slices.Equal(m.Syscalls, d.Syscalls) || len(m.Calls) != len(d.Calls) || len(m.Tools) != len(d.Tools) {
		t.Fatalf("notes.wasm's manifest is not what tools.go registers: run make examples")
	}
	for i, tool := range m.Tools {
		if tool.Name != d.Tools[i].Name || tool.Description != d.Tools[i].Description {
			t.Errorf("notes.wasm's tool %d is %q, registered as %q: run make examples", i, tool.Name, d.Tools[i].Name)
		}
	}
}
