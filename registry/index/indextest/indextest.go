package indextest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/berm-dev/berm/registry/index"
)

// Init makes an empty repository with a working tree at dir, its HEAD on
// branch main.
func Init(t testing.TB, dir string) *git.Repository {
	t.Helper()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main")); err != nil {
		t.Fatal(err)
	}
	return repo
}

// Commit makes a commit on main whose tree is exactly files (path ->
// content), as a child of main's head, and returns its hash. It writes
// objects and leaves the working tree alone, so that any path goes in, one
// that escapes included.
func Commit(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := &node{children: map[string]*node{}}
	for p, content := range files {
		n := root
		parts := strings.Split(p, "/")
		for _, part := range parts[:len(parts)-1] {
			c := n.children[part]
			if c == nil {
				c = &node{children: map[string]*node{}}
				n.children[part] = c
			}
			n = c
		}
		h, err := writeObject(repo.Storer, plumbing.BlobObject, []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		n.children[parts[len(parts)-1]] = &node{blob: h}
	}
	tree, err := root.write(repo.Storer)
	if err != nil {
		t.Fatal(err)
	}
	var parents []plumbing.Hash
	if ref, err := repo.Reference("refs/heads/main", true); err == nil {
		parents = append(parents, ref.Hash())
	}
	sig := object.Signature{Name: "indextest", Email: "indextest@example.com", When: time.Unix(1700000000+int64(len(parents)), 0)}
	c := &object.Commit{Author: sig, Committer: sig, Message: "index", TreeHash: tree, ParentHashes: parents}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/main", h)); err != nil {
		t.Fatal(err)
	}
	return h.String()
}

type node struct {
	blob     plumbing.Hash
	children map[string]*node
}

func (n *node) write(s storer.EncodedObjectStorer) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	for name, c := range n.children {
		if c.children == nil {
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: c.blob})
			continue
		}
		h, err := c.write(s)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	// Git's order: a tree sorts as if its name ended in '/'.
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

func writeObject(s storer.EncodedObjectStorer, typ plumbing.ObjectType, b []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(typ)
	obj.SetSize(int64(len(b)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(b); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// Line is e as a line of the index, newline included.
func Line(e index.Entry) string {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

// Digest is a made-up sha256 digest, different for each seed.
func Digest(seed string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.WriteString("sha256:")
	h := uint64(14695981039346656037)
	for i := 0; i < 64; i++ {
		for _, c := range []byte(seed) {
			h = (h ^ uint64(c)) * 1099511628211
		}
		h = (h ^ uint64(i)) * 1099511628211
		b.WriteByte(hex[h>>60])
	}
	return b.String()
}

// Entry is a listed program with one tool, its words as given.
func Entry(host, repo, tool, usage, description string) index.Entry {
	ref := host + "/" + repo + ":v1"
	return index.Entry{
		Reference: ref,
		Digest:    Digest(ref + "manifest"),
		Layer:     Digest(ref + "layer"),
		Publisher: "indextest <indextest@example.com>",
		Published: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Usage:     usage,
		Tools:     []index.Tool{{Name: tool, Description: description}},
		Syscalls:  []string{},
		Calls:     []string{},
	}
}

var (
	verbs   = []string{"convert", "compress", "resize", "translate", "summarize", "validate", "encrypt", "render", "schedule", "tokenize", "upload", "watch", "format", "index", "merge", "split", "sign", "scan", "lint", "diff"}
	objects = []string{"json", "image", "pdf", "email", "calendar", "database", "csv", "markdown", "url", "log", "metric", "secret", "archive", "weather", "stock", "issue", "commit", "audio", "video", "invoice", "ticket", "map", "font", "sensor", "contract"}
	extras  = []string{"quickly", "safely", "in batches", "with retries", "on a schedule", "for teams", "from a queue", "into a report", "across regions", "offline"}
)

// Generate lists n made-up programs under host, n files of one line each,
// their words drawn from small vocabularies so that many share each word.
func Generate(host string, n int) map[string]string {
	files := make(map[string]string, n)
	for i := 0; i < n; i++ {
		verb, obj, extra := verbs[i%len(verbs)], objects[(i/len(verbs))%len(objects)], extras[(i/7)%len(extras)]
		repo := fmt.Sprintf("gen%d/%s-%s-%d", i%97, obj, verb, i)
		e := Entry(host, repo, verb+"_"+obj,
			fmt.Sprintf("Use it to %s %s files %s.\n\nIt keeps nothing between calls.", verb, obj, extra),
			fmt.Sprintf("%s the %s given as input %s, and returns the result as JSON.", strings.ToUpper(verb[:1])+verb[1:], obj, extra))
		p, err := index.Path(e.Reference)
		if err != nil {
			panic(err)
		}
		files[p] = Line(e)
	}
	return files
}

// Add puts e's line at the end of its file in files.
func Add(files map[string]string, e index.Entry) {
	p, err := index.Path(e.Reference)
	if err != nil {
		panic(err)
	}
	files[p] += Line(e)
}
