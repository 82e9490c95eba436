package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// ErrNoRuntime: the service was made without a runtime, so it can list,
// inspect and remove, but not deploy or serve.
var ErrNoRuntime = errors.New("no runtime")

// Defaults of Options.
const (
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultTempAge is how old a temporary file of the store must be before
	// it is taken for one a killed process left: a write in progress is far
	// younger.
	DefaultTempAge = time.Hour
	collectEvery   = 10 * time.Minute
)

// Options configure a Service. Zero values take defaults.
type Options struct {
	// Check is a front end's own refusal of a program, on top of the
	// runtime's (the MCP server's: a tool its SDK cannot serve). Deploys and
	// syncs call it.
	Check func(name string, m *manifest.Manifest) error
	// Logger receives what the background work does and meets.
	Logger *slog.Logger
	// PollInterval is how often the store is checked for deployments made by
	// other processes. A store that tells of changes (store.State's Changes)
	// is also read again as soon as it does: then the interval is only the
	// resync that heals a lost notice.
	PollInterval time.Duration
}

// Program is a deployment as it is served.
type Program struct {
	Name     string
	Digest   string
	Source   string
	Manifest *manifest.Manifest
	// Grants are what its deployment lets it reach.
	Grants sandbox.Grants

	ready chan struct{} // closed once installed in the runtime, or given up
}

// version tells deployments of one name apart: a redeploy of the same image
// with other grants is a change to serve.
func (p *Program) version() string { return version(p.Digest, &p.Grants) }

func version(digest string, g *sandbox.Grants) string {
	if g.IsZero() {
		return digest
	}
	b, _ := json.Marshal(g)
	return digest + " " + string(b)
}

// recorded is the grants as a record holds them: nil for none.
func recorded(g *sandbox.Grants) *sandbox.Grants {
	if g.IsZero() {
		return nil
	}
	return g
}

// Change is what one commit changed in the served programs: a program served
// (new, or replacing the one of its name), or a name no longer served.
type Change struct {
	Served  *Program
	Removed string
}

// Service is berm's deployments over a store and, to serve them, a runtime.
type Service struct {
	rt   *runtime.Runtime
	st   store.State
	opts Options
	log  *slog.Logger

	mu      sync.RWMutex
	served  map[string]*Program // listed, and installed unless first-load compiles are pending
	want    map[string]*Program // the newest deployment seen of each name, installed or on its way
	failed  map[string]string   // name -> a digest refused; tried again when the deployment changes
	damaged map[string]string   // name -> the damage last reported, so that it is reported once

	pass     sync.Mutex // one sync pass at a time; never held across a compile
	publish  sync.Mutex // orders commits and the listener's calls
	onChange func(Change)
	started  bool
	loaded   chan struct{} // closed once the first pass's programs compiled

	stop context.CancelFunc
	work context.Context
	wg   sync.WaitGroup // the loop and every compile
}

// New returns a service over rt and st. rt may be nil for a service that only
// lists, inspects and removes.
func New(rt *runtime.Runtime, st store.State, opts *Options) *Service {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		rt:      rt,
		st:      st,
		opts:    o,
		log:     o.Logger,
		served:  map[string]*Program{},
		want:    map[string]*Program{},
		failed:  map[string]string{},
		damaged: map[string]string{},
		loaded:  make(chan struct{}),
	}
}

// Runtime is the runtime the service serves through, or nil.
func (s *Service) Runtime() *runtime.Runtime { return s.rt }

// Deploy checks an image against the ABI, this host and the front ends, and
// the grants against this machine, compiles it (so that the first call finds
// it in the cache), stores it and records name -> digest with its source and
// grants, replacing what name had (its grants too: nil grants nothing). A
// refused image or grant changes nothing. On a started service the program
// is served before Deploy returns.
func (s *Service) Deploy(ctx context.Context, name string, image []byte, source string, grants *sandbox.Grants) (control.Info, error) {
	if s.rt == nil {
		return control.Info{}, fmt.Errorf("deploy %s: %w", name, ErrNoRuntime)
	}
	prepared, err := s.rt.Prepare(ctx, name, image, grants)
	if err != nil {
		return control.Info{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	offered := false
	defer func() {
		if !offered {
			prepared.Close()
		}
	}()
	if err := s.check(name, prepared.Manifest); err != nil {
		return control.Info{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	digest, err := s.st.PutImage(image)
	if err != nil {
		return control.Info{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	var before *sandbox.Grants
	if d, err := s.st.Deployment(name); err == nil {
		before = d.Grants
	}
	if err := s.st.Deploy(store.Deployment{Name: name, Digest: digest, Source: source, Grants: recorded(&prepared.Grants)}); err != nil {
		return control.Info{}, err
	}
	info := control.Info{Name: name, Digest: digest, Source: source, Grants: recorded(&prepared.Grants)}
	info.Describe(prepared.Manifest)
	for _, sc := range s.rt.UnknownSyscalls(prepared.Manifest) {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%s declares syscall %s, which this host does not have: calls to it will trap", name, sc))
	}
	info.Warnings = append(info.Warnings, sandbox.Warnings(name, prepared.Manifest, &prepared.Grants)...)
	// The snapshot of _initialize, which a serving process takes at the
	// program's first call, is taken here too to warn of a refusal now.
	// Not under the request's cancel: a refusal lasts the program's life.
	if why := prepared.Warm(context.WithoutCancel(ctx)); why != "" {
		info.Warnings = append(info.Warnings, name+": "+why)
	}
	if len(before.Lines()) > 0 && len(prepared.Grants.Lines()) == 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%s had grants (%s) and this deployment grants nothing: they are dropped", name, before.Short()))
	}
	if before != nil && before.InitEachCall && !prepared.Grants.InitEachCall {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%s ran _initialize at every call (--init-each-call) and this deployment does not: it runs once per process again", name))
	}
	s.mu.Lock()
	started := s.started
	var p *Program
	if started {
		p = &Program{Name: name, Digest: digest, Source: source, Manifest: prepared.Manifest, Grants: prepared.Grants, ready: make(chan struct{})}
		s.want[name] = p
		delete(s.failed, name)
	}
	s.mu.Unlock()
	if started {
		offered = true
		s.commit(p, prepared, nil)
	}
	return info, nil
}

func (s *Service) check(name string, m *manifest.Manifest) error {
	if s.opts.Check == nil {
		return nil
	}
	return s.opts.Check(name, m)
}

// Remove deletes the deployment under name and, unless keepData, its data.
// On a started service the program is no longer served when Remove returns.
func (s *Service) Remove(ctx context.Context, name string, keepData bool) error {
	if err := s.st.Remove(name, keepData); err != nil {
		return err
	}
	s.mu.RLock()
	started := s.started
	s.mu.RUnlock()
	if started {
		return s.Sync(ctx)
	}
	return nil
}

// Start serves what the store holds and keeps serving it: the programs'
// tools are given to onChange at once, from their manifests, and they
// compile (from the cache, normally) in the background; a call waits for
// that (Ready). From then on, every PollInterval, deployments made by other
// processes are compiled, then served; removed ones are dropped. Close stops
// it. onChange is called in order, never concurrently.
func (s *Service) Start(ctx context.Context, onChange func(Change)) error {
	if s.rt == nil {
		return ErrNoRuntime
	}
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("service: started twice")
	}
	s.started = true
	s.onChange = onChange
	s.work, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Unlock()
	s.collectTemp()
	done, err := s.syncPass(true)
	if err != nil {
		// Nothing was served: Start may be called again (berm serve does,
		// while the error is store.ErrUnavailable).
		s.stop()
		s.mu.Lock()
		s.started = false
		s.mu.Unlock()
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-done
		close(s.loaded)
	}()
	s.wg.Add(1)
	go s.loop()
	return nil
}

// Loaded is closed once the programs Start found are compiled and callable
// (or given up).
func (s *Service) Loaded() <-chan struct{} { return s.loaded }

func (s *Service) loop() {
	defer s.wg.Done()
	poll := time.NewTicker(s.opts.PollInterval)
	defer poll.Stop()
	collect := time.NewTicker(collectEvery)
	defer collect.Stop()
	changes := s.st.Changes()
	for {
		select {
		case <-s.work.Done():
			return
		case <-poll.C:
			s.syncLogged()
		case <-changes:
			s.syncLogged()
		case <-collect.C:
			s.collectTemp()
		}
	}
}

func (s *Service) syncLogged() {
	if _, err := s.syncPass(false); err != nil {
		s.log.Error("sync", "error", err)
	}
}

// tempCollector is a store that killed processes leave temporary files in
// (a directory).
type tempCollector interface {
	CollectTemp(olderThan time.Duration) (files int, bytes int64, err error)
}

// collectTemp removes the temporary files that killed processes left.
func (s *Service) collectTemp() {
	c, ok := s.st.(tempCollector)
	if !ok {
		return
	}
	files, bytes, err := c.CollectTemp(DefaultTempAge)
	if err != nil {
		s.log.Warn("collect temporary files", "error", err)
	}
	if files > 0 {
		s.log.Info("collected temporary files a killed process left", "files", files, "bytes", bytes)
	}
}

// Sync brings the served programs in line with the store now, and returns
// once the changes it found are served (compiled first).
func (s *Service) Sync(ctx context.Context) error {
	done, err := s.syncPass(false)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// syncPass compares the store with what is wanted and starts what differs:
// each new or changed deployment compiles in the background and is committed
// only if it is still the newest of its name then. The returned channel is
// closed once those compiles are committed. On the first pass (first), the
// programs are listed before they compile; later, after.
//
// A deployment whose image cannot be read because the state is unavailable
// (store.ErrUnavailable) is not marked failed, so the next pass tries it
// again; on the first pass it fails the pass, which has served nothing yet,
// so that a replica starting during a blip waits rather than comes up
// without the program. Damage and refusals are marked failed: they last
// until the deployment changes.
func (s *Service) syncPass(first bool) (<-chan struct{}, error) {
	s.pass.Lock()
	defer s.pass.Unlock()
	deployments, damaged, err := s.st.Deployments()
	if err != nil {
		return nil, err
	}
	s.reportDamaged(damaged)
	type job struct {
		p     *Program
		image []byte
	}
	var jobs []job
	seen := map[string]bool{}
	for _, d := range deployments {
		seen[d.Name] = true
		s.mu.RLock()
		w, refused := s.want[d.Name], s.failed[d.Name]
		s.mu.RUnlock()
		if (w != nil && w.version() == version(d.Digest, d.Grants)) || refused == version(d.Digest, d.Grants) {
			continue
		}
		p, image, err := s.read(d)
		if errors.Is(err, store.ErrUnavailable) {
			if first {
				return nil, fmt.Errorf("load %s: %w", d.Name, err)
			}
			s.log.Warn("load: state unavailable; trying again at the next pass", "program", d.Name, "digest", d.Digest, "error", err)
			continue
		}
		if err != nil {
			// The old version, if any, stays served: a bad deployment never
			// takes the server down.
			s.log.Error("load", "program", d.Name, "digest", d.Digest, "error", err)
			s.mu.Lock()
			s.failed[d.Name] = version(d.Digest, d.Grants)
			s.mu.Unlock()
			continue
		}
		jobs = append(jobs, job{p, image})
	}
	// Served only now, so that a first pass that failed above served nothing.
	for _, j := range jobs {
		s.mu.Lock()
		s.want[j.p.Name] = j.p
		delete(s.failed, j.p.Name)
		s.mu.Unlock()
		if first {
			s.list(j.p)
		}
	}
	// Names gone from the store.
	s.mu.RLock()
	var gone []string
	for name := range s.want {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	for name := range s.served {
		if !seen[name] && s.want[name] == nil {
			gone = append(gone, name)
		}
	}
	s.mu.RUnlock()
	for _, name := range gone {
		s.unserve(name)
	}
	done := make(chan struct{})
	if len(jobs) == 0 {
		close(done)
		return done, nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		// One at a time: compiles share the machine with the calls.
		for _, j := range jobs {
			if s.work.Err() != nil {
				s.commit(j.p, nil, s.work.Err())
				continue
			}
			prepared, err := s.rt.Prepare(s.work, j.p.Name, j.image, &j.p.Grants)
			s.commit(j.p, prepared, err)
		}
	}()
	return done, nil
}

// read reads a deployment's image and manifest and checks them, without
// compiling.
func (s *Service) read(d store.Deployment) (*Program, []byte, error) {
	image, err := s.st.Image(d.Digest)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Read(image)
	if err != nil {
		return nil, nil, err
	}
	if err := s.rt.Check(d.Name, m); err != nil {
		return nil, nil, err
	}
	if err := s.check(d.Name, m); err != nil {
		return nil, nil, err
	}
	p := &Program{Name: d.Name, Digest: d.Digest, Source: d.Source, Manifest: m, ready: make(chan struct{})}
	if d.Grants != nil {
		p.Grants = *d.Grants
	}
	return p, image, nil
}

func (s *Service) reportDamaged(damaged []store.Damaged) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := map[string]bool{}
	for _, d := range damaged {
		now[d.Name] = true
		if s.damaged[d.Name] == d.Err.Error() {
			continue
		}
		s.damaged[d.Name] = d.Err.Error()
		s.log.Error("deployment record skipped", "program", d.Name, "error", d.Err)
	}
	for name := range s.damaged {
		if !now[name] {
			delete(s.damaged, name)
		}
	}
}

// list serves p before it is compiled (the first pass only).
func (s *Service) list(p *Program) {
	s.publish.Lock()
	defer s.publish.Unlock()
	s.mu.Lock()
	s.served[p.Name] = p
	s.mu.Unlock()
	s.notify(Change{Served: p})
}

// commit installs a compiled program and serves it, if it is still the
// newest deployment of its name; otherwise it drops it. A program that could
// not be compiled leaves the version before it served.
func (s *Service) commit(p *Program, prepared *runtime.Program, err error) {
	s.publish.Lock()
	defer s.publish.Unlock()
	defer close(p.ready)
	s.mu.Lock()
	if s.want[p.Name] != p || s.work.Err() != nil {
		s.mu.Unlock()
		if prepared != nil {
			prepared.Close() // superseded while it compiled, or shutting down
		}
		return
	}
	if err == nil {
		err = s.rt.Install(prepared)
	}
	if err != nil {
		s.failed[p.Name] = p.version()
		listed := s.served[p.Name] == p
		if old := s.served[p.Name]; old != nil && !listed {
			s.want[p.Name] = old
		} else {
			delete(s.want, p.Name)
		}
		if listed {
			delete(s.served, p.Name)
		}
		s.mu.Unlock()
		if !errors.Is(err, context.Canceled) && !errors.Is(err, runtime.ErrClosed) {
			s.log.Error("compile", "program", p.Name, "digest", p.Digest, "error", err)
		}
		if listed {
			s.notify(Change{Removed: p.Name})
		}
		return
	}
	old := s.served[p.Name]
	s.served[p.Name] = p
	s.mu.Unlock()
	if old != p {
		s.notify(Change{Served: p})
	}
}

// unserve drops a name the store no longer holds.
func (s *Service) unserve(name string) {
	s.publish.Lock()
	defer s.publish.Unlock()
	s.mu.Lock()
	_, wasServed := s.served[name]
	delete(s.want, name)
	delete(s.served, name)
	delete(s.failed, name)
	s.mu.Unlock()
	s.rt.Remove(name)
	if wasServed {
		s.notify(Change{Removed: name})
	}
}

func (s *Service) notify(c Change) {
	if c.Served != nil {
		s.log.Info("serve", "program", c.Served.Name, "digest", c.Served.Digest)
	} else {
		s.log.Info("unserve", "program", c.Removed)
	}
	if s.onChange != nil {
		s.onChange(c)
	}
}

// Ready waits until the program deployed under name can be called: at start,
// or when nothing is installed under the name yet, until its compile is
// committed (or given up, or superseded by a newer deployment whose compile
// it then waits for). A name with nothing on its way returns at once: the
// call then finds what the runtime has.
func (s *Service) Ready(ctx context.Context, name string) error {
	for {
		s.mu.RLock()
		p := s.want[name]
		s.mu.RUnlock()
		if p == nil || s.rt.Program(name) != nil {
			return nil
		}
		select {
		case <-p.ready:
			s.mu.RLock()
			again := s.want[name] != p && s.want[name] != nil
			s.mu.RUnlock()
			if !again {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Served lists the programs served now, by name.
func (s *Service) Served() []*Program {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Program, 0, len(s.served))
	for _, p := range s.served {
		out = append(out, p)
	}
	sortPrograms(out)
	return out
}

// Program returns the program served under name, or nil.
func (s *Service) Program(name string) *Program {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.served[name]
}

// Call runs tool of the program deployed under name, once it is ready
// (Ready): every front end's calls go through here.
func (s *Service) Call(ctx context.Context, program, tool string, args []byte) (runtime.Outcome, error) {
	if err := s.Ready(ctx, program); err != nil {
		return runtime.Outcome{}, err
	}
	return s.rt.Call(ctx, program, tool, args)
}

// Limits are the runtime's limits on every call.
func (s *Service) Limits() runtime.Limits { return s.rt.Limits() }

// Close stops the background work and waits, until ctx is done, for every
// goroutine the service started. Close the runtime after it.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
