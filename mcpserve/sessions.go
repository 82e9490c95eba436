package mcpserve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK keeps the MCP sessions of the HTTP service but knows nothing of
// who opened them or how they are used; berm keeps that beside it
// (sessionTable), so that a server at --max-sessions ends an idle session
// rather than refuse a new client. Refusing let 999 initialize requests in a
// second hold every session of a tokenless loopback server, and refuse every
// new client, for the 30 minutes until they idled out.
//
// The session a new one replaces is chosen to cost the fewest real clients:
// of the client holding the most sessions (a flood from one address replaces
// its own), one with no request in flight, in this order:
//
//  1. one that never went past the handshake (initialize and
//     notifications/initialized alone) in the youngGrace after it opened:
//     abandoned; the oldest first;
//  2. one younger than youngGrace, however used: a flood's own, or a new
//     client's; the least recently used first;
//  3. one older, used: a real client's; the least recently used first.
//
// So on loopback, where every client is one, a flood ends its own sessions,
// whatever it does with them: they are young, a new client's session is as
// recently used as any of them while it is in use, and an established
// client's is older. (Ranking by use instead let a flood that used each
// session twice end every new client's session.) A young session that goes
// idle is as exposed as the flood's: it ends once the flood has opened as
// many sessions as the bound since its last request (0.6 s at 1,600 a
// second). A flood slow enough that its sessions outlive youngGrace, under a
// tenth of the bound a second, competes with real clients' by their last
// use. The client of the session ended gets 404 at its next request, on
// which MCP has a client initialize anew. Only when every session has a
// request in flight is a new one refused (503).
//
// A client is what the server can tell apart: the remote address of the
// connection, IPv6 by its /64 (the least a host is given). Every loopback
// address is one client, and so is every client behind one proxy: their
// addresses are the proxy's. The token tells no one apart, all clients
// holding the same one.

// sessionTable is berm's account of the HTTP service's sessions.
type sessionTable struct {
	max, perClient int
	grace          time.Duration          // youngGrace
	live           func() map[string]bool // the ids of the sessions the SDK holds
	evicted        atomic.Int64

	mu      sync.Mutex
	byID    map[string]*session   // sessions the SDK opened, by Mcp-Session-Id
	opening map[*session]struct{} // reserved for an initialize not yet answered
	clients map[string]int        // client -> sessions held or opening
	pruned  time.Time             // of the last prune
	warned  time.Time             // of the last warning that the bound is met
	// warnedAt is evicted at the last warning.
	warnedAt int64
}

// session is one MCP session over HTTP.
type session struct {
	id     string
	ss     *mcp.ServerSession
	client string
	ids    *idTable // its requests in flight
	// version is the protocol its initialize negotiated: whether it may
	// send batches.
	version string

	// Guarded by the table's mu.
	posts  int       // POSTs in flight
	used   bool      // a request past the handshake, or a GET stream
	opened time.Time // reserved
	last   time.Time // a request began or ended
}

func newSessionTable(max, perClient int, grace time.Duration, live func() map[string]bool) *sessionTable {
	return &sessionTable{
		max: max, perClient: perClient, grace: grace, live: live,
		byID: map[string]*session{}, opening: map[*session]struct{}{}, clients: map[string]int{},
	}
}

// errSessionsFull: at the bound, every session has a request in flight, so
// none can end for a new one.
var errSessionsFull = errors.New("each with a request in flight")

// reserve holds a place for a new session of client, making room when the
// server, or the client, is at its bound: the session returned must be
// closed (go ss.Close(): it has nothing in flight, but its goroutines may
// take a moment) by the caller. The reservation becomes a session at bind,
// or is given back at unreserve.
func (t *sessionTable) reserve(client string) (*session, *session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var victim *session
	switch {
	case t.perClient > 0 && client != loopbackClient && t.clients[client] >= t.perClient:
		if victim = t.victimLocked(client); victim == nil {
			return nil, nil, fmt.Errorf("sessions: %d open from %s, the bound per client, %w", t.clients[client], client, errSessionsFull)
		}
	case len(t.byID)+len(t.opening) >= t.max:
		// Sessions the SDK ended itself (idle, or a failed initialize)
		// are counted here until pruned; at most once a second, so that a
		// flood does not list every session at every new one. Meanwhile
		// such a session is idle, and may be chosen to end.
		if now := time.Now(); now.Sub(t.pruned) >= time.Second {
			t.pruned = now
			t.mu.Unlock()
			live := t.live()
			t.mu.Lock()
			for id, se := range t.byID {
				if !live[id] {
					t.removeLocked(se)
				}
			}
			if len(t.byID)+len(t.opening) < t.max {
				break
			}
		}
		if victim = t.victimLocked(""); victim == nil {
			return nil, nil, fmt.Errorf("sessions: %d open, the server's limit, %w", len(t.byID)+len(t.opening), errSessionsFull)
		}
	}
	if victim != nil {
		t.removeLocked(victim)
		t.evicted.Add(1)
	}
	now := time.Now()
	se := &session{client: client, ids: newIDTable(), opened: now, last: now}
	t.opening[se] = struct{}{}
	t.clients[client]++
	return se, victim, nil
}

// victimLocked chooses the session to end for a new one: of client, or of
// any client when client is "", as the doc above says. Only sessions the SDK
// has opened and that have nothing in flight qualify.
func (t *sessionTable) victimLocked(client string) *session {
	now := time.Now()
	best := map[string]*session{} // the best choice of each client
	for _, se := range t.byID {
		if se.posts > 0 || (client != "" && se.client != client) {
			continue
		}
		if b := best[se.client]; b == nil || t.before(se, b, now) {
			best[se.client] = se
		}
	}
	var victim *session
	for c, se := range best {
		if victim == nil {
			victim = se
			continue
		}
		n, m := t.clients[c], t.clients[victim.client]
		if n > m || (n == m && t.before(se, victim, now)) {
			victim = se
		}
	}
	return victim
}

// youngGrace is how long a session is young: one that has not gone past
// its handshake is taken for a client on its way to its first request, not
// an abandoned one (Claude Code lists tools within a second of
// initialize), and a flood's sessions are all young.
const youngGrace = 10 * time.Second

// rank is a session's place in the order above: the lower goes first.
func (t *sessionTable) rank(se *session, now time.Time) int {
	switch young := now.Sub(se.opened) < t.grace; {
	case !se.used && !young:
		return 1
	case young:
		return 2
	}
	return 3
}

// before reports whether a goes before b.
func (t *sessionTable) before(a, b *session, now time.Time) bool {
	ra, rb := t.rank(a, now), t.rank(b, now)
	switch {
	case ra != rb:
		return ra < rb
	case ra == 1:
		return a.opened.Before(b.opened)
	}
	return a.last.Before(b.last)
}

// noteFull returns the sessions ended for new ones since it last returned
// more than 0, at most once a minute, so that a flood is one line of the
// log a minute, not one a session.
func (t *sessionTable) noteFull() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.warned) < time.Minute {
		return 0
	}
	n := t.evicted.Load()
	since := n - t.warnedAt
	t.warned, t.warnedAt = time.Now(), n
	return since
}

// bind makes a reservation the session ss, which its initialize opened at
// protocol version.
func (t *sessionTable) bind(se *session, ss *mcp.ServerSession, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.opening[se]; !ok || ss.ID() == "" {
		return
	}
	delete(t.opening, se)
	se.id, se.ss, se.version = ss.ID(), ss, version
	t.byID[se.id] = se
}

// unreserve gives back a reservation that its initialize did not bind.
func (t *sessionTable) unreserve(se *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.opening[se]; ok {
		delete(t.opening, se)
		t.dropClientLocked(se.client)
	}
}

func (t *sessionTable) lookup(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// begin and end bracket a request of the session; a handshake is not a use.
func (t *sessionTable) begin(se *session, handshake bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	se.posts++
	se.used = se.used || !handshake
	se.last = time.Now()
}

func (t *sessionTable) end(se *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	se.posts--
	se.last = time.Now()
}

// touch records a GET stream opened: a client that listens is a client.
func (t *sessionTable) touch(se *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	se.used = true
	se.last = time.Now()
}

// remove forgets a session that has ended (DELETE).
func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if se, ok := t.byID[id]; ok {
		t.removeLocked(se)
	}
}

func (t *sessionTable) removeLocked(se *session) {
	if t.byID[se.id] != se {
		return
	}
	delete(t.byID, se.id)
	t.dropClientLocked(se.client)
}

func (t *sessionTable) dropClientLocked(client string) {
	if t.clients[client]--; t.clients[client] <= 0 {
		delete(t.clients, client)
	}
}

// loopbackClient is every client on loopback, which no bound per client
// applies to: it would be a second bound of the whole server.
const loopbackClient = "loopback"

// clientOf is who a request comes from, as far as the server can tell (see
// above).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.IsLoopback():
		return loopbackClient
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}
