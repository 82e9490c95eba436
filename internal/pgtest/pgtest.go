package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the server that URL uses instead of a cluster of its own.
const EnvURL = "BERM_TEST_POSTGRES"

const notInstalled = "PostgreSQL is not installed (.ci/run installs Debian's postgresql)"

// shared is the cluster that URL creates databases in, started on first use
// and stopped by Main.
var shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// databases numbers the databases this process creates.
var databases atomic.Uint64

// Main runs the tests, then stops the shared cluster if one was started. Call
// it from TestMain.
func Main(m *testing.M) {
	m.Run()
	if shared.cluster != nil {
		shared.cluster.remove()
	}
}

// URL returns the URL of a new, empty database, dropped when the test ends,
// in the server of BERM_TEST_POSTGRES or else in the shared cluster.
func URL(t testing.TB) string {
	t.Helper()
	if admin := os.Getenv(EnvURL); admin != "" {
		return createDatabase(t, admin)
	}
	shared.once.Do(func() { shared.cluster, shared.err = newCluster() })
	if shared.err != nil {
		unavailable(t, shared.err)
	}
	return shared.cluster.URL(t)
}

// errNotInstalled: no PostgreSQL binaries were found.
var errNotInstalled = errors.New(notInstalled)

func unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	t.Fatalf("pgtest: %v", err)
}

// Cluster is a PostgreSQL server of its own in a temporary directory,
// listening on 127.0.0.1 on a free port and on a socket in that directory.
type Cluster struct {
	bin  string // the directory of initdb and postgres
	dir  string // owned by the server's user: the socket, the log
	data string
	port int
	cred *syscall.Credential // nil unless running as root

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// NewCluster starts a private cluster, stopped and removed when the test
// ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := newCluster()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(c.remove)
	return c
}

// URL returns the URL of a new, empty database in the cluster, dropped when
// the test ends.
func (c *Cluster) URL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, c.AdminURL())
}

// AdminURL is the URL of the cluster's postgres database as its superuser.
func (c *Cluster) AdminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Port is the TCP port the cluster listens on, the same across restarts.
func (c *Cluster) Port() int { return c.port }

// Stop shuts the server down (fast: connections are ended) and waits for it.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
	return nil
}

// Start starts the stopped server again on the same port, and returns once it
// accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	return c.start()
}

// Restart stops the server and starts it again.
func (c *Cluster) Restart() error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.Start()
}

func (c *Cluster) remove() {
	c.Stop()
	os.RemoveAll(c.dir)
}

// binDir finds the directory of PostgreSQL's server binaries, the newest
// Debian version first.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(initdb), nil
	}
	return "", errNotInstalled
}

// version is N of /usr/lib/postgresql/N/bin/initdb.
func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// serverUser is the credential the server runs under: the postgres user when
// running as root, which PostgreSQL refuses to run as.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user (Debian's postgresql creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func newCluster() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: a unix socket's path must stay under 108 bytes, and the
	// directory must be the server user's.
	dir, err := os.MkdirTemp("", "berm-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// Trust on loopback and the socket: a test server, reachable only from
	// this machine. --no-sync: a crash of the machine loses the cluster, not
	// a test's assertions; the server itself keeps fsync on.
	initdb := c.command("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A free port may be taken between the probe and the server's bind:
	// try a few.
	for range 3 {
		if c.port, err = freePort(); err != nil {
			break
		}
		c.mu.Lock()
		err = c.start()
		c.mu.Unlock()
		if err == nil {
			return c, nil
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

// command runs one of PostgreSQL's binaries as the server's user.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	// The server dies with the test process if it is killed before Main
	// or a cleanup stops it (SIGQUIT: immediate shutdown).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// start starts the server and waits until it accepts connections; c.mu is
// held.
func (c *Cluster) start() error {
	logPath := filepath.Join(c.dir, "server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := c.command("postgres", "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=500")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.AdminURL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			c.cmd, c.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited at start:\n%s", tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("postgres did not accept connections on port %d: %v\n%s", c.port, err, tail(logPath))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// createDatabase creates a database of a name unique to this process and
// returns its URL; the test's cleanup drops it, ending what is still
// connected to it.
func createDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: %s must be a postgres:// URL", EnvURL)
	}
	name := fmt.Sprintf("berm_test_%d_%d", os.Getpid(), databases.Add(1))
	admin := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: create database on %s: %v", u.Host, err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil && !strings.Contains(err.Error(), "connect") {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
