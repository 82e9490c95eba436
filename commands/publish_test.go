package commands_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/berm-dev/berm/internal/registrytest"
)

// publisherClone makes what a publisher has: a git working tree of an
// index with one commit.
func publisherClone(t *testing.T) (string, *git.Repository) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("an index\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	if _, err := wt.Add("README.md"); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "maintainer", Email: "m@example.com", When: time.Now()}
	if _, err := wt.Commit("start", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	return dir, repo
}

// headCommit is the publisher's clone's newest commit.
func headCommit(t *testing.T, repo *git.Repository) *object.Commit {
	t.Helper()
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPublishThenSearch(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker, home := t.TempDir(), t.TempDir(), t.TempDir()
	ref := host + "/demo/echo:v1"
	layer, manifestDigest := pushedDigests(t, run(t, bermEnv(t, root, docker, "push", ref, fixturePath("echo.wasm"))))
	dir, repo := publisherClone(t)
	start := headCommit(t, repo).Hash

	publish := func(args ...string) string {
		cmd := bermEnv(t, root, docker, append([]string{"publish"}, args...)...)
		cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+home)
		return run(t, cmd)
	}
	out := publish(ref, "--index", dir, "--publisher", "Alice <alice@example.com>")
	if !strings.HasPrefix(out, ref+"@"+manifestDigest+"\n") || !strings.Contains(out, "push it and open a pull request") {
		t.Fatalf("publish printed:\n%s", out)
	}
	c := headCommit(t, repo)
	if c.Author.Name != "Alice" || c.Author.Email != "alice@example.com" || c.Message != "publish "+ref+"@"+manifestDigest ||
		len(c.ParentHashes) != 1 || c.ParentHashes[0] != start {
		t.Fatalf("commit: %+v", c)
	}
	file := filepath.Join(dir, strings.Replace(host, ":", "_", 1), "demo", "echo.jsonl")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(b, &line); err != nil || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
	if line["reference"] != ref || line["digest"] != manifestDigest || line["layer"] != layer ||
		line["publisher"] != "Alice <alice@example.com>" || !strings.Contains(line["usage"].(string), "echoes") {
		t.Fatalf("line = %v", line)
	}
	if status, _ := mustWorktree(t, repo).Status(); !status.IsClean() {
		t.Fatalf("publish left the working tree unclean:\n%s", status)
	}

	// Again: nothing new.
	if out := publish(ref, "--index", dir, "--publisher", "Alice <alice@example.com>"); !strings.Contains(out, "listed already") {
		t.Fatalf("second publish:\n%s", out)
	}
	if headCommit(t, repo).Hash != c.Hash {
		t.Fatalf("a second publish of the same digest committed")
	}

	// Search the publisher's clone, deploy what it found, and find it
	// marked as deployed.
	var results []searchResult
	if err := json.Unmarshal([]byte(run(t, bermEnv(t, root, docker, "search", "--index", dir, "--json", "echoes its arguments"))), &results); err != nil || len(results) == 0 {
		t.Fatalf("search: %v %v", err, results)
	}
	pinned := results[0]["reference"].(string) + "@" + results[0]["digest"].(string)
	if pinned != ref+"@"+manifestDigest || results[0]["deployed"] != nil {
		t.Fatalf("search found %v", results[0])
	}
	if out := run(t, bermEnv(t, root, docker, "deploy", "e", pinned)); strings.TrimSpace(out) != layer {
		t.Fatalf("deploy of the search result printed %q", out)
	}
	results = nil
	json.Unmarshal([]byte(run(t, bermEnv(t, root, docker, "search", "--index", dir, "--json", "echoes"))), &results)
	if len(results) == 0 || results[0]["deployed"] != "e" {
		t.Fatalf("not marked deployed: %v", results)
	}

	// The author from git's config, for a second version.
	run(t, bermEnv(t, root, docker, "push", host+"/demo/echo:v2", fixturePath("core.wasm")))
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Bob\n\temail = bob@example.com\n"), 0o644)
	publish(host+"/demo/echo:v2", "--index", dir)
	if c := headCommit(t, repo); c.Author.Name != "Bob" {
		t.Fatalf("author = %+v, want git's user", c.Author)
	}
	if b, _ := os.ReadFile(file); strings.Count(string(b), "\n") != 2 || !strings.Contains(string(b), `"publisher":"Bob <bob@example.com>"`) {
		t.Fatalf("%s:\n%s", file, b)
	}
}

func mustWorktree(t *testing.T, repo *git.Repository) *git.Worktree {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

func TestPublishRefuses(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	root, docker, home := t.TempDir(), t.TempDir(), t.TempDir()
	run(t, bermEnv(t, root, docker, "push", host+"/demo/echo:v1", fixturePath("echo.wasm")))
	run(t, bermEnv(t, root, docker, "push", host+"/demo/big:v1", filepath.Join("..", "testdata", "broken", "big_memory.wasm")))
	dir, repo := publisherClone(t)
	start := headCommit(t, repo).Hash
	publish := func(words []string, args ...string) {
		t.Helper()
		cmd := bermEnv(t, root, docker, append([]string{"publish"}, args...)...)
		cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+home)
		fails(t, cmd, words...)
	}
	alice := []string{"--publisher", "Alice <alice@example.com>"}
	publish([]string{"not found", "hint:"}, append([]string{host + "/demo/nope:v1", "--index", dir}, alice...)...)
	publish([]string{"would not deploy", "memory"}, append([]string{host + "/demo/big:v1", "--index", dir}, alice...)...)
	publish([]string{"user.name is not set", "--publisher"}, host+"/demo/echo:v1", "--index", dir)
	publish([]string{"not a git working tree"}, append([]string{host + "/demo/echo:v1", "--index", t.TempDir()}, alice...)...)
	publish([]string{"a reference with a tag"}, append([]string{host + "/demo/echo@sha256:" + strings.Repeat("a", 64), "--index", dir}, alice...)...)
	publish([]string{"the copy of an index berm search keeps"}, append([]string{host + "/demo/echo:v1", "--index", filepath.Join(root, "index", "x")}, alice...)...)
	publish([]string{"index"}, host+"/demo/echo:v1")
	if headCommit(t, repo).Hash != start {
		t.Fatalf("a refused publish committed")
	}

	// Another change staged would ride along: refused.
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("changed\n"), 0o644)
	mustWorktree(t, repo).Add("README.md")
	publish([]string{"README.md is staged"}, append([]string{host + "/demo/echo:v1", "--index", dir}, alice...)...)
}
