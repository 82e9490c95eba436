package runtime

import (
	"bytes"
	"context"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/berm-dev/berm/runtime/sandbox"
)

// wasiModule is the import module of WASI preview 1.
const wasiModule = "wasi_snapshot_preview1"

// sandbox makes what grants allow part of p's instances: the directories
// mounted (each an os.Root, held open while p lives), the arguments, the
// environment. With nothing granted an instance has no file system, no
// arguments but its name, and an empty environment.
func (r *Runtime) sandbox(p *Program, grants *sandbox.Grants) error {
	if grants != nil {
		p.Grants = clone(*grants)
	}
	g := &p.Grants
	cfg := r.modConfig.WithArgs(append([]string{p.Name}, g.Args...)...)
	if len(g.Dirs) > 0 {
		fsc, err := p.mount(g.Dirs)
		if err != nil {
			return err
		}
		cfg = cfg.WithFSConfig(fsc)
	}
	for _, e := range g.Env {
		if e.Value == nil {
			p.hostEnv = true
		}
	}
	if !p.hostEnv {
		cfg = withEnviron(cfg, g.Environ(nil))
	}
	for _, imp := range p.Manifest.Imports {
		if imp.Module == wasiModule {
			p.wasi = true
			break
		}
	}
	p.config = cfg
	return nil
}

// instanceConfig is the configuration of inst, an instance of p: the
// environment read from the host now, when granted so, and stdout, stderr,
// the WASI sleep, randomness and file system those of the call inst runs
// (bind), which a pooled instance changes from call to call.
func (p *Program) instanceConfig(inst *instance) wazero.ModuleConfig {
	cfg := p.config
	if inst.sleeper != nil {
		// A WASI sleep (poll_oneoff's clock) ends when the call's context
		// does, so that the next tick or syscall meets the deadline rather
		// than the end of the sleep; so do a long random_get and a long
		// read or write of a granted file.
		cfg = cfg.WithNanosleep(inst.sleeper.sleep).WithRandSource(callRandom{inst}).WithFSConfig(p.fsConfig(inst))
	}
	if p.hostEnv {
		cfg = withEnviron(cfg, p.Grants.Environ(os.LookupEnv))
	}
	if inst.stdout != nil {
		cfg = cfg.WithStdout(inst.stdout).WithStderr(inst.stderr)
	}
	return cfg
}

// sleep waits ns nanoseconds, or until ctx is done.
func sleep(ctx context.Context, ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func withEnviron(cfg wazero.ModuleConfig, environ []string) wazero.ModuleConfig {
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		cfg = cfg.WithEnv(k, v)
	}
	return cfg
}

func clone(g sandbox.Grants) sandbox.Grants {
	g.Dirs = append([]sandbox.Dir(nil), g.Dirs...)
	g.Env = append([]sandbox.Env(nil), g.Env...)
	g.Hosts = append([]string(nil), g.Hosts...)
	g.Args = append([]string(nil), g.Args...)
	return g
}

// mount opens every granted directory into p.mounts, which p.close closes.
func (p *Program) mount(dirs []sandbox.Dir) (wazero.FSConfig, error) {
	fsc := wazero.NewFSConfig()
	for _, d := range dirs {
		m, err := sandbox.Mount(d)
		if err != nil {
			return nil, err
		}
		p.mounts = append(p.mounts, m)
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(m, d.Guest)
	}
	return fsc, nil
}

// logWriter turns what a WASI program writes to stdout or stderr into lines
// of the call's log, under the same bounds as berm.log. What it reads of a
// call's output is bounded too (logBudget.admit): one fd_write of 10 iovecs
// over the same 50 MiB of newlines held the host 11 s past a deadline of
// 200 ms, each iovec costing the program 8 bytes; the rest is counted and
// dropped unread. Empty lines, which are never logged, are skipped without
// looking at them one by one, and once the budget is spent the lines are
// only counted.
type logWriter struct {
	ctx     context.Context
	c       *Call
	partial []byte
	// dropping is set while a line begun after the budget was spent is
	// waiting for its end, when it is counted dropped.
	dropping bool
	// head is the start of the line being written, logged or not, until
	// the call has its fatal line (watch): a panic after the log's budget
	// is spent still names the trap.
	head []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	n := len(b)
	if w.c == nil {
		return n, nil // no call: never, since bind precedes every use
	}
	// One WASI call writes its iovecs one Write each: the call's end stops
	// them here, not after the last.
	w.c.rt.checkRunning(w.ctx)
	b = w.c.logs.admit(b, w.c.rt.maxOutput())
	for len(b) > 0 {
		if len(w.partial) == 0 && !w.dropping {
			if b = skipNewlines(b); len(b) == 0 {
				break
			}
		}
		if w.c.logs.spent() {
			w.drop(b)
			break
		}
		line, rest, found := bytes.Cut(b, []byte{'\n'})
		w.watch(line)
		// Past MaxLogLine, the rest of a line is dropped as it comes: the
		// program may write gigabytes without a newline.
		if room := MaxLogLine - len(w.partial); len(line) > room {
			line = line[:room]
		}
		w.partial = append(w.partial, line...)
		if found {
			w.flush()
		}
		b = rest
	}
	return n, nil
}

// skipNewlines returns b past its leading newlines: empty lines.
func skipNewlines(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] == '\n' {
		i++
	}
	return b[i:]
}

// drop counts the lines b ends as dropped, once the budget is spent and
// every later line is dropped too (logBudget.take), without cutting them
// out one by one; only the call's fatal line is looked for (watchDropped).
func (w *logWriter) drop(b []byte) {
	begun := len(w.partial) > 0 || w.dropping
	if w.c.fatal == "" {
		w.watchDropped(b, begun)
	}
	lines := 0
	for _, ch := range b {
		if ch == '\n' {
			if begun {
				lines++
			}
			begun = false
		} else {
			begun = true
		}
	}
	w.c.logs.dropped += lines
	w.partial, w.dropping = w.partial[:0], begun
}

// watchDropped watches, of b, dropped output that begins within a line
// when begun is set, only what may be the call's fatal line: the line
// watched already, the first that starts as one, or a last line that may
// start one and end in a later write. Each is found by a search for its
// start, not byte by byte.
func (w *logWriter) watchDropped(b []byte, begun bool) {
	if len(w.head) > 0 {
		n := bytes.IndexByte(b, '\n')
		if n < 0 {
			w.watch(b)
			return
		}
		w.watch(b[:n])
		w.lineEnd()
		if w.c.fatal != "" {
			return
		}
		b, begun = b[n+1:], false
	}
	if at := fatalStart(b, begun); at >= 0 {
		line := b[at:]
		if n := bytes.IndexByte(line, '\n'); n >= 0 {
			line = line[:n]
			defer w.lineEnd()
		}
		w.watch(line)
		return
	}
	if start := bytes.LastIndexByte(b, '\n') + 1; (start > 0 || !begun) && start < len(b) && mayBeFatal(b[start:]) {
		w.watch(b[start:])
	}
}

// fatalStart is where in b the first line that starts as a fatal line
// starts (b's start is a line's unless begun), or -1.
func fatalStart(b []byte, begun bool) int {
	first := -1
	for _, prefix := range fatalPrefixes {
		for off := 0; off < len(b); {
			i := bytes.Index(b[off:], []byte(prefix))
			if i < 0 {
				break
			}
			i += off
			if i == 0 && !begun || i > 0 && b[i-1] == '\n' {
				if first < 0 || i < first {
					first = i
				}
				break
			}
			off = i + 1
		}
	}
	return first
}

// watch keeps seg, more of the line being written, in w.head, up to what
// a fatal line is cut to, until the call has its fatal line.
func (w *logWriter) watch(seg []byte) {
	if w.c.fatal != "" {
		return
	}
	if room := maxFatalLine + utf8.UTFMax - len(w.head); room > 0 {
		w.head = append(w.head, seg[:min(room, len(seg))]...)
	}
}

// lineEnd ends the line watched: the call's fatal line, if it is the
// first (FatalLine).
func (w *logWriter) lineEnd() {
	if w.c.fatal == "" && FatalLine(w.head) {
		w.c.fatal = fatalText(w.head)
	}
	w.head = w.head[:0]
}

// maxFatalLine bounds the fatal line a trap's message quotes, in bytes: Go's
// panic values can be long, and the message goes to the model.
const maxFatalLine = 200

// FatalLine reports whether line, of a WASI program's stdout or stderr,
// says the program is dying: it starts as Go's runtime starts a panic
// ("panic: ") or a fatal error ("fatal error: ", out of memory among them).
// A trap's message quotes the first such line of its call; an embedder may
// log them louder than the program's other lines.
func FatalLine(line []byte) bool {
	for _, prefix := range fatalPrefixes {
		if bytes.HasPrefix(line, []byte(prefix)) {
			return true
		}
	}
	return false
}

// fatalPrefixes start the lines of a Go program that is dying.
var fatalPrefixes = []string{"panic: ", "fatal error: "}

// mayBeFatal reports whether b, from the start of a line, may start a
// fatal line: what of it there is matches.
func mayBeFatal(b []byte) bool {
	for _, prefix := range fatalPrefixes {
		if startsAs(b, prefix) {
			return true
		}
	}
	return false
}

func startsAs(b []byte, prefix string) bool {
	n := min(len(b), len(prefix))
	return string(b[:n]) == prefix[:n]
}

// fatalText is a fatal line as a trap's message quotes it: valid UTF-8
// without control characters (a client may print it to a terminal), cut at
// a character to maxFatalLine bytes, with an ellipsis when cut.
func fatalText(line []byte) string {
	s := strings.ToValidUTF8(string(bytes.TrimRight(line, " \t\r")), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\t' {
			return '\uFFFD'
		}
		return r
	}, s)
	if len(s) <= maxFatalLine {
		return s
	}
	cut := maxFatalLine
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// flush logs what is held as one line.
func (w *logWriter) flush() {
	w.lineEnd()
	if w.dropping {
		w.c.logs.dropped++
		w.dropping = false
	}
	if len(w.partial) == 0 {
		return
	}
	w.c.logLine(w.ctx, w.partial)
	w.partial = w.partial[:0]
}

// flushOutput logs the last line of stdout and stderr when it had no
// newline, and what the call dropped of its output unread or of its paths
// not granted (logBudget.outputNotes), past the log's bounds.
func (c *Call) flushOutput() {
	if c.stdout == nil {
		return
	}
	c.stdout.flush()
	c.stderr.flush()
	if c.rt.log == nil {
		return
	}
	for _, note := range c.logs.outputNotes(c.rt.maxOutput()) {
		c.rt.log(c.stdout.ctx, c.program.Name, c.tool, note)
	}
}
