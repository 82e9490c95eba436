package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/deploy/internal/replicas"
	"github.com/berm-dev/berm/internal/pgtest"
)

func TestThreeReplicasBehindNginxServeEveryCall(t *testing.T) {
	needServers(t, true)
	rs, lb := echoAndKVBehindNginx(t, pgtest.URL(t), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c := connect(t, ctx, lb.URL, nil, false)
	tools, err := c.tools(ctx)
	if err != nil {
		t.Fatalf("tools/list through nginx: %v", err)
	}
	for _, want := range []string{"echo_echo", "kv_get", "kv_set"} {
		if !tools[want] {
			t.Errorf("tools/list through nginx lacks %s: %v", want, tools)
		}
	}

	const calls = 60
	served := map[string]int{}
	for i := range calls {
		msg := fmt.Sprintf("call %d", i)
		text, err := c.call(ctx, "echo_echo", map[string]any{"message": msg})
		if err != nil {
			t.Fatalf("call %d through nginx: %v", i, err)
		}
		var got struct{ Message string }
		if err := json.Unmarshal([]byte(text), &got); err != nil || got.Message != msg {
			t.Fatalf("call %d through nginx returned %q, want the arguments {\"message\":%q}", i, text, msg)
		}
		served[c.upstream.Last()]++
	}
	// Each replica ran calls, and all the calls ran once: the replicas'
	// own counts add up to what the client sent.
	var total float64
	for _, r := range rs {
		if served[r.Addr()] == 0 {
			t.Errorf("nginx sent no call to replica %s (%s): served %v", r.Name, r.Addr(), served)
		}
		n := r.metric(t, "berm_calls_total", `program="echo"`)
		if n == 0 {
			t.Errorf("replica %s counts no echo call at /metrics", r.Name)
		}
		total += n
	}
	if total != calls {
		t.Errorf("the replicas count %v echo calls at /metrics, want the %d sent", total, calls)
	}
}

// The bound: a change on one replica is listed on the others, and
// a stateful client of another replica told tools/list_changed, within a
// second. The median over the changes must meet it, so that one change
// delayed by a loaded machine (two cores, shared) fails nothing; each must
// still arrive within reachBound, or it did not arrive.
const (
	reachTarget = time.Second
	reachBound  = 5 * time.Second
)

func TestDeployOnOneReplicaReachesTheOthers(t *testing.T) {
	needServers(t, false)
	state := pgtest.URL(t)
	berm(t, "deploy", "--state", state, "echo", "testdata/echo.wasm")
	a := spawnReplica(t, "a", state, replicaOptions{})
	b := spawnReplica(t, "b", state, replicaOptions{})
	// c keeps sessions, so that it can tell its clients tools/list_changed.
	c := spawnReplica(t, "c", state, replicaOptions{stateful: true})
	for _, r := range []*replica{a, b, c} {
		r.waitListen(t)
		r.waitReady(t, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var changes notifications
	onC := connect(t, ctx, c.URL, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changes.add(time.Now()) },
	}, true)
	onA := connect(t, ctx, a.URL, nil, false)
	onB := connect(t, ctx, b.URL, nil, false)
	echo, kv := readFixture(t, "echo.wasm"), readFixture(t, "kv.wasm")

	// Five changes, each made away from c and from the clients that must
	// see it: through the CLI on the database, and through a replica's
	// control API.
	steps := []struct {
		name   string
		change func() error
		tool   string
		listed bool
		on     []*client
	}{
		{"deploy through the CLI on the database", func() error { berm(t, "deploy", "--state", state, "kv", "testdata/kv.wasm"); return nil },
			"kv_get", true, []*client{onA, onB, onC}},
		{"deploy through replica a's control API by the CLI", func() error { berm(t, "deploy", "--server", a.URL, "echo2", "testdata/echo.wasm"); return nil },
			"echo2_echo", true, []*client{onB, onC}},
		{"removal through the CLI on the database", func() error { berm(t, "rm", "--state", state, "kv"); return nil },
			"kv_get", false, []*client{onA, onB, onC}},
		{"deploy through replica b's control API", func() error { return b.PutProgram(ctx, "kv2", kv) },
			"kv2_get", true, []*client{onA, onC}},
		{"redeploy through replica a's control API", func() error { return a.PutProgram(ctx, "kv2", echo) },
			"kv2_echo", true, []*client{onB, onC}},
	}
	var listed, notified []time.Duration
	for _, step := range steps {
		start := time.Now()
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		// Timed from the change's acknowledgement: what another replica
		// can know of only once it is committed.
		acked := time.Now()
		var wg sync.WaitGroup
		seen := make([]time.Time, len(step.on))
		errs := make([]error, len(step.on))
		for i, cl := range step.on {
			wg.Go(func() {
				if seen[i], errs[i] = waitListed(ctx, cl, step.tool, step.listed, acked.Add(reachBound)); errs[i] != nil {
					errs[i] = fmt.Errorf("client %d: %w", i, errs[i])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		listed = append(listed, slices.MaxFunc(seen, time.Time.Compare).Sub(acked))
		// c heard of it before the change was acknowledged, at best (the
		// CLI's process exits after the database commits).
		at, ok := changes.first(start, acked.Add(reachBound))
		if !ok {
			t.Fatalf("%s: replica c sent its client no tools/list_changed within %s", step.name, reachBound)
		}
		notified = append(notified, max(at.Sub(acked), 0))
		t.Logf("%s: listed everywhere after %s, tools/list_changed on c after %s", step.name, listed[len(listed)-1], notified[len(notified)-1])
	}
	if m := medianDuration(listed); m >= reachTarget {
		t.Errorf("median time for a change to be listed on the other replicas is %s (of %v), want under %s", m, listed, reachTarget)
	}
	if m := medianDuration(notified); m >= reachTarget {
		t.Errorf("median time for a change to reach c's client as tools/list_changed is %s (of %v), want under %s", m, notified, reachTarget)
	}
}

// notifications are the times tools/list_changed arrived.
type notifications struct {
	mu  sync.Mutex
	at  []time.Time
	new chan struct{} // closed and replaced on each arrival
}

func (n *notifications) add(at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.at = append(n.at, at)
	if n.new != nil {
		close(n.new)
		n.new = nil
	}
}

// first waits until deadline for the first notification at or after since.
func (n *notifications) first(since, deadline time.Time) (time.Time, bool) {
	for {
		n.mu.Lock()
		for _, at := range n.at {
			if !at.Before(since) {
				n.mu.Unlock()
				return at, true
			}
		}
		if n.new == nil {
			n.new = make(chan struct{})
		}
		wake := n.new
		n.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(time.Until(deadline)):
			return time.Time{}, false
		}
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// waitListed polls tools/list until tool is listed (or not, as listed
// says), until deadline, and returns when it saw it so.
func waitListed(ctx context.Context, c *client, tool string, listed bool, deadline time.Time) (time.Time, error) {
	for {
		tools, err := c.tools(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("tools/list: %w", err)
		}
		if tools[tool] == listed {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s listed is %v after %s, want %v", tool, tools[tool], reachBound, listed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kvValue is what the writers store with the kv program's set, which keeps
// its arguments byte for byte under one key.
type kvValue struct {
	Client int `json:"client"`
	Seq    int `json:"seq"`
}

// writer is one MCP client writing seq = 1, 2, ... to its own program
// through nginx.
type writer struct {
	id       int
	program  string
	c        *client
	lastAck  int // the last seq whose set was acknowledged
	tried    int // the last seq sent
	failures []failedCall
	ackedBy  map[string]int // replica address -> writes it acknowledged
}

type failedCall struct {
	seq   int
	start time.Time
	err   error
}

// set writes the next seq, and records the outcome; a result other than
// "set" fails the test: a write is acknowledged or fails, never answers
// something else.
func (w *writer) set(t *testing.T, ctx context.Context) error {
	seq := w.tried + 1
	w.tried = seq
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	text, err := w.c.call(callCtx, w.program+"_set", kvValue{Client: w.id, Seq: seq})
	if err != nil {
		w.failures = append(w.failures, failedCall{seq: seq, start: start, err: err})
		return err
	}
	if text != "set" {
		t.Errorf("writer %d: set seq %d answered %q, want set", w.id, seq, text)
		return errToolFailed
	}
	w.lastAck = seq
	w.ackedBy[w.c.upstream.Last()]++
	return nil
}

// firstFailure is the error of the first writer's call that failed, if any.
func firstFailure(ws []*writer) error {
	for _, w := range ws {
		if len(w.failures) > 0 {
			return w.failures[0].err
		}
	}
	return nil
}

// readValue reads program's value with get on a replica directly.
func readValue(t *testing.T, ctx context.Context, on *client, program string) kvValue {
	t.Helper()
	text, err := on.call(ctx, program+"_get", map[string]any{})
	if err != nil {
		t.Fatalf("%s_get: %v", program, err)
	}
	var v kvValue
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s_get returned %q, not a value the writer stored", program, text)
	}
	return v
}

func TestReplicaKilledMidWriteLosesNoAcknowledgedWrite(t *testing.T) {
	needServers(t, true)
	const writers = 32
	state := pgtest.URL(t)
	kv := readFixture(t, "kv.wasm")
	// The kv program keeps one key: each writer gets a program of its own,
	// so that its writes are ordered and the last one acknowledged is what
	// must be read back.
	rs := startReplicas(t, state, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range writers {
		if err := rs[0].PutProgram(ctx, fmt.Sprintf("kv%d", i), kv); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs {
		r.waitReady(t, writers)
	}
	lb := startNginx(t, rs...)
	victim, reader := rs[1], rs[2]

	ws := make([]*writer, writers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &writer{id: i, program: fmt.Sprintf("kv%d", i), c: connect(t, ctx, lb.URL, nil, false), ackedBy: map[string]int{}}
	}
	// Phase one: every writer writes until the victim is dead; each has one
	// call at a time, so at most one of its calls can be in flight there.
	var killed atomic.Bool
	var acks atomic.Int64
	for _, w := range ws {
		wg.Go(func() {
			for !killed.Load() && ctx.Err() == nil {
				if w.set(t, ctx) == nil {
					acks.Add(1)
				}
			}
		})
	}
	warm := time.Now().Add(30 * time.Second)
	for acks.Load() < 10*writers {
		if time.Now().After(warm) {
			killed.Store(true)
			wg.Wait()
			t.Fatalf("only %d writes acknowledged in 30 s, want %d before the kill: %v", acks.Load(), 10*writers, firstFailure(ws))
		}
		time.Sleep(5 * time.Millisecond)
	}
	victim.kill(t)
	dead := time.Now()
	killed.Store(true)
	wg.Wait()

	var failures, byVictim int
	for _, w := range ws {
		byVictim += w.ackedBy[victim.Addr()]
		failures += len(w.failures)
		if len(w.failures) > 1 {
			t.Errorf("writer %d: %d calls failed, want at most the one in flight at the kill: %v", w.id, len(w.failures), w.failures)
		}
		for _, f := range w.failures {
			if !f.start.Before(dead) {
				t.Errorf("writer %d: seq %d, sent %s after the victim was reaped, failed: %v", w.id, f.seq, f.start.Sub(dead), f.err)
			}
			// The replica died: the failure is the transport's (nginx's
			// 502), never an answer of a replica.
			if answeredByReplica(f.err) {
				t.Errorf("writer %d: seq %d failed with a replica's answer, want a transport error (the replica died): %v", w.id, f.seq, f.err)
			}
		}
	}
	if byVictim == 0 {
		t.Fatalf("the victim %s acknowledged no write before it was killed: the test shows nothing", victim.Addr())
	}
	t.Logf("%d writes acknowledged, %d of them by the victim; %d calls in flight on it failed (%v)", acks.Load(), byVictim, failures, firstFailure(ws))

	onReader := connect(t, ctx, reader.URL, nil, false)
	for _, w := range ws {
		// The call that failed may or may not have been written; nothing
		// acknowledged may be missing.
		v := readValue(t, ctx, onReader, w.program)
		if v.Client != w.id || v.Seq < w.lastAck || v.Seq > w.tried {
			t.Errorf("writer %d: %s holds %+v, want client %d and seq from %d (the last acknowledged) to %d (the last sent)",
				w.id, w.program, v, w.id, w.lastAck, w.tried)
		}
	}

	// Phase two: the balancer goes round the dead replica (a refused
	// connection sends nothing, so nginx passes the request on): every
	// write succeeds.
	for _, w := range ws {
		w.failures = nil
		wg.Go(func() {
			for range 5 {
				w.set(t, ctx)
			}
		})
	}
	wg.Wait()
	for _, w := range ws {
		if len(w.failures) > 0 {
			t.Errorf("writer %d: after the kill, %d writes through nginx failed: %v", w.id, len(w.failures), w.failures[0].err)
		}
		if v := readValue(t, ctx, onReader, w.program); v != (kvValue{w.id, w.lastAck}) {
			t.Errorf("writer %d: %s holds %+v, want the last write, seq %d", w.id, w.program, v, w.lastAck)
		}
	}
}

func TestDatabaseRestartUnderLoad(t *testing.T) {
	needServers(t, true)
	cluster := pgtest.NewCluster(t)
	rs, lb := echoAndKVBehindNginx(t, cluster.URL(t), 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	echo := connect(t, ctx, lb.URL, nil, false)
	kv := connect(t, ctx, lb.URL, nil, false)
	if _, err := kv.call(ctx, "kv_set", kvValue{Seq: 1}); err != nil {
		t.Fatalf("kv_set before the restart: %v", err)
	}

	// Stopped and started rather than restarted in one step, so that the
	// test sees the replicas through the time the database is down.
	// down is set while the database is stopped, from before Stop until
	// every replica says it is back: calls on either side of it may go
	// either way, so they are counted apart.
	var down atomic.Bool
	var echoOK, echoDownOK, kvDownFailed, kvOKAfter atomic.Int64
	var mu sync.Mutex
	var echoErrs, kvErrs []error
	var back atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			msg := fmt.Sprint(i)
			text, err := echo.call(ctx, "echo_echo", map[string]any{"message": msg})
			if err == nil && text != fmt.Sprintf(`{"message":%q}`, msg) {
				err = fmt.Errorf("echo returned %q", text)
			}
			if err != nil {
				mu.Lock()
				echoErrs = append(echoErrs, err)
				mu.Unlock()
				continue
			}
			echoOK.Add(1)
			if down.Load() {
				echoDownOK.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			wasDown, wasBack := down.Load(), back.Load()
			text, err := kv.call(ctx, "kv_get", map[string]any{})
			switch {
			case err != nil && wasDown:
				kvDownFailed.Add(1)
				mu.Lock()
				kvErrs = append(kvErrs, err)
				mu.Unlock()
			case err == nil && wasBack:
				if text != `{"client":0,"seq":1}` {
					t.Errorf("kv_get after the restart returned %q, want the value set before it", text)
				}
				kvOKAfter.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	// /readyz is whether a replica takes calls, whatever the database: it
	// stays 200 throughout, so that an outage does not take every replica
	// out of the balancer while calls that touch no data keep working.
	var readyzWrong []string
	readyzDone := make(chan struct{})
	var readyzWatch sync.WaitGroup
	readyzWatch.Go(func() {
		for {
			for _, r := range rs {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				h, err := r.Health(ctx, replicas.ReadyPath)
				cancel()
				if err != nil || h.Code != http.StatusOK {
					mu.Lock()
					readyzWrong = append(readyzWrong, fmt.Sprintf("replica %s: %d %q %v", r.Name, h.Code, h.Status, err))
					mu.Unlock()
				}
			}
			select {
			case <-readyzDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	down.Store(true)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		r.waitHealth(t, replicas.HealthPath, 20*time.Second, "unhealthy (503) with the database stopped", func(h replicas.Health) bool {
			return h.Code == http.StatusServiceUnavailable
		})
	}
	waitCount(t, &kvDownFailed, 1, 20*time.Second, "a kv call to fail with the database stopped")
	for _, r := range rs {
		h, err := r.Health(ctx, replicas.ReadyPath)
		if err != nil || h.Code != http.StatusOK {
			t.Errorf("replica %s: %s with the database stopped = %d %q (%v), want 200: it still takes calls", r.Name, replicas.ReadyPath, h.Code, h.Status, err)
		}
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	// /healthz is the one that says the database is back.
	for _, r := range rs {
		r.waitHealth(t, replicas.HealthPath, 30*time.Second, "healthy with the database back", func(h replicas.Health) bool {
			return h.Code == http.StatusOK && h.Programs >= 2
		})
	}
	close(readyzDone)
	readyzWatch.Wait()
	down.Store(false)
	back.Store(true)
	waitCount(t, &kvOKAfter, 3, 30*time.Second, "kv calls to succeed after the database came back")
	close(stop)
	wg.Wait()

	if len(echoErrs) > 0 {
		t.Errorf("%d echo calls failed (of %d), want none: echo touches no data, so the cache serves it: %v", len(echoErrs), int64(len(echoErrs))+echoOK.Load(), echoErrs[0])
	}
	if echoDownOK.Load() == 0 {
		t.Errorf("no echo call succeeded while the database was down: the test shows nothing")
	}
	for _, err := range kvErrs {
		// The replica is alive: the failure is its answer, a host error
		// that says why, not the transport's.
		if !answeredByReplica(err) || !strings.Contains(err.Error(), dataUnavailable) {
			t.Errorf("kv call with the database down: %v, want a host error from the replica saying the data is unavailable", err)
			break
		}
	}
	if len(readyzWrong) > 0 {
		t.Errorf("%s answered other than 200 %d times through the outage, want never: %v", replicas.ReadyPath, len(readyzWrong), readyzWrong[0])
	}
	t.Logf("echo: %d calls, %d while the database was down; kv: %d failed while it was down (%v), %d succeeded after",
		echoOK.Load(), echoDownOK.Load(), kvDownFailed.Load(), firstErr(kvErrs), kvOKAfter.Load())
	for _, r := range rs {
		if !r.Running() {
			t.Errorf("replica %s exited: %v", r.Name, r.Err())
		}
	}
}

// dataUnavailable is what a program and its caller are shown when its data
// cannot be reached (runtime/host's errDataUnavailable, unexported there):
// the words are the contract, since the caller sees nothing else (no code
// crosses the JSON-RPC error's message), so the test matches them.
const dataUnavailable = "host error: the program's data is unavailable now"

// rejectedByTransport is the code of the Go SDK's mark on a request the
// transport could not deliver or got no answer to (its internal
// jsonrpc2.ErrRejected, "rejected by transport"): a 502 from nginx, say.
const rejectedByTransport = -32005

// answeredByReplica reports whether err is an answer of a server: a tool
// result with isError, or a JSON-RPC error other than the transport's mark.
func answeredByReplica(err error) bool {
	if errors.Is(err, errToolFailed) {
		return true
	}
	var walk func(error) bool
	walk = func(err error) bool {
		if rpcErr, ok := err.(*jsonrpc.Error); ok && rpcErr.Code != rejectedByTransport {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			return u.Unwrap() != nil && walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			return slices.ContainsFunc(u.Unwrap(), walk)
		}
		return false
	}
	return walk(err)
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// waitCount waits until n reaches want, for up to timeout.
func waitCount(t *testing.T, n *atomic.Int64, want int64, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %d, want %d", timeout, what, n.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTwoReplicasMigrateAtOnce(t *testing.T) {
	needServers(t, false)
	state := pgtest.URL(t)
	// Both processes start before either is waited for: each finds an
	// empty database.
	rs := []*replica{
		spawnReplica(t, "first", state, replicaOptions{}),
		spawnReplica(t, "second", state, replicaOptions{}),
	}
	for _, r := range rs {
		r.waitListen(t)
		r.waitReady(t, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT version FROM berm_schema ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	// Each step once, in order from 1: a second migration would have
	// recorded a step twice, or failed on a table already there.
	if len(versions) == 0 || !slices.Equal(versions, seq(1, int64(len(versions)))) {
		t.Errorf("berm_schema holds versions %v, want each step once from 1", versions)
	}
	// One of them migrated; the other, waiting on the lock, found the steps
	// applied.
	var migrated []string
	for _, r := range rs {
		if strings.Contains(r.Log(), "migrated the schema") {
			migrated = append(migrated, r.Name)
		}
	}
	if len(migrated) != 1 {
		t.Errorf("replicas that logged migrating the schema: %v, want exactly one", migrated)
	}

	berm(t, "deploy", "--state", state, "echo", "testdata/echo.wasm")
	for _, r := range rs {
		r.waitReady(t, 1)
		c := connect(t, ctx, r.URL, nil, false)
		if text, err := c.call(ctx, "echo_echo", map[string]any{"message": r.Name}); err != nil || !strings.Contains(text, r.Name) {
			t.Errorf("replica %s: echo_echo = %q, %v", r.Name, text, err)
		}
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
