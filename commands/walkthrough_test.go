package commands_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWalkthrough is the README as a test: a new user goes from berm's clone
// to a tool answering over MCP by following "Writing a program" alone. It
// runs the lines of that section's first fenced block themselves, read from
// ../README.md, so that it fails when the README drifts from what works:
//
//   - `go install .` in the clone, with a fresh home directory (HOME is a
//     temporary directory, so GOPATH, GOBIN and berm's root ~/.berm are in
//     it, and berm is on PATH as $(go env GOPATH)/bin/berm); Go's build and
//     module caches are kept, and GOPROXY=off: nothing is downloaded;
//   - cd, berm and go commands as written, in that home;
//   - `claude mcp add NAME -- CMD...`: what Claude Code does with it, start
//     CMD as an MCP server over stdio, here with the official Go SDK's
//     client; the tool the line's comment names must be listed, and
//     answers a call;
//   - `berm dev`, with that client still connected: an edit of main.go is
//     rebuilt, redeployed and served, with tools/list_changed.
//
// A line it does not know how to run fails the test: teach it here.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	lines := readmeSteps(t, "Writing a program")
	start := time.Now()

	clone, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	gopath := filepath.Join(home, "go")
	goEnv := func(name string) string {
		out, err := exec.Command(goTool, "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	path := filepath.Join(gopath, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	env := []string{
		"HOME=" + home,
		"PATH=" + path,
		"GOCACHE=" + goEnv("GOCACHE"),
		"GOMODCACHE=" + goEnv("GOMODCACHE"),
		"GOPROXY=off",
		"GOFLAGS=",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || name == "PATH" || name == "USERPROFILE" || name == "XDG_CONFIG_HOME" ||
			strings.HasPrefix(name, "GO") || strings.HasPrefix(name, "BERM_") || strings.HasPrefix(name, "CGO_") {
			continue
		}
		env = append(env, kv)
	}
	// lookPath finds a command on the walkthrough's PATH, not the test's.
	lookPath := func(name string) string {
		for _, dir := range filepath.SplitList(path) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
		t.Fatalf("%s: not found in PATH", name)
		return ""
	}
	command := func(dir string, args ...string) *exec.Cmd {
		cmd := exec.Command(lookPath(args[0]), args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	}
	run := func(dir string, args ...string) {
		t.Helper()
		began := time.Now()
		out, err := command(dir, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		t.Logf("%s: %v", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
	}

	wd := home
	var cs *mcp.ClientSession
	changed := make(chan struct{}, 16)
	for _, l := range lines {
		for _, c := range l.commands {
			switch {
			case len(c) == 3 && c[0] == "go" && c[1] == "install" && c[2] == ".":
				run(clone, c...)
			case c[0] == "cd" && len(c) == 2:
				dir := c[1]
				if dir == "~" {
					dir = home
				} else if !filepath.IsAbs(dir) {
					dir = filepath.Join(wd, dir)
				}
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Fatalf("%s: no such directory (%s)", l.text, dir)
				}
				wd = dir
			case c[0] == "go" && len(c) >= 2 && c[1] == "test":
				run(wd, c...)
			case len(c) >= 6 && c[0] == "claude" && c[1] == "mcp" && c[2] == "add" && c[4] == "--":
				tool := regexp.MustCompile(`\b[a-z0-9-]+_[A-Za-z0-9_-]+\b`).FindString(l.comment)
				if tool == "" {
					t.Fatalf("%s: the comment names no {program}_{tool} to expect", l.text)
				}
				cs = walkthroughServe(t, command(wd, c[5:]...), changed, tool)
			case c[0] == "berm" && len(c) == 2 && c[1] == "dev":
				if cs == nil {
					t.Fatalf("%s: no MCP client to follow it (a claude mcp add line before it)", l.text)
				}
				walkthroughDev(t, command(wd, c...), wd, cs, changed)
			case c[0] == "berm":
				run(wd, c...)
			default:
				t.Fatalf("the walkthrough does not know how to run %q (README, Writing a program): teach commands/walkthrough_test.go", strings.Join(c, " "))
			}
		}
	}
	if cs == nil {
		t.Fatal("the walkthrough never reached an MCP client (claude mcp add ...)")
	}
	t.Logf("from nothing to a tool over MCP and an edit served: %v", time.Since(start).Round(time.Millisecond))
}

// readmeStep is a line of a README's shell block: its commands (split on
// &&, then on spaces) and its comment.
type readmeStep struct {
	text     string
	commands [][]string
	comment  string
}

// readmeSteps reads the first ```sh block of the README's section titled
// title. It refuses what it cannot split into words without a shell
// (quotes, pipes, variables, redirections).
func readmeSteps(t *testing.T, title string) []readmeStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("README.md, %s: no ```sh block", title)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README.md, %s: the ```sh block does not end", title)
	}
	var steps []readmeStep
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		s := readmeStep{text: line}
		code := line
		if i := strings.Index(line, " #"); i >= 0 {
			code, s.comment = line[:i], strings.TrimSpace(line[i+2:])
		}
		if strings.ContainsAny(code, "'\"$`|;<>()\\*") || strings.Contains(code, "||") {
			t.Fatalf("README.md, %s: %q needs a shell: keep the walkthrough's lines to words and &&, or teach commands/walkthrough_test.go", title, line)
		}
		for c := range strings.SplitSeq(code, "&&") {
			words := strings.Fields(c)
			if len(words) == 0 {
				t.Fatalf("README.md, %s: %q has an empty command", title, line)
			}
			s.commands = append(s.commands, words)
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		t.Fatalf("README.md, %s: the ```sh block is empty", title)
	}
	return steps
}

// walkthroughServe starts cmd as Claude Code starts an MCP server over
// stdio, and checks that tool is listed and answers.
func walkthroughServe(t *testing.T, cmd *exec.Cmd, changed chan struct{}, tool string) *mcp.ClientSession {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "walkthrough"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+tool+" ") {
		t.Fatalf("tools/list = %q, want %s (README's comment)", names, tool)
	}
	began := time.Now()
	call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "one two three"}})
	if err != nil {
		t.Fatalf("tools/call %s: %v\nstderr:\n%s", tool, err, stderr)
	}
	took := time.Since(began)
	if len(call.Content) == 0 {
		t.Fatalf("tools/call %s: no content", tool)
	}
	text, _ := call.Content[0].(*mcp.TextContent)
	if call.IsError || text == nil || text.Text != `{"lines":1,"words":3,"chars":13}` {
		t.Fatalf("tools/call %s = %+v (error %v), want the scaffold's counts", tool, call.Content[0], call.IsError)
	}
	t.Logf("tools/call %s over MCP: %s in %v", tool, text.Text, took.Round(time.Microsecond))
	return cs
}

// walkthroughDev runs berm dev in the project, edits the scaffold's tool
// description and waits for the served tool to say it, then stops berm dev
// with ctrl-C.
func walkthroughDev(t *testing.T, dev *exec.Cmd, proj string, cs *mcp.ClientSession, changed chan struct{}) {
	t.Helper()
	out := &syncBuffer{}
	dev.Stdout, dev.Stderr = out, out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	defer func() {
		dev.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("berm dev after ctrl-C: %v\n%s", err, out)
			}
		case <-time.After(30 * time.Second):
			dev.Process.Kill()
			<-exited
			t.Errorf("berm dev did not end within 30s of ctrl-C:\n%s", out)
		}
	}()
	waitOut := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for strings.Count(out.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("berm dev said %q fewer than %d times in 2 minutes:\n%s", what, n, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitOut("berm dev: deployed", 1)
	// Its first deployment is the same bytes as berm deploy's: nothing to
	// change. Drain what the deploy before it may have sent.
	for len(changed) > 0 {
		<-changed
	}

	main := filepath.Join(proj, "main.go")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "Counts the lines", "Counts exactly the lines"
	if !bytes.Contains(src, []byte(from)) {
		t.Fatalf("main.go has no %q to edit", from)
	}
	saved := time.Now()
	if err := os.WriteFile(main, bytes.Replace(src, []byte(from), []byte(to), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no tools/list_changed within 2 minutes of saving main.go:\n%s", out)
		}
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if strings.HasPrefix(tl.Description, to) {
				t.Logf("berm dev: the edit served %v after the save", time.Since(saved).Round(time.Millisecond))
				return
			}
		}
	}
}
