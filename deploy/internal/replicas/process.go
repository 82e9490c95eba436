package replicas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Env is the environment of every berm process: nothing of the developer's
// own server, context or state leaks in.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BERM_SERVER", "BERM_CONTEXT", "BERM_TOKEN", "BERM_STATE", "BERM_ROOT", "BERM_ADDR":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// CLI runs berm commands to completion.
type CLI struct {
	Bin string
	// Root is BERM_ROOT: the compiled-code cache and config of a command
	// acting on a database, apart from the developer's.
	Root string
	// Dir is the working directory, against which relative paths resolve.
	Dir string
}

// Run runs berm with args and returns its stdout; a failure carries stderr.
func (c CLI) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env = append(Env(), "BERM_ROOT="+c.Root)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = ownGroup()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("berm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// ownGroup puts a child in a process group of its own, so that killing the
// group reaches whatever it forked (nginx's workers), and has the kernel
// kill it when the thread that started it dies: go test's timeout kills the
// test binary with no cleanup run.
func ownGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// process is a started child: exited is closed once it is reaped, and err
// is then how it ended.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// start starts cmd in a group of its own; wait, when set, runs before the
// process is reaped (a reader of its pipe that must see the end first).
func (p *process) start(cmd *exec.Cmd, wait func()) error {
	cmd.SysProcAttr = ownGroup()
	// Output copied by exec (nginx's) ends when every writer is gone: a
	// worker left behind must not hold Wait forever.
	cmd.WaitDelay = 5 * time.Second
	p.cmd, p.exited = cmd, make(chan struct{})
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		if wait != nil {
			wait()
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return nil
}

// Running reports whether the process has not been reaped.
func (p *process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed once the process is reaped; Err is then its end.
func (p *process) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended, once Exited is closed.
func (p *process) Err() error {
	<-p.exited
	return p.err
}

// Pid is the process's id (its group's too).
func (p *process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL to the process's group and returns once the process is
// reaped: from then on nothing it did not finish can still happen.
func (p *process) Kill() error {
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	<-p.exited
	return nil
}

// stop sends SIGTERM, then SIGKILL to the whole group if the process
// lingers past grace, and waits for it either way; what is left of the
// group afterwards is killed too.
func (p *process) stop(grace time.Duration) {
	if p.Running() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
	}
	p.Kill()
}

// lockedBuffer is a bytes.Buffer that a process's output and its reader
// share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddr is a loopback address whose port was free a moment ago: a
// caller retries when it is taken meanwhile (addrInUse).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// addrInUse reports whether a process's log says it could not bind its
// port: berm and nginx both print the system's EADDRINUSE text (nginx
// capitalised), the only sign a child's log gives of it.
func addrInUse(log string) bool {
	return strings.Contains(strings.ToLower(log), syscall.EADDRINUSE.Error())
}

// waitDial waits until addr accepts connections, the process exits (an
// error carrying its log), or timeout passes.
func waitDial(ctx context.Context, p *process, addr string, timeout time.Duration, log func() string) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.exited:
			return &exitError{err: p.err, log: log()}
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no listener on %s after %s:\n%s", addr, timeout, log())
		}
	}
}

// exitError is a process that exited before it listened.
type exitError struct {
	err error
	log string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("exited before listening: %v\n%s", e.err, e.log)
}
