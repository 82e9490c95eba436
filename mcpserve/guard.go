package mcpserve

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrAllowedHost: an --allowed-host entry that is not a host name or address.
var ErrAllowedHost = errors.New("want a host name or address, without scheme, port or path")

// hosts decides which Host a request may name and which Origin may send it.
//
// DNS rebinding points a name the attacker owns at the server's address, so a
// page from that name reaches the server as its own origin: its requests
// carry Host and Origin both of the attacker's name. So Host is checked
// against the names the server answers to, and Origin against the same
// names, never against the request's own Host.
type hosts struct {
	// anyHost accepts every Host: a server bound beyond loopback with no
	// --allowed-host. Such a server needs a token, which a rebinding page
	// cannot send (browsers attach no Authorization header of their own), so
	// checking Host would only make the operator list every name, address
	// and load balancer that reaches it. The probes, which need no token,
	// tell such a page no more than the network already does.
	anyHost bool
	// names are those the server answers to besides loopback ones: the
	// allowed hosts and, beyond loopback, the listen address's own host.
	names []string
}

func newHosts(addr string, allowed []string) hosts {
	h := hosts{}
	for _, a := range allowed {
		h.names = append(h.names, hostname(a))
	}
	if !IsLoopback(addr) {
		h.anyHost = len(allowed) == 0
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
				h.names = append(h.names, hostname(host))
			}
		}
	}
	return h
}

// checkAllowedHosts refuses entries that could never match a Host.
func checkAllowedHosts(allowed []string) error {
	for _, a := range allowed {
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), ".")
		if net.ParseIP(name) != nil {
			continue
		}
		if name == "" || strings.Trim(strings.ToLower(name), "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			return fmt.Errorf("allowed host %q: %w", a, ErrAllowedHost)
		}
	}
	return nil
}

// hostname is a Host header's or an allowed host's name: no port, no
// brackets, no final dot, lower case.
func hostname(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	return strings.ToLower(host)
}

// known reports whether a Host (or an Origin's host) names this server:
// loopback, or one of the names.
func (h hosts) known(hostport string) bool {
	name := hostname(hostport)
	if name == "" {
		return false
	}
	if name == "localhost" {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, n := range h.names {
		if n == name {
			return true
		}
	}
	return false
}

func (h hosts) host(hostport string) bool { return h.anyHost || h.known(hostport) }

// origin accepts pages served from loopback or from one of the names; an
// opaque origin ("null": sandboxed frames, files) is nobody's.
func (h hosts) origin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && h.known(u.Host)
}

// guard wraps the whole mux, so that every route, present or future, gets
// the same checks in the same order: Host, Origin, then the token (of all but
// the probes). Its refusals are JSON, as the control API's errors are: Claude
// Code shows a plain-text 403 as "Needs authentication".
func (s *Server) guard(cfg HTTPConfig, next http.Handler) http.Handler {
	allowed := newHosts(cfg.Addr, cfg.AllowedHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed.host(r.Host) {
			writeError(w, http.StatusForbidden, "forbidden",
				fmt.Errorf("host %q: not a name of this server (a DNS rebinding?); --allowed-host adds one", r.Host))
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !allowed.origin(origin) {
			writeError(w, http.StatusForbidden, "forbidden",
				fmt.Errorf("origin %q: a page from there may not reach this server", origin))
			return
		}
		if cfg.Token != "" && !isProbe(r.URL.Path) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(cfg.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="berm"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", errors.New("a valid bearer token is required"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
