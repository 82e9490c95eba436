// Package indextest makes index repositories on disk for tests: real git
// repositories, written with go-git, with generated programs or with
// whatever paths a test needs, ".." included.
//
//	dir := t.TempDir()
//	indextest.Init(t, dir)
//	indextest.Commit(t, dir, indextest.Generate("ghcr.io", 300))
//	url := "file://" + dir
package indextest
