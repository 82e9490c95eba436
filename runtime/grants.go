package runtime

import (
	"bytes"
	"context"
	"os"
	"strings"
	"time"

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
// environment read from the host now, when granted so, and stdout, stderr
// and the WASI sleep those of the call inst runs (bind), which a pooled
// instance changes from call to call.
func (p *Program) instanceConfig(inst *instance) wazero.ModuleConfig {
	cfg := p.config
	if inst.sleeper != nil {
		// A WASI sleep (poll_oneoff's clock) ends when the call's context
		// does, so that the next tick or syscall meets the deadline rather
		// than the end of the sleep.
		cfg = cfg.WithNanosleep(inst.sleeper.sleep)
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
// of the call's log, under the same bounds as berm.log.
type logWriter struct {
	ctx     context.Context
	c       *Call
	partial []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		line, rest, found := bytes.Cut(b, []byte{'\n'})
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

// flush logs what is held as one line.
func (w *logWriter) flush() {
	if len(w.partial) == 0 {
		return
	}
	w.c.logLine(w.ctx, w.partial)
	w.partial = w.partial[:0]
}

// flushOutput logs the last line of stdout and stderr when it had no newline.
func (c *Call) flushOutput() {
	if c.stdout != nil {
		c.stdout.flush()
		c.stderr.flush()
	}
}
