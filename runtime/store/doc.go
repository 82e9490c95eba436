// Package store keeps berm's state in one root directory: images addressed by
// digest, the table of deployments, the compiled-code cache and the programs'
// data. Several processes share a root: every write lands in a temporary file
// that is renamed into place, so a reader sees the old file or the new one,
// never half of one, and a kill mid-write loses nothing that was there.
//
//	s, err := store.OpenDir(root) // OpenDirExisting creates nothing
//	digest, err := s.PutImage(image)
//	err = s.Deploy(store.Deployment{Name: "hello", Digest: digest})
//	d, err := s.Deployment("hello")
//	image, err = s.Image(d.Digest) // checked against its digest
//	list, damaged, err := s.Deployments()
//
// Names and digests become file names, so every method checks them first: a
// program name that manifest.CheckProgramName refuses is an error wrapping
// manifest.ErrProgramName, and nothing outside the root is ever reached
// through one.
//
// One damaged deployment record costs only itself: Deployments lists the
// others and reports it apart (Damaged), while Deployment of its name returns
// ErrDamaged.
//
// A process killed mid-write leaves its temporary file (.tmp-*) behind;
// CollectTemp removes those old enough not to be a write in progress.
//
// A program's data is bounded by what the disk pays for it: every entry is
// charged its size rounded up to whole blocks (BlockSize), MaxDataBytes in
// all, and MaxKeys entries. Writers of one program's data take turns, in a
// process and across processes (flock on data/<name>/.lock, where there is
// flock), so that concurrent writers never pass a bound together, and a
// call's writer waits for its turn until the call's context is done; each
// process keeps the program's usage in memory and scans the directory again
// only when another process wrote since, which a token that every write
// leaves in the lock file tells (data.go).
package store
