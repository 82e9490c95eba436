// Package index finds programs in an index that is a git repository: one
// JSON Lines file per program, at the path of its repository
// (ghcr.io/org/example.jsonl), one line per published version (Entry). It
// clones an index into berm's root with go-git in process (no git binary),
// keeps it fresh, ranks its programs with BM25F over stemmed terms, and
// appends a publisher's line to their own clone.
//
//	ix, err := index.Open(ctx, root, "https://github.com/org/berm-index", nil)
//	if err != nil {
//		return err // never cloned, and unreachable
//	}
//	if ix.Offline != nil {
//		// searching the clone fetched at ix.Fetched
//	}
//	hits, err := ix.Search("read a file", 10) // best first
//
// An index is someone else's input, read a line at a time and never held
// whole: Open skips, with a Warning naming the file, the line and the bound,
// a path that could leave the index, a file past MaxFile or MaxLines, a
// line past MaxLine, a line that does not parse, and a line whose reference
// belongs in another file; past MaxFiles, MaxRead or MaxHeld it skips the
// rest of the index with one warning. It keeps MaxWarnings warnings and
// counts the rest (Index.Skipped). A clone past MaxClone, MaxObjects or
// MaxObject fails (ErrBound) before go-git reads what is past the bound.
// Within a file the newest (last) line of a reference wins, and search
// shows each file once, by its last line.
//
// Deploy asks Verify (or Expected) whether the layer a registry served for a
// pinned reference is the one the indexes under the root list.
package index
