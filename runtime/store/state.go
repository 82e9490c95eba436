package store

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ErrUnavailable: the state could not be reached (its database is down or
// cut off, or did not answer in time). The same call may succeed later; a
// program is told that its data is unavailable, never why.
var ErrUnavailable = errors.New("state unavailable")

// State is what a call needs and every replica of berm serve shares: the
// images, the table of deployments and the programs' data. Two backends
// implement it: *Store, a root directory (the default, for one machine), and
// runtime/store/postgres, a PostgreSQL database that many berm serve
// processes share. storetest holds the suite that both pass, so that they
// cannot drift: the same names refused, the same digests checked, the same
// quotas, the same errors (ErrNotDeployed, ErrNoImage, ErrDamaged,
// ErrQuota).
//
// Compiled code is not state: each process caches it on its own disk.
type State interface {
	// PutImage stores an image under its digest and returns the digest.
	PutImage(image []byte) (string, error)
	// Image reads back the image of a digest, checked against it.
	Image(digest string) ([]byte, error)
	// HasImage reports whether an image of the digest is stored.
	HasImage(digest string) bool

	// Deploy records a deployment, replacing any of its name at once. The
	// image must be stored first.
	Deploy(d Deployment) error
	// Deployment returns the deployment under name.
	Deployment(name string) (Deployment, error)
	// Deployments lists the deployments by name, and apart from them the
	// records that could not be read.
	Deployments() ([]Deployment, []Damaged, error)
	// Remove deletes the deployment under name and, unless keepData, its
	// data.
	Remove(name string, keepData bool) error

	// Get, Set and Delete are a program's key-value data (ABI.md's
	// berm.get, berm.set, berm.delete), which needs no deployment (Remove
	// keeping data leaves it without one). Keys and values are any bytes,
	// empty ones included; an empty value is not an absent one. Set
	// refuses what passes the limits (MaxKey, MaxValue, MaxKeys,
	// MaxDataBytes) with ErrQuota, in a message that names no path, and
	// writers of one program on any number of handles take turns, so that
	// they never pass a bound together. A write that takes no more than it
	// frees passes even over the quota.
	//
	// They take the context of the call they are made for: a wait (for
	// another writer's turn, a lock in the database) ends when it is done,
	// with an error that wraps its ctx.Err() and not ErrUnavailable, so
	// that no call runs past its deadline in the store. A Set so ended
	// wrote nothing, but where a database committed it just before the
	// answer was lost, as on any lost connection.
	Get(ctx context.Context, program string, key []byte) ([]byte, bool, error)
	Set(ctx context.Context, program string, key, value []byte) error
	Delete(ctx context.Context, program string, key []byte) error
	// DataUsage is what program's data is charged against MaxDataBytes:
	// each entry 4+len(key)+len(value) bytes (what the directory's file of
	// it holds) rounded up to whole blocks of BlockSize, one at least, so
	// that the same data fits the same quota in either backend.
	DataUsage(program string) (int64, error)

	// Changes receives when the deployments may have changed through
	// another process, or nil when only reading them again tells (a
	// directory).
	Changes() <-chan struct{}
	// Ping reports whether the state can be reached now.
	Ping(ctx context.Context) error
	// Close releases what the state holds open.
	Close() error
}

var _ State = (*Store)(nil)

// Changes is nil: other processes' deployments are seen by reading the
// directory again.
func (s *Store) Changes() <-chan struct{} { return nil }

// Ping reports whether the root is still a directory.
func (s *Store) Ping(context.Context) error {
	info, err := os.Stat(s.root)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("store: %s is not a directory", s.root)
	}
	return nil
}

// Close holds nothing to release: every method opens and closes its files.
func (s *Store) Close() error { return nil }
