package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/internal/mcpservice"
	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

type serveOptions struct {
	root          string
	state         string // --state: "" for the directory root
	stdio         bool
	http          mcpserve.HTTPConfig
	toolNames     string
	maxConcurrent int
	maxWaiting    int
	logFormat     string
	logLevel      string          // "" takes the transport's default
	reg           registryOptions // the control API's pulls
	// catalog offers models berm_search over the server's index.
	catalog bool
	limitOptions
	totalMemory string
	bodyMemory  string // --max-body-memory
}

func newServeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve every deployed program's tools on one MCP endpoint",
		Description: `Each tool is served as {program}_{tool}, described by its manifest, with the
program's usage as the resource berm://{program}/usage. Programs deployed,
replaced or removed while the server runs (from any process) are served within
a second. On SIGTERM it stops taking calls, finishes those in flight and exits.

   berm serve --stdio                            # for Claude Code:
   claude mcp add berm -- berm serve --stdio
   berm serve                                    # streamable HTTP at http://127.0.0.1:7777/mcp
   berm serve --addr 0.0.0.0:7777 --token "$BERM_TOKEN" --tls-cert c.pem --tls-key k.pem

Over HTTP the control API takes remote deploys (berm deploy --server URL), and
GET /livez, /readyz and /healthz answer orchestrators and load balancers (see
below). Any address beyond loopback needs --token;
every request then needs "Authorization: Bearer <token>". On loopback only
loopback names may appear in Host (DNS rebinding); behind a reverse proxy that
passes the client's Host, name it with --allowed-host. Bodies, responses and
sessions are bounded (--read-timeout, --write-timeout, --max-sessions,
--max-sessions-per-client, --session-idle): a server at --max-sessions ends
an idle session for a new one, first one that never went past initialize,
of the client holding the most sessions, so a flood of initialize requests
replaces its own sessions and cannot lock other clients out. --stdio serves
no HTTP, and refuses these flags beside it.

Every response carries its request's id exactly as the client sent it (1e308
stays 1e308); a request whose id is that of one in flight is refused, and a
call the client cancels stops and gets no response. Logs go to stderr; with
--stdio, stdout carries nothing but the protocol, and the log level defaults
to warn, since Claude Code labels every stderr line of a stdio server an
error. Each call's log line has a request_id, which the call's result also
carries in _meta (berm/request_id).

Replicas: with --state postgres://... (or BERM_STATE) every berm serve that
names the same database serves the same programs and data, and sees a deploy
made through any of them (or berm deploy --state) within a second. Each keeps
compiled code under its own --root; without one it compiles at every start.
Over HTTP, a database unreachable at start is retried (250ms doubling to
10s) until it answers; meanwhile GET /livez answers 200 and GET /readyz and
/healthz 503 "not ready". With --stdio it is an error at once, which the
client shows. A database that answers no (a wrong password or database name,
a schema from a newer berm) is an error at once.
Behind a balancer without sticky sessions, add --stateless: each request
stands alone, so any replica answers it; clients keep tools/list, tools/call
and resources but get no notifications/tools/list_changed (they see a change
at their next tools/list) and no GET stream, and a level that
logging/setLevel takes applies to its own request alone: a call's log
messages come at info and above.

   berm serve --state postgres://berm@db/berm --addr 0.0.0.0:7777 --token "$BERM_TOKEN" --stateless

The probes, none of which needs the token: GET /livez is liveness (200
whenever the process answers HTTP); GET /readyz is readiness to take calls
(503 until the programs are loaded, and while draining), whatever the
database: calls of programs that touch no data work without it, so a
readiness probe should not take every replica out when it goes away;
GET /healthz is /readyz and also 503 "database unreachable" while the
database does not answer.

Run under the name bermd (a link to berm or a copy of it, bermd.exe too),
berm is berm serve: "bermd &" and "bermd --addr 127.0.0.1:7777" take serve's
flags and --root.`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "stdio", Usage: "serve MCP over stdin and stdout"},
			&cli.StringFlag{Name: "addr", Value: mcpserve.DefaultAddr, Usage: "listen address for streamable HTTP (at /mcp)", Sources: cli.EnvVars("BERM_ADDR")},
			&cli.StringFlag{Name: "token", Usage: "bearer token every HTTP request must carry", Sources: cli.EnvVars("BERM_TOKEN")},
			&cli.StringFlag{Name: "tls-cert", Usage: "certificate `FILE` (PEM) to serve HTTPS"},
			&cli.StringFlag{Name: "tls-key", Usage: "key `FILE` (PEM) to serve HTTPS"},
			&cli.StringSliceFlag{Name: "allowed-host", Usage: "a `NAME` besides loopback that Host and Origin may carry, for a reverse proxy (repeatable; beyond loopback, any Host unless given)"},
			&cli.DurationFlag{Name: "read-timeout", Value: mcpserve.DefaultReadTimeout, Usage: "time a request has to send its body"},
			&cli.DurationFlag{Name: "write-timeout", Value: mcpserve.DefaultWriteTimeout, Usage: "time each write of a response (a result, an event of a stream) has to reach the client"},
			&cli.IntFlag{Name: "max-sessions", Value: mcpserve.DefaultMaxSessions, Usage: "MCP sessions held at once; past it a new one ends an idle one (of the client holding the most, the least recently used), and is refused (503) only when every session has a request in flight"},
			&cli.IntFlag{Name: "max-sessions-per-client", Usage: "MCP sessions one client holds at once; past it its new one ends its own least recently used idle one. A client is a remote address (IPv6 by /64); every loopback address is one client, which this does not bound, and so is every client behind one proxy. 0: no bound but a client's share of --max-sessions"},
			&cli.DurationFlag{Name: "session-idle", Value: mcpserve.DefaultSessionIdle, Usage: "an MCP session without a request for this long ends"},
			&cli.BoolFlag{Name: "stateless", Usage: "serve MCP without sessions, so that replicas behind a balancer need no sticky sessions; clients then get no list_changed (they see changes at their next tools/list)"},
			&cli.BoolFlag{Name: "metrics", Usage: "serve Prometheus metrics at GET /metrics (under the same token and Host rules as every route)"},
			&cli.BoolFlag{Name: "catalog", Usage: "offer models the read-only tool berm_search over the index of the server's root (berm config set index URL); it deploys nothing"},
			&cli.StringFlag{Name: "tool-names", Value: "underscore", Usage: "underscore serves {program}_{tool}; dotted serves {program}.{tool}, for clients that accept dots"},
			&cli.IntFlag{Name: "max-concurrent", Value: mcpserve.DefaultMaxConcurrent, Usage: "calls that run at once; past it calls wait"},
			&cli.IntFlag{Name: "max-waiting", Usage: "calls that wait past --max-concurrent, each at most its deadline; past it a call is refused at once (-32013), and an HTTP session may have a quarter of them waiting. 0: 4 × --max-concurrent"},
			&cli.StringFlag{Name: "max-body-memory", Value: "0", Usage: "bytes of HTTP request bodies held at once (MCP messages and uploads); past it a request gets 503 with Retry-After. 0: twice the larger of the image limit and --max-args + 64KiB"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (default: info over HTTP; warn with --stdio, since Claude Code labels a stdio server's stderr lines as errors)"},
			&cli.StringFlag{Name: "total-memory", Value: "0", Usage: "memory of all instances at once (64MiB, 8GiB); 0 leaves it at --max-concurrent × (call depth+1) × --memory"},
		}, append(limitFlags(), registryFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("serve takes no arguments")
			}
			if cmd.Bool("stdio") {
				if err := refuseHTTPFlags(cmd); err != nil {
					return err
				}
			}
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := serveOptions{
				root:  cmd.String("root"),
				state: stateFlag(cmd),
				stdio: cmd.Bool("stdio"),
				http: mcpserve.HTTPConfig{
					Addr:    cmd.String("addr"),
					Token:   cmd.String("token"),
					TLSCert: cmd.String("tls-cert"),
					TLSKey:  cmd.String("tls-key"),

					AllowedHosts:         cmd.StringSlice("allowed-host"),
					ReadTimeout:          cmd.Duration("read-timeout"),
					WriteTimeout:         cmd.Duration("write-timeout"),
					MaxSessions:          int(cmd.Int("max-sessions")),
					MaxSessionsPerClient: int(cmd.Int("max-sessions-per-client")),
					SessionIdle:          cmd.Duration("session-idle"),
					Metrics:              cmd.Bool("metrics"),
					Stateless:            cmd.Bool("stateless"),
				},
				catalog:       cmd.Bool("catalog"),
				toolNames:     cmd.String("tool-names"),
				maxConcurrent: int(cmd.Int("max-concurrent")),
				maxWaiting:    int(cmd.Int("max-waiting")),
				bodyMemory:    cmd.String("max-body-memory"),
				logFormat:     cmd.String("log-format"),
				logLevel:      cmd.String("log-level"),
				reg:           reg,
				limitOptions:  readLimitFlags(cmd),
				totalMemory:   cmd.String("total-memory"),
			}
			return runServe(ctx, e, opts)
		},
	}
}

func runServe(ctx context.Context, e *env, opts serveOptions) error {
	cfg, err := opts.check(e)
	if err != nil {
		return err
	}
	return opts.serve(ctx, e, cfg)
}

// serveConfig is what serve's flags say, checked whole before anything is
// listened on, opened or loaded, so that a wrong flag fails at once.
type serveConfig struct {
	limits runtime.Limits
	naming mcpserve.Naming
	logger *slog.Logger
}

// check reads and checks every flag of serve: the HTTP service's through
// HTTPConfig.Check, which RunHTTP would otherwise answer after the programs
// loaded.
func (opts *serveOptions) check(e *env) (serveConfig, error) {
	limits, err := opts.limits()
	if err != nil {
		return serveConfig{}, err
	}
	total, err := parseSize(opts.totalMemory)
	if err != nil {
		return serveConfig{}, usagef("--total-memory: %v", err)
	}
	if total != 0 && total < limits.Memory {
		return serveConfig{}, usagef("--total-memory %s: want 0 or at least --memory (%d bytes)", opts.totalMemory, limits.Memory)
	}
	limits.TotalMemory = total
	if !opts.stdio {
		if _, err := net.ResolveTCPAddr("tcp", opts.http.Addr); err != nil {
			return serveConfig{}, usagef("--addr %q: want host:port, such as 127.0.0.1:7777 (%v)", opts.http.Addr, err)
		}
	}
	var naming mcpserve.Naming
	switch opts.toolNames {
	case "underscore":
	case "dotted":
		naming = mcpserve.Dotted
	default:
		return serveConfig{}, usagef("--tool-names %q: want underscore or dotted", opts.toolNames)
	}
	if opts.maxConcurrent <= 0 {
		return serveConfig{}, usagef("--max-concurrent %d: want 1 or more", opts.maxConcurrent)
	}
	if opts.maxWaiting < 0 {
		return serveConfig{}, usagef("--max-waiting %d: want 0 (4 × --max-concurrent) or more", opts.maxWaiting)
	}
	bodyMemory, err := parseSize(opts.bodyMemory)
	if err != nil {
		return serveConfig{}, usagef("--max-body-memory: %v", err)
	}
	// Checked here, with the flag as given; HTTPConfig.Check would name bytes.
	opts.http.MaxBody = int64(limits.MaxArgs) + 64<<10
	if most := max(runtime.DefaultMaxImage, opts.http.MaxBody); bodyMemory != 0 && bodyMemory < uint64(most) {
		return serveConfig{}, usagef("--max-body-memory %s: %v (%d bytes: an image, or --max-args and 64 KiB): raise it, or lower --max-args",
			opts.bodyMemory, mcpserve.ErrBodyMemory, most)
	}
	opts.http.MaxBodyMemory = int64(bodyMemory)
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--read-timeout", opts.http.ReadTimeout}, {"--write-timeout", opts.http.WriteTimeout}, {"--session-idle", opts.http.SessionIdle}} {
		if d.value <= 0 {
			return serveConfig{}, usagef("%s %s: want a positive duration", d.flag, d.value)
		}
	}
	if opts.http.MaxSessions <= 0 {
		return serveConfig{}, usagef("--max-sessions %d: want 1 or more", opts.http.MaxSessions)
	}
	if opts.http.MaxSessionsPerClient < 0 {
		return serveConfig{}, usagef("--max-sessions-per-client %d: want 0 (no bound but a client's share of --max-sessions) or more", opts.http.MaxSessionsPerClient)
	}
	level, err := logLevel(opts.logLevel, opts.stdio)
	if err != nil {
		return serveConfig{}, err
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler
	switch opts.logFormat {
	case "text":
		handler = slog.NewTextHandler(e.stderr, hopts)
	case "json":
		handler = slog.NewJSONHandler(e.stderr, hopts)
	default:
		return serveConfig{}, usagef("--log-format %q: want text or json", opts.logFormat)
	}
	if !opts.stdio {
		if err := opts.http.Check(); err != nil {
			return serveConfig{}, httpConfigError(err)
		}
	}
	return serveConfig{limits: limits, naming: naming, logger: slog.New(handler)}, nil
}

// httpConfigError is HTTPConfig.Check's refusal as the command line says it.
func httpConfigError(err error) error {
	if errors.Is(err, mcpserve.ErrNeedsToken) {
		return withHint(err, "give --token (or BERM_TOKEN), or listen on loopback (127.0.0.1)")
	}
	return usageError{err}
}

// serve builds the server that checked describes and runs it until ctx is
// done.
func (opts serveOptions) serve(ctx context.Context, e *env, checked serveConfig) error {
	limits, naming, logger := checked.limits, checked.naming, checked.logger
	tuneGC()
	// The address is taken before anything loads (the database, the
	// programs), so that a busy one fails at once and says who holds it.
	served := false // the listener handed to RunHTTP, which closes it
	if !opts.stdio {
		ln, err := mcpserve.Listen(opts.http.Addr)
		if err != nil {
			return listenError(opts.http.Addr, err)
		}
		opts.http.Listener = ln
		defer func() {
			if !served {
				ln.Close()
			}
		}()
	}
	st, hold, err := openServeState(ctx, &opts, logger)
	if err != nil && ctx.Err() != nil {
		// Stopped while waiting for the database: a stop, not a failure.
		logger.Info("stopped before the database answered")
		return nil
	}
	if err != nil {
		return err
	}
	// Closed last, after the server and the service that use it.
	defer st.Close()
	if hold != nil {
		defer func() {
			if !served {
				hold.Close()
			}
		}()
	}
	var srv *mcpserve.Server
	cfg := runtimeConfig{depth: opts.maxCallDepth, limits: limits, logger: logger,
		log: func(ctx context.Context, program, tool string, line []byte) { srv.Log(ctx, program, tool, line) }}
	if opts.http.Metrics && !opts.stdio {
		cfg.observer = runtime.Observer{
			Compile:     func(d time.Duration, cache runtime.CacheResult) { srv.ObserveCompile(d, cache) },
			Instantiate: func(program string, d time.Duration) { srv.ObserveInstantiate(program, d) },
		}
	}
	rt, err := newRuntime(ctx, opts.root, st, cfg)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	check := mcpserve.Checker(naming)
	// The search index and config live under the root on local disk; a
	// server on a database without a root has none.
	var search mcpserve.SearchFunc
	if opts.root != "" {
		search = serverSearch(opts.root, "", st)
	}
	if opts.catalog {
		check = catalogChecker(check, naming)
		if search == nil {
			logger.Warn("--catalog: no --root, so no index: berm_search finds nothing")
		} else if u, err := configValue(opts.root, "index"); err == nil && u == "" {
			logger.Warn("--catalog: no index is configured, so berm_search finds nothing (berm config set index URL, with this server's root)")
		}
	}
	sopts := &service.Options{Check: check, Logger: logger}
	if st.Changes() != nil {
		sopts.PollInterval = resyncInterval
	}
	svc := service.New(rt, st, sopts)
	mopts := &mcpserve.Options{
		Search:        search,
		Catalog:       opts.catalog,
		Naming:        naming,
		MaxConcurrent: opts.maxConcurrent,
		MaxWaiting:    opts.maxWaiting,
		Logger:        logger,
		Version:       binaryVersion(),
		DataUsage:     st.DataUsage,
	}
	if opts.state != "" {
		mopts.CheckState = checkDatabase(st, logger)
	}
	srv = mcpserve.New(mcpservice.New(svc), mopts)
	opts.http.Control = control.Handler(svc, control.ServerOptions{
		Puller:      registryPuller{plainHTTP: opts.reg.plainHTTP, timeout: opts.reg.timeout, minRate: opts.reg.minRate, root: opts.root, st: st},
		TakesGrants: opts.http.Token != "",
	})
	// Every goroutine of the server and the service ends before the runtime
	// closes (the deferred rt.Close runs after this).
	defer srv.Close(context.WithoutCancel(ctx))
	// The database may go away between opening it and reading its
	// deployments: that is waited for as at the open, not an exit that a
	// supervisor would turn into a crash loop.
	if err := opts.waitForState(ctx, logger, "read the deployments", hold, func() error { return srv.Start(ctx) }); err != nil {
		if ctx.Err() != nil {
			logger.Info("stopped before the database answered")
			return nil
		}
		return err
	}
	if hold != nil {
		// The server's own probes say "loading" until the programs are.
		ln, err := hold.Listener(ctx)
		if err != nil {
			return err
		}
		opts.http.Listener = ln
	}
	// Calls in flight at SIGTERM get as long as a call may take.
	drain := limits.Deadline
	if opts.stdio {
		return srv.RunStdio(ctx, e.stdin, e.stdout, drain)
	}
	served = true
	return srv.RunHTTP(ctx, opts.http, drain) // its configuration checked already (check)
}

// refuseHTTPFlags refuses serve's flags for HTTP beside --stdio, which
// would ignore them. What the environment sets (BERM_ADDR, BERM_TOKEN) is
// let be: other commands read them too, and an MCP client's --stdio server
// may well run where they are set; so a flag of those is taken as given
// when its value is not the environment's.
func refuseHTTPFlags(cmd *cli.Command) error {
	var given []string
	for _, f := range []struct{ name, env string }{
		{"addr", "BERM_ADDR"}, {"token", "BERM_TOKEN"}, {"tls-cert", ""}, {"tls-key", ""},
		{"allowed-host", ""}, {"read-timeout", ""}, {"write-timeout", ""}, {"max-sessions", ""},
		{"max-sessions-per-client", ""}, {"session-idle", ""}, {"stateless", ""}, {"metrics", ""},
		{"max-body-memory", ""},
	} {
		if cmd.IsSet(f.name) && (f.env == "" || cmd.String(f.name) != os.Getenv(f.env)) {
			given = append(given, "--"+f.name)
		}
	}
	if len(given) == 0 {
		return nil
	}
	flags, verb := given[0], "is"
	if len(given) > 1 {
		flags, verb = strings.Join(given[:len(given)-1], ", ")+" and "+given[len(given)-1], "are"
	}
	return withHint(usagef("--stdio serves MCP on stdin and stdout, no HTTP: %s %s for HTTP", flags, verb),
		"drop %s, or drop --stdio to serve over HTTP", flags)
}

// listenError is a failure to take the address, with what to do about a
// busy one: use the berm serve that holds it, or serve on another address.
func listenError(addr string, err error) error {
	var inUse *mcpserve.AddrInUseError
	if !errors.As(err, &inUse) {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if inUse.Berm {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1" // a wildcard address is reached on loopback
		}
		return withHint(err, "use the server already running (its MCP endpoint is http://%s/mcp), stop it, or serve on another address: berm serve --addr %s",
			net.JoinHostPort(host, port), mcpserve.NextPort(addr))
	}
	return withHint(err, "serve on another address (berm serve --addr %s), or stop what holds port %s (lsof -i :%s or ss -ltnp shows which process)",
		mcpserve.NextPort(addr), port, port)
}

// logLevel is the level of --log-level: given, it wins; otherwise info over
// HTTP and warn over stdio, where Claude Code shows every stderr line as an
// error.
func logLevel(flag string, stdio bool) (slog.Level, error) {
	switch flag {
	case "":
		if stdio {
			return slog.LevelWarn, nil
		}
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usagef("--log-level %q: want debug, info, warn or error", flag)
}

// tuneGC sets the collector for a server, unless the operator has (GOGC,
// GOMEMLIMIT). A server's live heap is small and each call leaves much
// garbage (the MCP SDK's decode buffers, the instance's memory), so at the
// default GOGC=100 it collects every few calls and a third of its CPU goes to
// marking. It collects at five times the live heap instead, and a soft limit
// keeps a burst of large instances from growing the heap without bound.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(2 << 30)
	}
}

// catalogChecker refuses, beside what check refuses, a program whose tool
// would be served under berm_search's own name.
func catalogChecker(check func(string, *manifest.Manifest) error, naming mcpserve.Naming) func(string, *manifest.Manifest) error {
	return func(name string, m *manifest.Manifest) error {
		for _, t := range m.Tools {
			if naming.Name(name, t.Name) == mcpserve.SearchToolName {
				return fmt.Errorf("%s: its tool %s would be served as %s, which --catalog serves: %w",
					name, t.Name, mcpserve.SearchToolName, runtime.ErrRefused)
			}
		}
		return check(name, m)
	}
}

// resyncInterval is how often serve reads a database's deployments again
// though no notification came. Notifications (store.State's Changes) show a
// change within a second; this only heals one that was lost, and a few
// seconds keep the idle load of many replicas on the database small.
const resyncInterval = 5 * time.Second

// openServeState opens serve's state. A database unreachable at start is
// waited for, with backoff, rather than a failure that a supervisor would
// turn into a crash loop. Over HTTP the address is held from the start
// (/livez 200, /readyz and /healthz 503 with the reason), until the caller
// has read the deployments and hands it to RunHTTP (opts.http.Listener);
// hold is nil otherwise.
func openServeState(ctx context.Context, opts *serveOptions, logger *slog.Logger) (st store.State, hold *mcpserve.Holding, err error) {
	db, err := stateIsDatabase(opts.state)
	if err != nil {
		return nil, nil, err
	}
	if !db {
		st, err := openState(ctx, opts.root, "", createRoot)
		return st, nil, err
	}
	logger.Info("state: database", "database", store.Describe(opts.state))
	if !opts.stdio {
		if hold, err = mcpserve.Hold(opts.http, "waiting for the database", logger); err != nil {
			return nil, nil, err
		}
	}
	err = opts.waitForState(ctx, logger, "open", hold, func() error {
		var err error
		st, err = openDatabase(ctx, opts.state, logger, true)
		return err
	})
	if err != nil {
		if hold != nil {
			hold.Close()
		}
		return nil, nil, err
	}
	if hold != nil {
		hold.SetReason("loading")
	}
	return st, hold, nil
}

// waitForState runs try, and over HTTP tries again while the state is
// unavailable. A stdio server tries once: its client started it, shows its
// error and may start it again, and a server waiting for a database would
// not notice the client close its stdin.
func (opts *serveOptions) waitForState(ctx context.Context, logger *slog.Logger, what string, hold *mcpserve.Holding, try func() error) error {
	if opts.stdio {
		return try()
	}
	return retryUnavailable(ctx, logger, what, markUnreachable(hold), try)
}

// markUnreachable is a wait's callback that has hold's probes say why.
func markUnreachable(hold *mcpserve.Holding) func() error {
	if hold == nil {
		return nil
	}
	return func() error {
		hold.SetReason(errDatabaseUnreachable.Error())
		return nil
	}
}

// errDatabaseUnreachable is the reason /healthz gives, to anyone who asks:
// the details (host, error) go to the log only.
var errDatabaseUnreachable = errors.New("database unreachable")

// checkDatabase is /healthz's check of a database: it answers Ping. A
// failure's details are logged when they change, not at every probe.
func checkDatabase(st store.State, logger *slog.Logger) func(context.Context) error {
	var mu sync.Mutex // guards last, never held across Ping
	last := ""
	return func(ctx context.Context) error {
		err := st.Ping(ctx)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			last = ""
			return nil
		}
		if err.Error() != last {
			last = err.Error()
			logger.Warn("state: database unreachable", "error", err)
		}
		return errDatabaseUnreachable
	}
}
