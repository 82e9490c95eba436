package index

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Author is who a publish commit is by, and who its line says published.
type Author struct {
	Name, Email string
}

// String is "Name <email>", or the name alone.
func (a Author) String() string {
	if a.Email == "" {
		return a.Name
	}
	return a.Name + " <" + a.Email + ">"
}

// ParseAuthor reads "Name <email>" or a bare name.
func ParseAuthor(s string) (Author, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Author{}, errors.New("publisher: empty")
	}
	if !strings.Contains(s, "<") {
		return Author{Name: s}, nil
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" {
		return Author{}, fmt.Errorf("publisher %q: want \"Name <email>\" or a name", s)
	}
	return Author{Name: a.Name, Email: a.Address}, nil
}

// GitAuthor is user.name and user.email as git sees them in dir: its
// repository's config over the user's global one.
func GitAuthor(dir string) (Author, error) {
	repo, err := openWorkingTree(dir)
	if err != nil {
		return Author{}, err
	}
	cfg, err := repo.ConfigScoped(config.GlobalScope)
	if err != nil {
		return Author{}, fmt.Errorf("%s: git config: %w", dir, err)
	}
	a := Author{Name: cfg.User.Name, Email: cfg.User.Email}
	if a.Name == "" {
		return Author{}, fmt.Errorf("%s: git's user.name is not set", dir)
	}
	return a, nil
}

// Published is what Publish did.
type Published struct {
	// Path is the file of the index, slash-separated, relative to its root.
	Path string
	// Commit is the commit that added the line; "" when Already.
	Commit string
	// Already is set when the reference's newest line had the digest
	// already: nothing was written.
	Already bool
}

// Publish appends e as a line to its file in dir, the publisher's own
// working clone of an index, and commits that file alone, by author, ready
// to push for review. A file whose newest line of e's reference has e's
// digest already is left as it is. Publish refuses an entry readers would
// skip (past the bounds, invalid), a file it would take past MaxFile, and a
// working tree with other changes staged, which the commit would take along.
func Publish(dir string, e Entry, author Author) (*Published, error) {
	repo, err := openWorkingTree(dir)
	if err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotRepository)
	}
	p, err := Path(e.Reference)
	if err != nil {
		return nil, err
	}
	if err := e.check(p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	line, err := e.Marshal()
	if err != nil {
		return nil, err
	}
	full := filepath.Join(dir, filepath.FromSlash(p))
	old, err := readBounded(full)
	if err != nil {
		return nil, err
	}
	if n := int64(len(old) + len(line) + 1); n > MaxFile {
		return nil, fmt.Errorf("%s: %s with this line, past the limit of %s a file: remove old lines first: %w", p, size(n), size(MaxFile), ErrInvalid)
	}
	n := bytes.Count(old, []byte("\n")) + 1 // and this line
	if len(old) > 0 && old[len(old)-1] != '\n' {
		n++
	}
	if n > MaxLines {
		return nil, fmt.Errorf("%s: %d lines with this one, past the limit of %d lines a file: remove old lines first: %w", p, n, MaxLines, ErrInvalid)
	}
	entries, _ := Parse(p, old)
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Reference == e.Reference {
			if entries[i].Digest == e.Digest {
				return &Published{Path: p, Already: true}, nil
			}
			break
		}
	}
	status, err := wt.Status()
	if err != nil {
		return nil, fmt.Errorf("%s: git status: %w", dir, err)
	}
	for f, s := range status {
		if f != p && s.Staging != git.Unmodified && s.Staging != git.Untracked {
			return nil, fmt.Errorf("%s: %s is staged: the commit would take it along; commit or unstage it first", dir, f)
		}
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line = append([]byte{'\n'}, line...)
	}
	if err := appendFile(full, line); err != nil {
		return nil, err
	}
	if _, err := wt.Add(p); err != nil {
		return nil, fmt.Errorf("%s: git add %s: %w", dir, p, err)
	}
	sig := &object.Signature{Name: author.Name, Email: author.Email, When: e.Published}
	h, err := wt.Commit("publish "+e.Pinned(), &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return nil, fmt.Errorf("%s: git commit: %w", dir, err)
	}
	return &Published{Path: p, Commit: h.String()}, nil
}

// openWorkingTree opens the git working tree whose root is dir.
func openWorkingTree(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%s: %w (give the root of your clone of the index)", dir, ErrNotRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return repo, nil
}

// readBounded reads a file of the publisher's index, "" when it is new.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

func appendFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
