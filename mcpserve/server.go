package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/service"
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
	CodeBusy     = -32013 // the server is shutting down
)

// Defaults of Options.
const (
	DefaultMaxConcurrent = 32
)

// Options configure a Server. Zero values take defaults.
type Options struct {
	Naming Naming
	// MaxConcurrent bounds the calls that run at once; past it calls wait.
	MaxConcurrent int
	// Logger receives a record of each call and each berm.log line.
	Logger *slog.Logger
	// Version is the server's version in the MCP handshake.
	Version string
	// Puller, when set, lets the control API deploy from OCI references.
	Puller Puller
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

// Puller pulls an OCI reference for a deploy through the control API,
// returning the image and the source to record (the reference, pinned).
type Puller interface {
	Pull(ctx context.Context, ref string) (image []byte, source string, err error)
}

// Server serves every program a service deploys as MCP tools. It is an
// adapter: deployments, the store and the runtime's programs are the
// service's; the server turns its changes into tools and runs calls.
type Server struct {
	svc     *service.Service
	rt      *runtime.Runtime
	opts    Options
	log     *slog.Logger
	mcp     *mcp.Server
	work    chan *job
	workers sync.WaitGroup

	mu    sync.Mutex          // guards tools and hints
	tools map[string][]string // program -> its served tool names
	hints map[string]hints    // program -> the annotations its tools were served with

	gate     sync.RWMutex // draining and calls.Add happen under it, so Drain's Wait is never raced
	draining bool
	calls    sync.WaitGroup
	inflight atomic.Int64
	waiting  atomic.Int64 // calls that found every worker busy and wait for one
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
}

type sessionKey struct{}

// New returns a server of what svc deploys; Start serves it. The runtime's
// Options.Log should forward to the server's Log. Close releases it.
func New(svc *service.Service, opts *Options) *Server {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "devel"
	}
	s := &Server{
		svc:   svc,
		rt:    svc.Runtime(),
		opts:  o,
		log:   o.Logger,
		work:  make(chan *job),
		tools: map[string][]string{},
		hints: map[string]hints{},

		idPrefix: randomHex(4) + "-",
	}
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
	// The instructions name the programs deployed when a client connects,
	// which the SDK's fixed ServerOptions.Instructions cannot.
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
				ir.Instructions = s.instructions()
				if s.stateless.Load() && ir.Capabilities != nil {
					caps := *ir.Capabilities
					caps.Tools = &mcp.ToolCapabilities{}
					caps.Resources = &mcp.ResourceCapabilities{}
					ir.Capabilities = &caps
				}
			}
			return res, err
		}
	})
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "usage",
		Title:       "Program usage",
		Description: "What a deployed program is for and when to reach for it, in its own words.",
		URITemplate: "berm://{program}/usage",
		MIMEType:    "text/markdown",
	}, s.readUsage)
	return s
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
func (s *Server) apply(c service.Change) {
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
func (s *Server) serveTools(p *service.Program) {
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
	var p *service.Program
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
		j := &job{ctx: ctx, id: s.newRequestID(), program: program, tool: tool, args: args, done: make(chan struct{})}
		if !s.hand(ctx, j) {
			return nil, ctx.Err()
		}
		<-j.done
		res, err := toolResult(program, tool, j.out, j.err)
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

// hand gives a worker the job, waiting while MaxConcurrent calls run, or
// reports false when ctx is done first. Only a call that waits is counted
// waiting: an idle worker takes a call without the count.
func (s *Server) hand(ctx context.Context, j *job) bool {
	select {
	case s.work <- j:
		return true
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case s.work <- j:
		return true
	case <-ctx.Done():
		return false
	}
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
	out           runtime.Outcome
	err           error
	done          chan struct{}
}

// worker runs calls, MaxConcurrent of them at once. The SDK handles each
// request on a fresh goroutine, whose stack the deep path into wazero would
// regrow on every call; a worker's stack has grown once.
func (s *Server) worker() {
	defer s.workers.Done()
	for j := range s.work {
		start := time.Now()
		j.out, j.err = s.rt.Call(j.ctx, j.program, j.tool, j.args)
		d := time.Since(start)
		s.logCall(j.id, j.program, j.tool, d, j.out, j.err)
		s.observeCall(j.program, j.tool, d, j.args, j.out, j.err)
		close(j.done)
	}
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
	if p := s.rt.Program(program); p != nil {
		attrs = append(attrs, "digest", p.Digest)
	}
	switch {
	case err != nil:
		s.log.Warn("call", append(attrs, "outcome", "error", "error", err.Error())...)
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
	s.log.Info("log", "program", program, "tool", tool, "line", string(line))
	if ss, ok := ctx.Value(sessionKey{}).(*mcp.ServerSession); ok {
		// The SDK drops it unless the client set a level.
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{
			Level:  "info",
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
