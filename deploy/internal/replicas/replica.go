package replicas

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Options are how a replica is started.
type Options struct {
	// Bin is the berm binary.
	Bin string
	// State is --state: a postgres:// URL, or "" for the root directory.
	State string
	// Root is --root: the compiled-code cache beside a database, the whole
	// state without one.
	Root string
	// Stateful leaves out --stateless, so that the replica keeps sessions
	// and sends tools/list_changed to its clients.
	Stateful bool
	// Metrics serves /metrics.
	Metrics bool
	// Quiet logs warnings only: at info a replica logs every call, which
	// a benchmark does not measure. The address is then picked here (the
	// replica's own choice is logged at info), and retried if taken.
	Quiet bool
}

// Replica is one berm serve process.
type Replica struct {
	process
	Name string
	// URL is http://127.0.0.1:PORT, once WaitListen returns.
	URL string

	log  *lockedBuffer
	urls chan string
}

// Start starts a replica and returns once it listens; Stop ends it.
func Start(name string, opts Options) (*Replica, error) {
	for attempt := 1; ; attempt++ {
		r, err := Spawn(name, opts)
		if err != nil {
			return nil, err
		}
		err = r.WaitListen(30 * time.Second)
		if err == nil {
			return r, nil
		}
		r.Stop()
		if opts.Quiet && attempt < 5 && addrInUse(r.Log()) {
			continue // the port picked was taken meanwhile
		}
		return nil, err
	}
}

// Spawn starts a replica and returns at once, so that several start
// together; WaitListen waits for its address. The caller must Stop it.
func Spawn(name string, opts Options) (*Replica, error) {
	args := []string{"serve", "--root", opts.Root}
	if opts.State != "" {
		args = append(args, "--state", opts.State)
	}
	if !opts.Stateful {
		args = append(args, "--stateless")
	}
	if opts.Metrics {
		args = append(args, "--metrics")
	}
	r := &Replica{Name: name, log: new(lockedBuffer), urls: make(chan string, 1)}
	if opts.Quiet {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args = append(args, "--addr", addr, "--log-level", "warn")
		r.URL = "http://" + addr
	} else {
		args = append(args, "--addr", "127.0.0.1:0", "--log-level", "info")
	}
	cmd := exec.Command(opts.Bin, args...)
	cmd.Env = Env()
	cmd.Stdout = r.log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	lines := make(chan struct{})
	if err := r.start(cmd, func() { <-lines }); err != nil {
		return nil, fmt.Errorf("start replica %s: %w", name, err)
	}
	go func() {
		defer close(lines) // Wait must not close the pipe under the reader
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.log.Write([]byte(line + "\n"))
			if u, ok := listenURL(line); ok {
				select {
				case r.urls <- u:
				default:
				}
			}
		}
		if err := sc.Err(); err != nil {
			// A line past the buffer stops the scanner: the rest is
			// drained, or the replica would block on a full pipe.
			fmt.Fprintf(r.log, "[replicas: log not read on: %v]\n", err)
			io.Copy(io.Discard, stderr)
		}
	}()
	return r, nil
}

// WaitListen waits until the replica listens, for up to timeout.
func (r *Replica) WaitListen(timeout time.Duration) error {
	if r.URL != "" {
		err := waitDial(context.Background(), &r.process, r.Addr(), timeout, r.Log)
		if err != nil {
			return fmt.Errorf("replica %s: %w", r.Name, err)
		}
		return nil
	}
	select {
	case u := <-r.urls:
		r.URL = strings.TrimSuffix(u, "/mcp")
		return nil
	case <-r.exited:
		return fmt.Errorf("replica %s: %w", r.Name, &exitError{err: r.err, log: r.Log()})
	case <-time.After(timeout):
		return fmt.Errorf("replica %s did not listen within %s:\n%s", r.Name, timeout, r.Log())
	}
}

// listenURL finds the URL in berm serve's "listen" log line.
func listenURL(line string) (string, bool) {
	if !strings.Contains(line, "msg=listen ") {
		return "", false
	}
	for _, f := range strings.Fields(line) {
		if u, ok := strings.CutPrefix(f, "url="); ok {
			return u, true
		}
	}
	return "", false
}

// Addr is the replica's host:port, as nginx names its upstream.
func (r *Replica) Addr() string { return strings.TrimPrefix(r.URL, "http://") }

// Log is what the replica wrote so far.
func (r *Replica) Log() string { return r.log.String() }

// Stop ends the replica with SIGTERM (it drains), and SIGKILL if it lingers
// past 10 s.
func (r *Replica) Stop() { r.stop(10 * time.Second) }

// Health is what a health endpoint answered.
type Health struct {
	Code   int
	Status string
	// Programs is the programs served, -1 when the body does not say.
	Programs int
}

// Health asks GET path (/healthz, /readyz, /livez).
func (r *Replica) Health(ctx context.Context, path string) (Health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+path, nil)
	if err != nil {
		return Health{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Health{}, err
	}
	defer resp.Body.Close()
	body := struct {
		Status   string `json:"status"`
		Programs *int   `json:"programs"`
	}{}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &body)
	h := Health{Code: resp.StatusCode, Status: body.Status, Programs: -1}
	if body.Programs != nil {
		h.Programs = *body.Programs
	}
	return h, nil
}

// The probes berm serve answers (mcpserve/ready.go): /readyz is whether
// this replica takes calls (programs loaded, not draining), whatever the
// database; /healthz adds the database being reachable; /livez is whether
// the process answers at all.
const (
	ReadyPath  = "/readyz"
	HealthPath = "/healthz"
	LivePath   = "/livez"
)

// WaitHealth polls path until ok says so, for up to timeout (generous: it
// bounds a wait, it measures nothing); what names the wait in the error.
func (r *Replica) WaitHealth(path string, timeout time.Duration, what string, ok func(Health) bool) error {
	deadline := time.Now().Add(timeout)
	var last Health
	var lastErr error
	for time.Now().Before(deadline) {
		if !r.Running() {
			return fmt.Errorf("replica %s exited while waiting for %s: %v", r.Name, what, r.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last, lastErr = r.Health(ctx, path)
		cancel()
		if lastErr == nil && ok(last) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("replica %s: not %s within %s: last %s %d %q (%v)", r.Name, what, timeout, path, last.Code, last.Status, lastErr)
}

// WaitReady waits until the replica takes calls (/readyz 200) with at
// least programs programs served.
func (r *Replica) WaitReady(programs int, timeout time.Duration) error {
	return r.WaitHealth(ReadyPath, timeout, fmt.Sprintf("ready with %d programs", programs), func(h Health) bool {
		return h.Code == http.StatusOK && h.Programs >= programs
	})
}

// Metric sums the samples of a Prometheus counter at /metrics whose labels
// include every one of labels (as `name="value"`).
func (r *Replica) Metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(r.URL + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("replica %s: /metrics: %w", r.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("replica %s: /metrics: %s", r.Name, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("replica %s: /metrics line %q: %w", r.Name, line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// PutProgram deploys an image through the replica's control API, as
// `berm deploy --server` does, without spawning a process per deploy.
func (r *Replica) PutProgram(ctx context.Context, name string, image []byte) error {
	return r.control(ctx, http.MethodPut, name, image)
}

func (r *Replica) control(ctx context.Context, method, name string, image []byte) error {
	var body io.Reader
	if image != nil {
		body = bytes.NewReader(image)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL+"/v1/programs/"+name, body)
	if err != nil {
		return err
	}
	if image != nil {
		req.Header.Set("Content-Type", "application/wasm")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s/v1/programs/%s: %s: %s", method, r.URL, name, resp.Status, answer)
	}
	return nil
}
