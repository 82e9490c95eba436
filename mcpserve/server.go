package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// Naming is how a tool's served name is formed.
type Naming int

const (
	// Underscore serves {program}_{tool}: what Claude Desktop, claude.ai,
	// Claude Code and Codex accept (ABI.md, Names).
	Underscore Naming = iota
	// Dotted serves {program}.{tool}, for clients that accept dots.
	Dotted
)

// Name forms a served tool name.
func (n Naming) Name(program, tool string) string {
	if n == Dotted {
		return manifest.FullName(program, tool)
	}
	return manifest.ServedName(program, tool)
}

// JSON-RPC error codes of the host's errors, in the range JSON-RPC leaves to
// servers. Refused arguments and the program's own failure are tool results
// with isError, not errors.
const (
	CodeTrap     = -32010 // the program trapped
	CodeDeadline = -32011 // the call ran past its deadline
	CodeLimit    = -32012 // a result or failure message over the size limit
	CodeBusy     = -32013 // the server is shutting down, or too busy: too many calls wait
)

// Defaults of Options.
const (
	DefaultMaxConcurrent = 32
	// DefaultWaitingPerWorker is MaxWaiting's default, per worker: enough
	// for a burst of every client at once, few enough that what waits is
	// done within a few deadlines.
	DefaultWaitingPerWorker = 4
)

// Options configure a Server. Zero values take defaults.
type Options struct {
	Naming Naming
	// MaxConcurrent bounds the calls that run at once; past it calls wait.
	MaxConcurrent int
	// MaxWaiting bounds the calls that wait for one of those, each at most
	// its deadline; past it a call is refused at once (CodeBusy). An HTTP
	// session (or stateless request) may have a quarter of them waiting,
	// at least one; over stdio the one client all. DefaultWaitingPerWorker
	// × MaxConcurrent when 0.
	MaxWaiting int
	// MaxUnsentResults bounds, in bytes, the results of 64 KiB or more
	// that are not yet written to their clients over HTTP: the server holds
	// several copies of each while it is encoded and written, which a
	// client that reads nothing held for --write-timeout. Past it a call's
	// result waits, in its worker, for room. Twice the runtime's result
	// limit when 0.
	MaxUnsentResults int64
	// Logger receives a record of each call and each berm.log line.
	Logger *slog.Logger
	// Version is the server's version in the MCP handshake.
	Version string
	// Search, when set, answers the control API's GET /v1/search from the
	// server's index; with Catalog, models may search it too, through the
	// read-only tool berm_search, which deploys nothing.
	Search  SearchFunc
	Catalog bool
	// DataUsage, when set, is a program's key-value bytes as its store
	// charges them (store.Store.DataUsage), read at each scrape of /metrics.
	DataUsage func(program string) (int64, error)
	// CheckState, when set, tells whether the state the server holds can be
	// reached (berm serve passes its state's Ping). GET /healthz asks it,
	// at most once a second however often it is probed, each time within
	// CheckStateTimeout, and answers 503 while it fails; GET /readyz does
	// not ask it. Its error's text is the reason /healthz gives to anyone
	// who can reach it (no token needed): keep it short and free of
	// secrets.
	CheckState func(ctx context.Context) error
}

// Server serves every program a service deploys as MCP tools. It is an
// adapter: deployments, the store and the runtime's programs are the
// service's; the server turns its changes into tools and runs calls.
type Server struct {
	svc     Programs
	opts    Options
	log     *slog.Logger
	mcp     *mcp.Server
	work    chan *job // to an idle worker (queue.free counts them)
	queue   *queue    // the calls waiting for a worker
	workers sync.WaitGroup
	unsent  budget // bytes of results not yet written (MaxUnsentResults)
	// perSession bounds the calls of one HTTP session waiting.
	perSession int
	busy       busyNote

	mu    sync.Mutex          // guards tools and hints
	tools map[string][]string // program -> its served tool names
	hints map[string]hints    // program -> the annotations its tools were served with

	gate     sync.RWMutex // draining and calls.Add happen under it, so Drain's Wait is never raced
	draining bool
	calls    sync.WaitGroup
	inflight atomic.Int64
	owed     atomic.Int64 // requests read whose response is not yet written

	idPrefix string        // of request ids: random, per server
	idSeq    atomic.Uint64 // of request ids
	closed   sync.Once

	health stateHealth // the cached answer of opts.CheckState

	metricsOnce sync.Once
	metrics     atomic.Pointer[metrics] // nil unless the HTTP service serves /metrics
	listChanged atomic.Int64            // changes applied
	// stateless is set once the HTTP service serves without sessions, which
	// can carry no notification: initialize then promises none.
	stateless atomic.Bool

	table   atomic.Pointer[sessionTable] // the HTTP service's sessions, unless stateless
	posts   sync.Map                     // POSTs being served (mcphttp.go), by key
	postSeq atomic.Uint64
}

type sessionKey struct{}

// New returns a server of what svc serves; Start serves it. The runtime's
// Options.Log should forward to the server's Log. Close releases it.
func New(svc Programs, opts *Options) *Server {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = DefaultWaitingPerWorker * o.MaxConcurrent
	}
	if o.MaxUnsentResults <= 0 {
		o.MaxUnsentResults = 2 * int64(svc.Limits().MaxResult)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "devel"
	}
	s := &Server{
		svc:   svc,
		opts:  o,
		log:   o.Logger,
		work:  make(chan *job, o.MaxConcurrent),
		queue: newQueue(o.MaxConcurrent, o.MaxWaiting),
		tools: map[string][]string{},
		hints: map[string]hints{},

		idPrefix:   randomHex(4) + "-",
		perSession: max(1, o.MaxWaiting/4),
	}
	s.unsent.init(o.MaxUnsentResults)
	s.health.ask, s.health.log, s.health.now = o.CheckState, o.Logger, time.Now
	s.workers.Add(o.MaxConcurrent)
	for range o.MaxConcurrent {
		go s.worker()
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "berm", Version: o.Version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
	})
	if o.Catalog && o.Search != nil {
		AddSearchTool(s.mcp, o.Search)
	}
	s.mcp.AddReceivingMiddleware(s.receiving)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "usage",
		Title:       "Program usage",
		Description: "What a deployed program is for and when to reach for it, in its own words.",
		URITemplate: "berm://{program}/usage",
		MIMEType:    "text/markdown",
	}, s.readUsage)
	return s
}

// receiving is what berm adds to the SDK's handling of a request.
func (s *Server) receiving(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == methodSetLevel {
			if err := s.checkSetLevel(req); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, method, req)
		if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
			// The instructions name the programs deployed when a client
			// connects, which the SDK's fixed ServerOptions.Instructions
			// cannot.
			ir.Instructions = s.instructions()
			if s.stateless.Load() && ir.Capabilities != nil {
				caps := *ir.Capabilities
				caps.Tools = &mcp.ToolCapabilities{}
				caps.Resources = &mcp.ResourceCapabilities{}
				ir.Capabilities = &caps
			}
			// A new HTTP session takes the place its POST reserved.
			ss, _ := req.GetSession().(*mcp.ServerSession)
			if ps := s.postOf(req.GetExtra()); ps != nil && ps.session != nil && ss != nil {
				if t := s.table.Load(); t != nil {
					t.bind(ps.session, ss, ir.ProtocolVersion)
				}
			}
		}
		return res, err
	}
}

// logLevels are MCP's (RFC 5424's), least severe first.
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// checkSetLevel refuses a level MCP does not have, which the SDK took and
// read as debug, sending every message after it (go-sdk v1.8.0,
// mcp/logging.go, mcpLevelToSlog).
//
// On a stateless server a level cannot outlive the request that sets it:
// the SDK keeps it with that request's own session, gone with its response,
// and gives every request's session the level info. There is no client to
// keep it for (no session; a balancer's replicas share nothing), and MCP
// clients (the conformance suite's too) expect the level taken, so it is
// taken, and the README says what it does there: nothing past its request.
func (s *Server) checkSetLevel(req mcp.Request) error {
	p, _ := req.GetParams().(*mcp.SetLoggingLevelParams)
	if p == nil || !slices.Contains(logLevels, p.Level) {
		level := mcp.LoggingLevel("")
		if p != nil {
			level = p.Level
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"logging/setLevel: level %q: want one of debug, info, notice, warning, error, critical, alert, emergency", level)}
	}
	return nil
}

// MCP is the underlying MCP server, for transports.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Start serves what the service deploys: the tools are listed at once, from
// the manifests, while the programs compile (from the cache, normally) in the
// background, and calls wait for that. Deployments from other processes are
// served, replaced or dropped within a second from then on.
func (s *Server) Start(ctx context.Context) error {
	if err := s.svc.Start(ctx, s.apply); err != nil {
		return err
	}
	if len(s.svc.Served()) == 0 {
		what := "no tools"
		if s.opts.Catalog && s.opts.Search != nil {
			what = "only " + SearchToolName
		}
		s.log.Warn("no programs deployed: serving " + what + " until one is (try berm deploy --example hello)")
	}
	return nil
}

// Loaded is closed once the programs Start found are compiled and callable.
func (s *Server) Loaded() <-chan struct{} { return s.svc.Loaded() }

// Close stops taking calls, waits for those in flight (until ctx is done),
// then stops every goroutine the server and its service started. Close the
// runtime after it.
func (s *Server) Close(ctx context.Context) error {
	err := s.Drain(ctx)
	s.closed.Do(func() {
		close(s.work)
		s.workers.Wait()
	})
	if cerr := s.svc.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// apply turns one change of the service into tools: the service calls it in
// order, never two at once.
func (s *Server) apply(c Change) {
	if c.Served == nil {
		s.mu.Lock()
		gone := s.tools[c.Removed]
		delete(s.tools, c.Removed)
		delete(s.hints, c.Removed)
		s.mu.Unlock()
		s.mcp.RemoveTools(gone...)
		s.mcp.RemoveResources(usageURI(c.Removed))
		s.refreshCallers(c.Removed)
		s.observeApply(c.Removed)
		return
	}
	s.serveTools(c.Served)
	s.refreshCallers(c.Served.Name)
	s.observeApply("")
}

// serveTools serves p's tools, with the annotations its deployment and its
// callees make, and its usage resource, replacing what p served before.
func (s *Server) serveTools(p *Program) {
	h := s.hintsOf(p)
	keep := map[string]bool{}
	var served []string
	for _, t := range p.Manifest.Tools {
		name := s.opts.Naming.Name(p.Name, t.Name)
		tool := mcpTool(name, p.Manifest, t)
		tool.Annotations = h.annotations()
		if err := addTool(s.mcp, tool, s.handler(p.Name, t.Name)); err != nil {
			s.log.Error("serve", "program", p.Name, "tool", name, "error", err)
			continue
		}
		keep[name] = true
		served = append(served, name)
	}
	s.mu.Lock()
	old := s.tools[p.Name]
	s.tools[p.Name] = served
	s.hints[p.Name] = h
	s.mu.Unlock()
	var gone []string
	for _, t := range old {
		if !keep[t] {
			gone = append(gone, t)
		}
	}
	s.mcp.RemoveTools(gone...)
	s.mcp.AddResource(&mcp.Resource{
		URI:         usageURI(p.Name),
		Name:        p.Name + " usage",
		Description: "When to reach for the tools of " + p.Name,
		MIMEType:    "text/markdown",
	}, s.readUsage)
}

// programCount is the number of programs served, for /healthz and metrics:
// Programs would copy every tool list to count them.
func (s *Server) programCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tools)
}

// Programs lists the served programs and their served tool names.
func (s *Server) Programs() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for name, tools := range s.tools {
		out[name] = append([]string(nil), tools...)
	}
	return out
}

func usageURI(program string) string { return "berm://" + program + "/usage" }

// mcpTool is how a manifest's tool is served: its description, followed by
// the first paragraph of the program's usage so that a model choosing among
// many tools knows what program each belongs to.
func mcpTool(served string, m *manifest.Manifest, t *manifest.Tool) *mcp.Tool {
	desc := t.Description
	if u := firstParagraph(m.Usage, 300); u != "" {
		if desc != "" {
			desc += "\n\n"
		}
		desc += u
	}
	return &mcp.Tool{Name: served, Description: desc, InputSchema: json.RawMessage(t.Parameters)}
}

func firstParagraph(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// instructions is what the server tells a connecting client: how tools are
// named and, within Claude Code's 2 KB, what each program is for.
func (s *Server) instructions() string {
	served := s.svc.Served()
	names := make([]string, 0, len(served))
	usage := map[string]string{}
	for _, p := range served {
		names = append(names, p.Name)
		usage[p.Name] = firstParagraph(p.Manifest.Usage, 200)
	}
	const budget = 2000
	var b strings.Builder
	sep := "_"
	if s.opts.Naming == Dotted {
		sep = "."
	}
	fmt.Fprintf(&b, "berm serves the tools of the WebAssembly programs deployed on this host. "+
		"Each tool is named {program}%s{tool}; the resource berm://{program}/usage says what a program is for.", sep)
	if len(names) > 0 {
		b.WriteString("\n\nPrograms:")
	}
	for i, name := range names {
		line := "\n- " + name
		if usage[name] != "" {
			line += ": " + strings.ReplaceAll(usage[name], "\n", " ")
		}
		if b.Len()+len(line) > budget {
			fmt.Fprintf(&b, "\n- and %d more: see resources/list", len(names)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func (s *Server) readUsage(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, ok := strings.CutPrefix(uri, "berm://")
	if ok {
		name, ok = strings.CutSuffix(name, "/usage")
	}
	var p *Program
	if ok {
		p = s.svc.Program(name)
	}
	if p == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: uri, MIMEType: "text/markdown", Text: usageText(p),
	}}}, nil
}

// handler runs one tool through the runtime and turns its outcome into MCP.
func (s *Server) handler(program, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !s.enter() {
			return nil, &jsonrpc.Error{Code: CodeBusy, Message: "berm is shutting down: call refused"}
		}
		defer s.calls.Done()
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		ps := s.postOf(req.Extra)
		var hold *callHold
		if ps != nil {
			// Over HTTP a call may be ended by what the SDK does not see:
			// its session's end, its POST's.
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			if hold = s.holdOf(ps, req, cancel); hold != nil {
				defer ps.ids.returned(hold.token)
			}
			t := time.AfterFunc(headersAfter, ps.rw.flushHeaders)
			defer t.Stop()
			// Without a session, the POST is the only way back: a call
			// whose POST's connection went has no one to answer.
			if s.stateless.Load() {
				stop := context.AfterFunc(ps.ctx, func() { cancel(errPostGone) })
				defer stop()
			}
		}
		if err := s.svc.Ready(ctx, program); err != nil {
			return nil, err
		}
		args := []byte(req.Params.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		if req.Session != nil {
			ctx = context.WithValue(ctx, sessionKey{}, req.Session)
		}

		j := &job{ctx: ctx, id: s.newRequestID(), program: program, tool: tool, args: args,
			hold: hold, done: make(chan struct{})}
		if err := s.hand(ctx, j, req.Session, ps); err != nil {
			var rerr *jsonrpc.Error
			if !errors.As(err, &rerr) {
				_, err = toolResult(program, tool, runtime.Outcome{}, err)
			}
			return nil, err
		}
		<-j.done
		res, err := toolResult(program, tool, j.out, j.err)
		j.out, j.args = runtime.Outcome{}, nil // held no longer than the result made of them
		// The request id goes back in the result's _meta, so that a client's
		// report can be matched to the server's log line. A JSON-RPC error
		// has no _meta: its id is on the log line only, and the error on the
		// wire stays as ABI.md says.
		if res != nil {
			res.Meta = mcp.Meta{MetaRequestID: j.id}
		}
		return res, err
	}
}

// hand gives the job a worker, at once or once its turn comes, or returns
// the error to answer with: the calls waiting are at a bound (CodeBusy);
// the call waited its whole deadline (it ends as a deadline, not run); ctx
// ended, or the POST's connection went, first (no one can receive it).
func (s *Server) hand(ctx context.Context, j *job, owner any, ps *postState) error {
	perOwner := s.opts.MaxWaiting // stdio: one client
	if ps != nil {
		perOwner = s.perSession
	}
	if ps != nil && ps.ctx.Err() != nil {
		return errPostGone // before it began
	}
	now, busy := s.queue.enqueue(j, owner, perOwner)
	switch {
	case busy != nil:
		s.busy.note(s.log)
		return busy.rpcError(s.opts.MaxConcurrent)
	case now:
		s.work <- j // never blocks: it has room for every worker
		return nil
	}
	wait := s.svc.Limits().Deadline
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var gone <-chan struct{}
	if ps != nil {
		gone = ps.ctx.Done()
	}
	var err error
	select {
	case <-j.started:
		return s.started(j)
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-gone:
		// A stateful session's call whose POST went while it waited:
		// berm keeps no events a client could resume the stream from, so
		// its response would be lost; not yet begun, it is not begun. (A
		// call running when its POST goes runs on: MCP has a client cancel
		// one, a disconnect being no cancellation.)
		err = errPostGone
	case <-timer.C:
		err = fmt.Errorf("%s: %w: waited %s, the call's deadline, for one of the %d calls that run at once (--max-concurrent) to end, and did not run; try again when the server is less busy",
			manifest.FullName(j.program, j.tool), runtime.ErrDeadline, wait, s.opts.MaxConcurrent)
		s.logCall(j.id, j.program, j.tool, wait, runtime.Outcome{}, err)
		s.observeCall(j.program, j.tool, wait, j.args, runtime.Outcome{}, err)
	}
	if !s.queue.withdraw(j) {
		return s.started(j) // a worker took it meanwhile (it runs), or another call its place
	}
	return err
}

// started is what a call whose wait ended in its favour, or not, is
// answered with: nil, it runs; or it gave up its place in the queue to a
// call of a session with fewer waiting.
func (s *Server) started(j *job) error {
	<-j.started
	if j.bumped != nil {
		s.busy.note(s.log)
		return j.bumped.rpcError(s.opts.MaxConcurrent)
	}
	return nil
}

// Why a call ends before it is done (the cause of its context's cancel).
var (
	errPostGone     = errors.New("its POST's connection is gone, and with it the only way to answer")
	errSessionEnded = errors.New("its session ended (DELETE, or ended for a new session at --max-sessions)")
	errCancelled    = errors.New("the client cancelled it (notifications/cancelled)")
)

func (b *errBusy) rpcError(workers int) *jsonrpc.Error {
	msg := fmt.Sprintf("berm is busy: %d calls wait for one of the %d that run at once (--max-concurrent), the most that may wait (--max-waiting): call refused; try again shortly", b.n, workers)
	if !b.server {
		calls := "calls"
		if b.n == 1 {
			calls = "call"
		}
		msg = fmt.Sprintf("berm is busy: this session has %d %s waiting for one of the %d that run at once (--max-concurrent), the most one session may have waiting (a quarter of --max-waiting): call refused; wait for one of them to end", b.n, calls, workers)
	}
	return &jsonrpc.Error{Code: CodeBusy, Message: msg}
}

// busyNote says in the log, at most once a minute, how many calls the
// bounds of calls waiting refused: a flood is one line a minute.
type busyNote struct {
	total   atomic.Int64 // for /metrics
	refused atomic.Int64 // since the last warning
	mu      sync.Mutex
	warned  time.Time
}

func (b *busyNote) note(log *slog.Logger) {
	b.total.Add(1)
	b.refused.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.warned) < time.Minute {
		return
	}
	b.warned = time.Now()
	log.Warn("calls refused: as many wait as may (--max-waiting, or a quarter of it in one HTTP session)", "refused", b.refused.Swap(0))
}

// callHold is a tools/call's over HTTP, while it runs and until its result
// is written: its cancel, for DELETE, an eviction and a late
// notifications/cancelled, and the bytes of unsent results it holds.
type callHold struct {
	token  string
	cancel context.CancelCauseFunc
	gone   <-chan struct{} // its POST's connection went
	s      *Server

	mu      sync.Mutex
	charged int64
	done    bool
}

// holdOf binds a call that came over HTTP to its token, which berm put in
// its params' _meta (mcphttp.go): the SDK hides the request's id from a
// handler. It is nil for a call over stdio, or one whose POST has ended.
func (s *Server) holdOf(ps *postState, req *mcp.CallToolRequest, cancel context.CancelCauseFunc) *callHold {
	if ps == nil || req.Params == nil || req.Params.Meta == nil {
		return nil
	}
	token, _ := req.Params.Meta[metaToken].(string)
	delete(req.Params.Meta, metaToken)
	h := &callHold{token: token, cancel: cancel, gone: ps.ctx.Done(), s: s}
	if token == "" || !ps.ids.bind(token, h) {
		return nil
	}
	return h
}

// charge takes n bytes of unsent results, waiting for room, or returns why
// the result is to be dropped instead: its POST went (stateful: the result
// would not be written, and encoding it would cost as much as sending it),
// or ctx ended.
func (h *callHold) charge(ctx context.Context, n int64) error {
	if !h.s.unsent.take(ctx, h.gone, n) {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return errPostGone
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		h.s.unsent.give(n) // written (or dropped) already
		return nil
	}
	h.charged = n
	return nil
}

// sent gives back what the call holds once its response is written, or
// will never be.
func (h *callHold) sent() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.done = true
		h.s.unsent.give(h.charged)
		h.charged = 0
	}
}

// unsentFree is the size of a result below which it is not charged: what
// small results hold is small, and charging them would let a few slow
// clients of large results hold every call's result.
const unsentFree = 64 << 10

// budget is a bound of bytes that takers wait for.
type budget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	freed chan struct{} // closed, and replaced, whenever bytes are given back
}

func (b *budget) init(max int64) {
	b.max, b.freed = max, make(chan struct{})
}

// take takes n bytes, waiting until they fit (or nothing is taken: a taker
// over the whole bound goes alone), or reports false once ctx is done or
// gone closed.
func (b *budget) take(ctx context.Context, gone <-chan struct{}, n int64) bool {
	for {
		b.mu.Lock()
		if b.fitsLocked(n) {
			b.used += n
			b.mu.Unlock()
			return true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		case <-gone:
			return false
		}
	}
}

// force takes n bytes whether or not they fit.
func (b *budget) force(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// tryTake takes n bytes if they fit now (or nothing is taken).
func (b *budget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fitsLocked(n) {
		return false
	}
	b.used += n
	return true
}

// fitsLocked reports whether n bytes fit: a taker over the whole bound goes
// alone.
func (b *budget) fitsLocked(n int64) bool { return b.used == 0 || b.used+n <= b.max }

func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// MetaRequestID is the key, in a tools/call result's _meta, of the call's
// request id: the request_id of the server's log line for that call.
const MetaRequestID = "berm/request_id"

// newRequestID makes a request id: 8 random hex characters per server, then
// a counter, so an id is short, unique within the process and costs an
// atomic add.
func (s *Server) newRequestID() string {
	return s.idPrefix + strconv.FormatUint(s.idSeq.Add(1), 10)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// job is one call handed to a worker.
type job struct {
	ctx           context.Context
	id            string // the request id, logged and in the result's _meta
	program, tool string
	args          []byte
	hold          *callHold     // over HTTP
	line          *line         // while it waits, the line it waits in (queue.go)
	started       chan struct{} // made when it waits, closed when it stops waiting
	bumped        *errBusy      // set before started is closed: it gave up its place
	out           runtime.Outcome
	err           error
	done          chan struct{}
}

// worker runs calls, MaxConcurrent of them at once, and after each the next
// that waits. The SDK handles each request on a fresh goroutine, whose stack
// the deep path into wazero would regrow on every call; a worker's stack has
// grown once.
func (s *Server) worker() {
	defer s.workers.Done()
	for j := range s.work {
		for ; j != nil; j = s.queue.done() {
			s.run(j)
		}
	}
}

func (s *Server) run(j *job) {
	start := time.Now()
	j.out, j.err = s.svc.Call(j.ctx, j.program, j.tool, j.args)
	d := time.Since(start)
	if errors.Is(j.err, context.Canceled) {
		if cause := context.Cause(j.ctx); cause != nil && cause != context.Canceled {
			j.err = fmt.Errorf("%w: %w", j.err, cause)
		}
	}
	s.logCall(j.id, j.program, j.tool, d, j.out, j.err)
	s.observeCall(j.program, j.tool, d, j.args, j.out, j.err)
	// A large result waits here, holding its worker, for room among those
	// not yet written: so at most MaxConcurrent of them are held whole,
	// and MaxUnsentResults of them in the copies their encoding makes.
	if n := int64(len(j.out.Result) + len(j.out.Failure)); n >= unsentFree && j.hold != nil {
		if err := j.hold.charge(j.ctx, n); err != nil {
			j.out, j.err = runtime.Outcome{}, err
		}
	}
	close(j.done)
}

func (s *Server) logCall(id, program, tool string, d time.Duration, out runtime.Outcome, err error) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	// berm serve --stdio logs at warn: the attributes of a call that went
	// well would be built for nothing.
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"request_id", id, "program", program, "tool", tool, "duration", d}
	if p := s.svc.Program(program); p != nil {
		attrs = append(attrs, "digest", p.Digest)
	}
	switch {
	case err != nil:
		s.log.Warn("call", append(attrs, "outcome", outcome(out, err), "error", err.Error())...)
	case out.Failed:
		s.log.Info("call", append(attrs, "outcome", "failure", "failure", string(out.Failure))...)
	default:
		s.log.Info("call", append(attrs, "outcome", "result", "bytes", len(out.Result))...)
	}
}

// toolResult maps a call's two-level outcome onto MCP: the program's result
// and failure, and the host's refusal of the arguments, are tool results (the
// model sees them); every other host error is a JSON-RPC error.
func toolResult(program, tool string, out runtime.Outcome, err error) (*mcp.CallToolResult, error) {
	switch {
	case errors.Is(err, runtime.ErrArguments):
		return errorResult(err.Error()), nil
	case errors.Is(err, runtime.ErrNoProgram), errors.Is(err, runtime.ErrNoTool):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, runtime.ErrTrap):
		return nil, &jsonrpc.Error{Code: CodeTrap, Message: err.Error()}
	case errors.Is(err, runtime.ErrDeadline):
		return nil, &jsonrpc.Error{Code: CodeDeadline, Message: err.Error()}
	case errors.Is(err, runtime.ErrLimit):
		return nil, &jsonrpc.Error{Code: CodeLimit, Message: err.Error()}
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	case out.Failed:
		return errorResult(strings.ToValidUTF8(string(out.Failure), "\uFFFD")), nil
	}
	return resultContent(program, tool, out.Result), nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// maxStructured is the largest result also given as structured content.
const maxStructured = 1 << 20

// resultContent is a result as MCP content: UTF-8 text, also given as
// structured content when it is a JSON object; bytes that are not UTF-8
// travel as an embedded binary resource, base64 on the wire, so that nothing
// is lost.
func resultContent(program, tool string, result []byte) *mcp.CallToolResult {
	if !utf8.Valid(result) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI:      "berm://" + program + "/" + tool + "/result",
			MIMEType: "application/octet-stream",
			Blob:     result,
		}}}}
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(result)}}}
	// Structured content repeats the text on the wire: past maxStructured a
	// result goes once, so that what a result costs stays near its size.
	if trimmed := strings.TrimSpace(string(result)); len(result) <= maxStructured && strings.HasPrefix(trimmed, "{") && json.Valid(result) {
		res.StructuredContent = json.RawMessage(result)
	}
	return res
}

// Log forwards a berm.log line to the structured log and, as an MCP log
// message, to the client whose call made it (if it asked for logs).
func (s *Server) Log(ctx context.Context, program, tool string, line []byte) {
	// A program that says it is dying (a Go panic) is logged louder: it is
	// what a trap's message quotes, and what an operator looks for.
	level, mcpLevel := slog.LevelInfo, mcp.LoggingLevel("info")
	if runtime.FatalLine(line) {
		level, mcpLevel = slog.LevelWarn, "warning"
	}
	s.log.Log(ctx, level, "log", "program", program, "tool", tool, "line", string(line))
	if ss, ok := ctx.Value(sessionKey{}).(*mcp.ServerSession); ok {
		// The SDK drops it unless the client set a level.
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{
			Level:  mcpLevel,
			Logger: program,
			Data:   strings.ToValidUTF8(string(line), "\uFFFD"),
		})
	}
}

// InFlight is the number of calls the server has taken and not yet answered.
func (s *Server) InFlight() int { return int(s.inflight.Load()) }

// Draining reports whether the server has stopped taking calls.
func (s *Server) Draining() bool {
	s.gate.RLock()
	defer s.gate.RUnlock()
	return s.draining
}

// enter counts a call in, unless the server is draining.
func (s *Server) enter() bool {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.draining {
		return false
	}
	s.calls.Add(1)
	return true
}

// Drain stops taking calls and waits, until ctx is done, for those in flight.
func (s *Server) Drain(ctx context.Context) error {
	s.gate.Lock()
	s.draining = true
	s.gate.Unlock()
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
