// Package pgtest starts real PostgreSQL servers for tests: a database of its
// own for each test in a cluster the package's tests share, or a private
// cluster that a test may stop and start.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) } // stops the shared cluster
//
//	func TestX(t *testing.T) {
//		url := pgtest.URL(t) // a fresh, empty database
//		c := pgtest.NewCluster(t)
//		url2 := c.URL(t)
//		c.Restart()
//	}
//
// The server is Debian's postgresql (/usr/lib/postgresql/*/bin) or initdb on
// PATH; without one the tests skip, saying so, except under CI (CI set),
// where they fail: .ci/run installs it. PostgreSQL refuses to run as root, so
// as root the clusters run as the postgres user (Debian's package adds it).
// BERM_TEST_POSTGRES, a postgres:// URL of a server whose user may create
// databases, replaces the shared cluster (.ci/run starts one and sets it).
package pgtest
