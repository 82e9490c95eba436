// Package postgres keeps berm's state in a PostgreSQL database that many
// berm serve processes share: the images, the table of deployments and the
// programs' key-value data. *State implements store.State with the directory
// backend's semantics (the same names refused, digests checked, quotas and
// errors), so that runtime/store/storetest runs against both.
//
//	s, err := postgres.Open(ctx, "postgres://berm:secret@db:5432/berm", &postgres.Options{Listen: true})
//	digest, err := s.PutImage(image)
//	err = s.Deploy(store.Deployment{Name: "hello", Digest: digest})
//	for range s.Changes() { /* read s.Deployments() again */ }
//
// # Schema and migrations
//
// Every table is named berm_*: berm_images (digest → bytes), berm_deployments
// (name → digest, source, grants as jsonb, time), berm_data (program and key
// → value) and berm_data_usage (what each program's data is charged). The
// schema is an ordered list of SQL steps in this package (migrations.go);
// berm_schema holds a row for each step applied. Open applies the missing
// steps in one transaction under pg_advisory_xact_lock(schemaLockKey), so
// that replicas starting at once take turns: the first migrates, the others
// find the steps applied. The wait and each step are bounded by
// Options.MigrationTimeout. A step once applied never changes: a fix is a
// new step. A database whose schema is newer than this binary knows is
// refused (ErrNewerSchema) rather than written to.
//
// # Round trips
//
// Every method of store.State is one round trip to the database, each bounded
// by Options.Timeout (an image's by its size too), and Get, Set and Delete by
// their context too (the call's deadline: a wait on a lock ends there, and
// the server is told to cancel the statement). A quota check and the
// write it allows run in one SQL function (berm_set) under an advisory lock
// of the program, which berm_delete and berm_remove take too, so that
// writers in many processes never pass a bound together, a Remove never
// leaves a charge for data it deleted, and an acknowledged Set is committed.
// The first use of a statement on a connection prepares it (one more round
// trip), and a connection idle for over a second is pinged before use. A
// read whose connection was lost runs once more; a write only when nothing
// of it reached the server (see State.do).
//
// # Changes
//
// A trigger on berm_deployments notifies the channel berm_deployments for
// every row changed, whoever changes it (another replica, berm deploy, psql),
// and nothing for a statement that changes none. A State opened with
// Options.Listen listens on a connection of its own and signals Changes;
// when that connection drops it reconnects with backoff and signals Changes
// once listening again, since notifications sent meanwhile are lost. Without
// Listen, Changes is nil: a command that deploys or lists needs no listener.
package postgres
