package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/commands"
	"github.com/berm-dev/berm/internal/pgtest"
)

// --state takes nothing (the directory) or a PostgreSQL URL; anything else
// is a usage error that names the scheme, and never echoes a password.
func TestStateRefusesUnknownScheme(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for name, state := range map[string]string{
		"mysql":    "mysql://berm:hunter2@db/berm",
		"no URL":   "hunter2",
		"file":     "file:///tmp/berm",
		"redis":    "redis://:hunter2@cache",
		"http URL": "http://berm:hunter2@db",
	} {
		t.Run(name, func(t *testing.T) {
			code, stderr := mainIn(t, root, nil, "--state", state, "ls")
			if code != 2 || !strings.Contains(stderr, "--state: unknown scheme") || !strings.Contains(stderr, "postgres://") {
				t.Fatalf("exit %d, want 2, the scheme refused and postgres:// offered\n%s", code, stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Fatalf("the error shows the URL's password:\n%s", stderr)
			}
		})
	}
}

// BERM_STATE is --state, without the spaces or line end around it that a
// secret read from a file has.
func TestStateFromEnvironment(t *testing.T) {
	for _, state := range []string{"redis://cache", " redis://cache\n"} {
		t.Run(strconv.Quote(state), func(t *testing.T) {
			t.Setenv("BERM_STATE", state)
			code, stderr := mainIn(t, t.TempDir(), nil, "ls")
			if code != 2 || !strings.Contains(stderr, `unknown scheme "redis"`) {
				t.Fatalf("exit %d, want 2 and BERM_STATE's scheme refused, read without the spaces\n%s", code, stderr)
			}
		})
	}
}

// A database that does not answer is an error naming its host and port,
// never its password.
func TestStateUnreachableNamesHost(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"ls"}, {"rm", "hello"}, {"deploy", "--example", "hello"}, {"inspect", "hello"}} {
		t.Run(cmd[0], func(t *testing.T) {
			code, stderr := mainIn(t, t.TempDir(), nil, append([]string{"--state", "postgres://berm:hunter2@127.0.0.1:1/berm?connect_timeout=2"}, cmd...)...)
			if code != 2 || !strings.Contains(stderr, "127.0.0.1:1") {
				t.Fatalf("exit %d, want 2 and the host named\n%s", code, stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Fatalf("the error shows the password:\n%s", stderr)
			}
		})
	}
}

// Commands against one database see each other's work, each in a process of
// its own (here: an invocation of its own, with a root of its own, so that
// nothing is shared but the database).
func TestStateDeployListRemove(t *testing.T) {
	t.Parallel()
	url := pgtest.NewCluster(t).URL(t)
	berm := func(args ...string) string {
		t.Helper()
		var stdout bytes.Buffer
		code, stderr := mainIn(t, t.TempDir(), &stdout, append([]string{"--state", url}, args...)...)
		if code != 0 {
			t.Fatalf("berm %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		return stdout.String()
	}
	digest := strings.TrimSpace(berm("deploy", "echo", fixturePath("echo.wasm")))
	var list []struct{ Name, Digest string }
	if err := json.Unmarshal([]byte(berm("ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "echo" || list[0].Digest != digest {
		t.Fatalf("ls = %+v, want echo at %s", list, digest)
	}
	if out := berm("run", "echo", "echo", `{"message":"from the database"}`); out != `{"message":"from the database"}` {
		t.Fatalf("run = %q", out)
	}
	berm("rm", "echo")
	if out := strings.TrimSpace(berm("ls", "--json")); out != "[]" {
		t.Fatalf("ls after rm = %s, want []", out)
	}
}

// berm serve with its database down at start does not exit: it says so in
// its log and retries, answers /readyz and /healthz 503 and /livez 200
// meanwhile, and serves once the database is up, deploys made by berm deploy
// included. When the database goes away again, /healthz says so while
// /readyz stays 200: the programs served still take calls.
func TestServeWaitsForDatabase(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	url := cluster.URL(t)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- commands.Main(ctx, []string{"berm", "--root", t.TempDir(), "--state", url, "serve", "--addr", "127.0.0.1:0"},
			strings.NewReader(""), &bytes.Buffer{}, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d\n%s", code, stderr)
		}
	})
	addr := waitForLog(t, stderr, regexp.MustCompile(`listen, not ready" addr=(\S+)`))
	base := "http://" + addr
	waitForLog(t, stderr, regexp.MustCompile(`database unreachable; retrying`))
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := probe(t, base+path); code != http.StatusServiceUnavailable || body.Status != "not ready" || body.Reason != "database unreachable" {
			t.Fatalf("%s while the database is down = %d %+v, want 503 not ready: database unreachable", path, code, body)
		}
	}
	if code, _ := probe(t, base+"/livez"); code != http.StatusOK {
		t.Fatalf("livez while the database is down = %d, want 200", code)
	}

	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, stderr, regexp.MustCompile(`msg=listen url=`))
	waitForProbe(t, base+"/readyz", func(code int, _ health) bool { return code == http.StatusOK }, "200 once the database is up")
	if code, body := probe(t, base+"/healthz"); code != http.StatusOK || body.Status != "ok" {
		t.Fatalf("healthz once the database is up = %d %+v, want 200 ok\n%s", code, body, stderr)
	}
	var stdout bytes.Buffer
	if code, errOut := mainIn(t, t.TempDir(), &stdout, "--state", url, "deploy", "echo", fixturePath("echo.wasm")); code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, errOut)
	}
	// The server learns of the deploy from a notification: within well
	// under the resync interval (5s), which alone would take longer.
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, body := probe(t, base+"/healthz"); body.Programs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not serve the deploy within 3s: no notification?\n%s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	waitForProbe(t, base+"/healthz", func(code int, body health) bool {
		return code == http.StatusServiceUnavailable && body.Reason == "database unreachable"
	}, "503 database unreachable with the database gone")
	if code, body := probe(t, base+"/readyz"); code != http.StatusOK || body.Programs != 1 {
		t.Fatalf("readyz with the database gone = %d %+v, want 200 and the program still served", code, body)
	}
	if code, _ := probe(t, base+"/livez"); code != http.StatusOK {
		t.Fatalf("livez with the database gone = %d, want 200", code)
	}
}

// berm serve against a database that answers no (a malformed URL, a
// database or role that does not exist) fails at once with the reason and
// a hint, rather than retrying what no wait mends; the hint about
// PostgreSQL running is for an unreachable one only.
func TestServeDoesNotRetryRefusals(t *testing.T) {
	t.Parallel()
	good := pgtest.URL(t)
	u, err := neturl.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	noDatabase := *u
	noDatabase.Path = "/berm_no_such_database"
	noRole := *u
	noRole.User = neturl.User("berm_no_such_role")
	for name, tt := range map[string]struct{ state, want string }{
		"malformed URL":    {"postgres://berm@127.0.0.1:notaport/berm", "malformed"},
		"no such database": {noDatabase.String(), "berm_no_such_database"},
		"no such role":     {noRole.String(), "berm_no_such_role"},
	} {
		t.Run(name, func(t *testing.T) {
			// A retry loop would run until this context ends, then exit 0.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stderr := &syncBuffer{}
			code := commands.Main(ctx, []string{"berm", "--root", t.TempDir(), "--state", tt.state, "serve", "--addr", "127.0.0.1:0"},
				strings.NewReader(""), &bytes.Buffer{}, stderr)
			out := stderr.String()
			if code != 2 || strings.Contains(out, "retrying") || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want 2 at once (no retry) naming %q\n%s", code, tt.want, out)
			}
			if !strings.Contains(out, "hint: check --state") || strings.Contains(out, "is PostgreSQL running") {
				t.Fatalf("want the hint to check --state, not to start PostgreSQL\n%s", out)
			}
		})
	}
}

// A password in the URL's query (password=, sslpassword=) is never shown:
// not in serve's log, nor an error, nor --help with BERM_STATE set. The log
// names the database as user@host:port/dbname.
func TestStateQueryPasswordNotShown(t *testing.T) {
	state := "postgres://berm@127.0.0.1:1/bermdb?password=hunter2&sslpassword=hunter3&connect_timeout=1"
	check := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "hunter2") || strings.Contains(out, "hunter3") {
			t.Fatalf("%s shows a password:\n%s", what, out)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- commands.Main(ctx, []string{"berm", "--root", t.TempDir(), "--state", state, "serve", "--addr", "127.0.0.1:0"},
			strings.NewReader(""), &bytes.Buffer{}, stderr)
	}()
	waitForLog(t, stderr, regexp.MustCompile(`database unreachable; retrying`))
	cancel()
	<-done
	if !strings.Contains(stderr.String(), "database=berm@127.0.0.1:1/bermdb") {
		t.Fatalf("serve's log does not name the database as user@host:port/dbname:\n%s", stderr)
	}
	check("serve's log", stderr.String())
	for _, cmd := range [][]string{{"ls"}, {"deploy", "echo", fixturePath("echo.wasm")}} {
		code, out := mainIn(t, t.TempDir(), nil, append([]string{"--state", state}, cmd...)...)
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2\n%s", cmd[0], code, out)
		}
		check(cmd[0]+"'s error", out)
	}
	t.Setenv("BERM_STATE", state)
	var help bytes.Buffer
	mainIn(t, t.TempDir(), &help, "serve", "--help")
	check("serve --help", help.String())
}

// waitForProbe waits until a probe's answer is as want says.
func waitForProbe(t *testing.T, url string, want func(int, health) bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := probe(t, url)
		if want(code, body) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d %+v, want %s", url, code, body, what)
		}
	}
}

type health struct {
	Status, Reason string
	Programs       int
}

func probe(t *testing.T, url string) (int, health) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health
	json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

// waitForLog waits until the log has a line matching re, and returns its
// first group.
func waitForLog(t *testing.T, log *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			if len(m) > 1 {
				return m[1]
			}
			return m[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s in the log:\n%s", re, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --state with a server to drive is ambiguous (a server acts on its own
// state): refused, not ignored.
func TestStateWithServerRefused(t *testing.T) {
	t.Parallel()
	code, stderr := mainIn(t, t.TempDir(), nil, "--state", "postgres://berm@127.0.0.1:1/berm", "ls", "--server", "http://127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "give one") {
		t.Fatalf("exit %d, want 2 and --state with --server refused\n%s", code, stderr)
	}
}

// A deployment record's name is printed escaped: a row or file planted with
// terminal escapes cannot drive the terminal of whoever lists.
func TestLsEscapesDamagedNames(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "deployments"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "deployments", "x\x1b[31mRED.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	code, stderr := mainIn(t, root, &stdout, "ls")
	if strings.ContainsRune(stderr+stdout.String(), '\x1b') {
		t.Fatalf("ls printed a raw escape (exit %d)\nstdout: %q\nstderr: %q", code, stdout.String(), stderr)
	}
	if !strings.Contains(stderr, `x\x1b[31mRED`) {
		t.Fatalf("ls does not name the damaged record, escaped: %q", stderr)
	}
}

// berm serve --stdio with its database unreachable fails at once rather than
// wait: its client started it and shows the error, and a server waiting
// would not see the client close its stdin.
func TestServeStdioUnreachableFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := commands.Main(ctx, []string{"berm", "--root", t.TempDir(), "--state", "postgres://berm@127.0.0.1:1/berm?connect_timeout=2", "serve", "--stdio"},
		strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "127.0.0.1:1") || ctx.Err() != nil {
		t.Fatalf("exit %d (ctx %v), want 2 at once naming the database\n%s", code, ctx.Err(), stderr.String())
	}
}
