package commands_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/manifest"
)

// The tests here show that a deployment's grants are enforced the same
// wherever its program runs: under berm run, and under berm serve over
// stdio and HTTP, before and after the server restarts. They drive the
// built binary and the examples it carries.

// grantedTree is a directory holding notes/ (to be granted) beside
// secret.txt (granted to nobody), and a link from notes/ to the secret.
func grantedTree(t *testing.T) (base, notes string) {
	t.Helper()
	base = t.TempDir()
	notes = filepath.Join(base, "notes")
	for name, text := range map[string]string{
		"notes/a.txt":    "from the note\n",
		"notes/sub/b.md": "TODO: milk\n",
		"secret.txt":     "not granted\n",
	} {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../secret.txt", filepath.Join(notes, "out")); err != nil {
		t.Fatal(err)
	}
	return base, notes
}

// outcome is a call's result or the program's failure message.
type outcome struct {
	result, failure string
}

// runTool calls a tool with berm run: stdout is the result (exit 0), stderr
// the failure (exit 1); any other exit fails the test.
func runTool(t *testing.T, root, program, tool, args string) outcome {
	t.Helper()
	cmd := bermCmd(t, root, "run", program, tool, args)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return outcome{result: stdout.String()}
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return outcome{failure: strings.TrimSuffix(stderr.String(), "\n")}
	}
	t.Fatalf("berm run %s %s %s: %v\n%s", program, tool, args, err, stderr.String())
	return outcome{}
}

// mcpTool calls a tool over MCP: text content, isError for the failure.
func mcpTool(t *testing.T, cs *mcp.ClientSession, name, args string) outcome {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: rawArgs(args)})
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	text := ""
	if len(res.Content) > 0 {
		text = res.Content[0].(*mcp.TextContent).Text
	}
	if res.IsError {
		return outcome{failure: text}
	}
	return outcome{result: text}
}

// rawArgs passes a JSON object through the client as it is.
type rawArgs string

func (r rawArgs) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// annotations are the tools/list annotations of a served tool.
func annotations(t *testing.T, cs *mcp.ClientSession, name string) *mcp.ToolAnnotations {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			if tool.Annotations == nil {
				t.Fatalf("%s has no annotations", name)
			}
			return tool.Annotations
		}
	}
	t.Fatalf("%s is not served", name)
	return nil
}

func checkHints(t *testing.T, cs *mcp.ClientSession, name string, readOnly, openWorld bool) {
	t.Helper()
	a := annotations(t, cs, name)
	if a.ReadOnlyHint != readOnly || a.OpenWorldHint == nil || *a.OpenWorldHint != openWorld {
		open := "unset"
		if a.OpenWorldHint != nil {
			open = map[bool]string{true: "true", false: "false"}[*a.OpenWorldHint]
		}
		t.Errorf("%s: readOnlyHint %v, openWorldHint %s; want %v, %v", name, a.ReadOnlyHint, open, readOnly, openWorld)
	}
}

// waitFor polls until ok, or fails after 5 seconds: a deploy from another
// process reaches a server within a second.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

// TestGrantsRunAndServe: every call of the files example, granted notes/
// read-only at /data, has the same outcome under berm run and berm serve
// (stdio), and again after the server restarts; over MCP its tools are
// annotated read-only and closed-world. Granted read-write, the writes
// that were refused go through, and readOnlyHint follows.
func TestGrantsRunAndServe(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	base, notes := grantedTree(t)
	berm(t, root, "deploy", "--example", "files", "--allow-dir", notes+":/data")

	outside := func(p string) string {
		return p + " is outside the directories this deployment grants (/data): give a path in one of them"
	}
	readOnly := func(p string) string {
		return p + ": the directory is granted read-only: writing needs a read-write grant (--allow-dir HOST:GUEST:rw)"
	}
	calls := []struct {
		name, tool, args string
		want             outcome
	}{
		{"read", "read", `{"path":"/data/a.txt"}`, outcome{result: "from the note\n"}},
		{"relative", "read", `{"path":"sub/b.md"}`, outcome{result: "TODO: milk\n"}},
		{"list", "list", `{}`, outcome{result: `{"path":"","entries":[{"name":"/data","type":"dir"}]}`}},
		{"absolute outside", "read", `{"path":"/secret.txt"}`, outcome{failure: outside("/secret.txt")}},
		{"dot dot", "read", `{"path":"/data/../secret.txt"}`, outcome{failure: outside("/data/../secret.txt")}},
		{"host path", "read", `{"path":"` + filepath.ToSlash(base) + `/secret.txt"}`, outcome{failure: outside(filepath.ToSlash(base) + "/secret.txt")}},
		{"link out", "read", `{"path":"/data/out"}`,
			outcome{failure: "/data/out: not permitted (a symbolic link out of the granted directory, or the host's permissions)"}},
		{"write", "write", `{"path":"/data/new.txt","text":"x"}`, outcome{failure: readOnly("/data/new.txt")}},
		{"replace", "write", `{"path":"/data/a.txt","text":"x"}`, outcome{failure: readOnly("/data/a.txt")}},
	}
	check := func(t *testing.T, how string, call func(tool, args string) outcome) {
		t.Helper()
		for _, c := range calls {
			if got := call(c.tool, c.args); got != c.want {
				t.Errorf("%s: %s %s = %+v\nwant %+v", how, c.tool, c.args, got, c.want)
			}
		}
	}
	check(t, "berm run", func(tool, args string) outcome { return runTool(t, root, "files", tool, args) })
	cs, _, stderr := connectStdio(t, root, nil)
	checkHints(t, cs, "files_read", true, false)
	checkHints(t, cs, "files_write", true, false)
	check(t, "berm serve", func(tool, args string) outcome { return mcpTool(t, cs, "files_"+tool, args) })
	cs.Close()

	// Restarted, the server serves the same deployment with the same grants.
	cs, _, stderr = connectStdio(t, root, nil)
	check(t, "berm serve, restarted", func(tool, args string) outcome { return mcpTool(t, cs, "files_"+tool, args) })
	checkHints(t, cs, "files_read", true, false)
	if _, err := os.Stat(filepath.Join(notes, "new.txt")); err == nil {
		t.Fatal("a write through the read-only grant made notes/new.txt")
	}
	if b, _ := os.ReadFile(filepath.Join(notes, "a.txt")); string(b) != "from the note\n" {
		t.Fatalf("notes/a.txt was changed through the read-only grant: %q", b)
	}

	// Redeployed read-write by another process: the running server picks
	// the grant up, says its tools may write, and the write goes through.
	berm(t, root, "deploy", "--example", "files", "--allow-dir", notes+":/data:rw")
	waitFor(t, "readOnlyHint false after the deploy with :rw", func() bool { return !annotations(t, cs, "files_write").ReadOnlyHint })
	checkHints(t, cs, "files_read", false, false)
	if got, want := mcpTool(t, cs, "files_write", `{"path":"/data/new.txt","text":"over MCP"}`), (outcome{result: "wrote 8 bytes to /data/new.txt"}); got != want {
		t.Errorf("write over MCP, read-write = %+v, want %+v\nstderr:\n%s", got, want, stderr)
	}
	if got, want := runTool(t, root, "files", "read", `{"path":"/data/new.txt"}`), (outcome{result: "over MCP"}); got != want {
		t.Errorf("berm run read of what MCP wrote = %+v, want %+v", got, want)
	}
	if got, want := mcpTool(t, cs, "files_write", `{"path":"/data/../escaped","text":"x"}`), (outcome{failure: outside("/data/../escaped")}); got != want {
		t.Errorf("write out of the read-write grant = %+v, want %+v", got, want)
	}
	if _, err := os.Stat(filepath.Join(base, "escaped")); err == nil {
		t.Fatal("a write escaped the read-write grant")
	}

	// Redeployed without grants: dropped, under the server too.
	out := berm(t, root, "deploy", "--example", "files")
	if !strings.Contains(out, "warning: files had grants (rw:/data) and this deployment grants nothing: they are dropped") {
		t.Errorf("redeploy without grants did not warn:\n%s", out)
	}
	noGrant := outcome{failure: "this deployment grants no directory: there are no files to reach (berm deploy --allow-dir HOST:GUEST grants one)"}
	waitFor(t, "the grant dropped under berm serve", func() bool { return mcpTool(t, cs, "files_read", `{"path":"/data/a.txt"}`) == noGrant })
	if got := runTool(t, root, "files", "read", `{"path":"/data/a.txt"}`); got != noGrant {
		t.Errorf("berm run after the grant was dropped = %+v, want %+v", got, noGrant)
	}
}

// TestGrantsServeHTTP: over streamable HTTP, the files example reads its
// granted directory, and fetch, granted a loopback server by address, is
// annotated open-world and reaches it, and no other host.
func TestGrantsServeHTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("from the server"))
	}))
	defer srv.Close()
	root := t.TempDir()
	_, notes := grantedTree(t)
	berm(t, root, "deploy", "--example", "files", "--allow-dir", notes+":/data")
	out := berm(t, root, "deploy", "--example", "fetch", "--allow-host", srv.Listener.Addr().String())
	if !strings.Contains(out, "network host 127.0.0.1 (port ") {
		t.Errorf("deploy of fetch does not show its grant:\n%s", out)
	}
	if strings.Contains(out, "warning") {
		t.Errorf("deploy of fetch warned:\n%s", out)
	}

	base := startHTTP(t, root)
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	checkHints(t, cs, "files_read", true, false)
	checkHints(t, cs, "fetch_fetch", false, true) // berm.http may POST
	if got, want := mcpTool(t, cs, "files_read", `{"path":"/data/a.txt"}`), (outcome{result: "from the note\n"}); got != want {
		t.Errorf("files_read = %+v, want %+v", got, want)
	}
	if got := mcpTool(t, cs, "files_read", `{"path":"/secret.txt"}`); !strings.Contains(got.failure, "outside the directories this deployment grants") {
		t.Errorf("files_read outside the grant = %+v", got)
	}
	got := mcpTool(t, cs, "fetch_fetch", `{"url":"`+srv.URL+`/x"}`)
	if got.failure != "" || !strings.Contains(got.result, `"body":"from the server"`) {
		t.Errorf("fetch_fetch of the granted server = %+v", got)
	}
	if got := mcpTool(t, cs, "fetch_fetch", `{"url":"http://example.com/"}`); !strings.Contains(got.failure, "example.com:80: the host is not granted") {
		t.Errorf("fetch_fetch of a host not granted = %+v", got)
	}
	// The same under berm run.
	if got := runTool(t, root, "fetch", "fetch", `{"url":"`+srv.URL+`/x"}`); !strings.Contains(got.result, `"body":"from the server"`) {
		t.Errorf("berm run fetch of the granted server = %+v", got)
	}

	// A server without a token takes no grants through its control API:
	// on loopback, any local user could reach it.
	refused := bermCmd(t, t.TempDir(), "deploy", "--server", base, "--example", "files", "remote", "--allow-dir", notes+":/remote")
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "this server has no token") {
		t.Errorf("deploy with grants to a server without a token: %v\n%s", err, out)
	}
	// Deployed through the control API of a server with a token, from
	// another root, the grant names the server's directory and travels with
	// the deployment (the first server serves it too: one root).
	tokened := startHTTP(t, root, "--token", "tok")
	out = berm(t, t.TempDir(), "deploy", "--server", tokened, "--token", "tok", "--example", "files", "remote", "--allow-dir", notes+":/remote")
	if !strings.Contains(out, "directory "+notes+" at /remote, read-only") {
		t.Errorf("deploy --server does not show the grant:\n%s", out)
	}
	if ls := berm(t, root, "ls"); !strings.Contains(ls, " ro:/remote ") {
		t.Errorf("the server's ls lacks the grant deployed through it:\n%s", ls)
	}
	waitFor(t, "remote_read served", func() bool { return toolNames(t, cs)["remote_read"] })
	if got, want := mcpTool(t, cs, "remote_read", `{"path":"/remote/a.txt"}`), (outcome{result: "from the note\n"}); got != want {
		t.Errorf("remote_read = %+v, want %+v", got, want)
	}
	if got := mcpTool(t, cs, "remote_read", `{"path":"/data/a.txt"}`); !strings.Contains(got.failure, "outside the directories this deployment grants (/remote)") {
		t.Errorf("remote_read of another deployment's grant = %+v", got)
	}
}

// TestGrantsProject: berm.toml's [sandbox] deploys with its grants, each
// reaching the program: two preopens (read-only and read-write, host paths
// relative to the file), the working directory a relative path starts at,
// and a network host it cannot use, which deploy warns about.
func TestGrantsProject(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	project := t.TempDir()
	image, err := os.ReadFile(filepath.Join("..", "examples", "files", "files.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"files.wasm":  string(image),
		"notes/a.txt": "from the note\n",
		"out/.keep":   "",
		"secret.txt":  "not granted\n",
		"berm.toml": `name = "notes"
wasm = "files.wasm"

[sandbox]
env = ["TZ", "MODE=fast"]
args = ["-v"]
initial_cwd = "/out"
allow_hosts = ["api.example.com"]

[[sandbox.preopens]]
host_path = "notes"
guest_path = "/notes"
perms = "read_only"

[[sandbox.preopens]]
host_path = "out"
guest_path = "/out"
perms = "read_write"
`,
	} {
		p := filepath.Join(project, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := bermCmd(t, root, "deploy")
	cmd.Dir = project
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berm deploy in a project: %v\n%s", err, out)
	}
	for _, want := range []string{
		"directory " + filepath.Join(project, "notes") + " at /notes, read-only",
		"directory " + filepath.Join(project, "out") + " at /out, read-write",
		"warning: notes is granted network hosts but does not declare berm.http: it cannot use them",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("berm deploy does not say %q:\n%s", want, out)
		}
	}
	if ls := berm(t, root, "ls"); !strings.Contains(ls, " ro:/notes,rw:/out,env:TZ,env:MODE,net:api.example.com,args:1,cwd:/out ") {
		t.Errorf("berm ls:\n%s", ls)
	}
	for _, c := range []struct {
		tool, args string
		want       outcome
	}{
		{"list", `{}`, outcome{result: `{"path":"","entries":[{"name":"/notes","type":"dir"},{"name":"/out","type":"dir"}]}`}},
		{"read", `{"path":"/notes/a.txt"}`, outcome{result: "from the note\n"}},
		// initial_cwd: a relative path starts at /out, not at the first grant.
		{"write", `{"path":"rel.txt","text":"relative"}`, outcome{result: "wrote 8 bytes to rel.txt"}},
		{"read", `{"path":"/out/rel.txt"}`, outcome{result: "relative"}},
		{"write", `{"path":"/notes/x","text":"x"}`, outcome{failure: "/notes/x: the directory is granted read-only: writing needs a read-write grant (--allow-dir HOST:GUEST:rw)"}},
		{"read", `{"path":"../secret.txt"}`, outcome{failure: "../secret.txt is outside the directories this deployment grants (/notes, /out): give a path in one of them"}},
	} {
		if got := runTool(t, root, "notes", c.tool, c.args); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.tool, c.args, got, c.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(project, "out", "rel.txt")); err != nil || string(b) != "relative" {
		t.Errorf("out/rel.txt: %q, %v", b, err)
	}
}

// TestDeployCountsWASIFunctionsOnce: deploy's "WASI ... N more functions"
// counts functions, not import entries. Go's linker imports some WASI
// functions more than once (the runtime and syscall each declare theirs,
// and files declares the two that list the granted directories again).
func TestDeployCountsWASIFunctionsOnce(t *testing.T) {
	t.Parallel()
	image, err := os.ReadFile(filepath.Join("..", "examples", "files", "files.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(image)
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{"path_open": true, "environ_get": true, "args_get": true, "fd_write": true, "fd_prestat_get": true}
	others := map[string]bool{}
	for _, imp := range m.Imports {
		if imp.Module == "wasi_snapshot_preview1" && !granted[imp.Name] {
			others[imp.Name] = true
		}
	}
	out := berm(t, t.TempDir(), "deploy", "--example", "files")
	if want := fmt.Sprintf("WASI files, environment, arguments, output (logged), %d more functions", len(others)); !strings.Contains(out, want) {
		t.Errorf("deploy does not say %q:\n%s", want, out)
	}
}

// TestUsageResourceGrantsWithoutHostPaths: the usage resource tells a model
// where its program sees each granted directory, and not where the
// directory is on the host, which the model cannot reach and the program
// is never shown (sandbox.FS.String, the refusals of berm.set).
func TestUsageResourceGrantsWithoutHostPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, notes := grantedTree(t)
	berm(t, root, "deploy", "--example", "files", "--allow-dir", notes+":/data")
	cs, _, _ := connectStdio(t, root, nil)
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "berm://files/usage"})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Contents[0].Text
	if !strings.Contains(text, "/data, read-only") || strings.Contains(text, notes) {
		t.Errorf("the usage resource's grants:\n%s", text)
	}
}
