// Package storetest is the test suite that every store.State passes, so that
// the root directory and the PostgreSQL database cannot drift apart: the same
// names refused, the same digests checked, the same quotas charged in the same
// blocks, the same errors.
//
//	func TestSuite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) func() store.State {
//			root := t.TempDir() // a fresh, empty backing store
//			return func() store.State {
//				s, err := store.OpenDir(root) // one more handle on it
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			}
//		})
//	}
//
// What only one backend does (damaged files on disk, a dropped connection)
// is tested beside that backend.
package storetest
