package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Grants are what one deployment lets its program reach.
type Grants struct {
	// Dirs are host directories mounted into the program's file system.
	Dirs []Dir `json:"dirs,omitempty"`
	// Env are environment variables, each with its value or read from
	// berm's environment at every call.
	Env []Env `json:"env,omitempty"`
	// Hosts are the network hosts berm.http may reach, each "host",
	// "host:port", "*.domain" or "*.domain:port" (ParseHost). Without a port
	// a host is granted on 80 and 443.
	Hosts []string `json:"hosts,omitempty"`
	// Args are the WASI arguments after the program's name.
	Args []string `json:"args,omitempty"`
	// Cwd is the working directory a WASI program starts in: PWD in its
	// environment, which Go's runtime and wasi-libc read.
	Cwd string `json:"cwd,omitempty"`
	// InitEachCall runs a reactor's _initialize at the start of every call
	// rather than once per process that serves the program, at its first
	// call, whose state is kept as a snapshot that every call starts from: what _initialize reads from the host
	// (the clock, random seeds, the environment) is then read afresh for
	// each call, for the time _initialize takes on each.
	InitEachCall bool `json:"init_each_call,omitempty"`
}

// Dir is a host directory granted to the program at Guest.
type Dir struct {
	// Host is an absolute, clean path on the machine that runs the program.
	Host string `json:"host"`
	// Guest is where the program sees it: an absolute, clean slash path.
	Guest string `json:"guest"`
	// Write grants writing; without it every mutating operation is refused.
	Write bool `json:"write,omitempty"`
}

// Env is one environment variable.
type Env struct {
	Name string `json:"name"`
	// Value is the variable's value; nil reads it from berm's environment at
	// each call (and leaves it unset when berm's is).
	Value *string `json:"value,omitempty"`
}

// ErrGrant is wrapped by every error about a grant: its syntax, or a host
// directory that is missing.
var ErrGrant = errors.New("grant")

// IsZero reports whether g holds nothing: no grant and no setting
// (InitEachCall), so that there is nothing to record. Whether g grants
// anything is whether Lines is empty.
func (g *Grants) IsZero() bool {
	return g == nil || (len(g.Dirs) == 0 && len(g.Env) == 0 && len(g.Hosts) == 0 && len(g.Args) == 0 && g.Cwd == "" && !g.InitEachCall)
}

// Writable reports whether a directory is granted read-write.
func (g *Grants) Writable() bool {
	return g != nil && slices.ContainsFunc(g.Dirs, func(d Dir) bool { return d.Write })
}

// Network reports whether any network host is granted.
func (g *Grants) Network() bool { return g != nil && len(g.Hosts) > 0 }

// ParseDir parses the --allow-dir syntax HOST[:GUEST][:ro|:rw]. A relative
// HOST is taken from the working directory; GUEST defaults to HOST in slash
// form.
func ParseDir(s string) (Dir, error) {
	parts := strings.Split(s, ":")
	write := false
	switch last := parts[len(parts)-1]; {
	case len(parts) > 1 && last == "ro":
		parts = parts[:len(parts)-1]
	case len(parts) > 1 && last == "rw":
		parts, write = parts[:len(parts)-1], true
	}
	if len(parts) > 2 {
		return Dir{}, fmt.Errorf("%w: directory %q: want HOST[:GUEST][:ro|:rw]", ErrGrant, s)
	}
	guest := ""
	if len(parts) == 2 {
		guest = parts[1]
	}
	return NewDir(parts[0], guest, write)
}

// NewDir is the grant of the host directory host at guest (host's own path
// when empty), read-write when write. A relative host is taken from the
// working directory.
func NewDir(host, guest string, write bool) (Dir, error) {
	return Dir{Host: host, Guest: guest, Write: write}.clean()
}

// clean makes Host absolute and clean, defaults Guest and checks it.
func (d Dir) clean() (Dir, error) {
	if d.Host == "" {
		return Dir{}, fmt.Errorf("%w: directory: the host path is empty", ErrGrant)
	}
	host, err := filepath.Abs(d.Host)
	if err != nil {
		return Dir{}, fmt.Errorf("%w: directory %s: %w", ErrGrant, d.Host, err)
	}
	d.Host = host
	if d.Guest == "" {
		d.Guest = filepath.ToSlash(host)
	}
	if !strings.HasPrefix(d.Guest, "/") || strings.ContainsFunc(d.Guest, unicode.IsControl) {
		return Dir{}, fmt.Errorf("%w: directory %s: the guest path %q is not an absolute path of printable characters", ErrGrant, d.Host, d.Guest)
	}
	d.Guest = path.Clean(d.Guest)
	return d, nil
}

// ParseEnv parses the --allow-env syntax NAME[=VALUE].
func ParseEnv(s string) (Env, error) {
	name, value, given := strings.Cut(s, "=")
	e := Env{Name: name}
	if given {
		e.Value = &value
	}
	return e, e.check()
}

func (e Env) check() error {
	if e.Name == "" || strings.ContainsRune(e.Name, '=') || strings.ContainsFunc(e.Name, unicode.IsControl) {
		return fmt.Errorf("%w: environment variable %q: want NAME or NAME=VALUE", ErrGrant, e.Name)
	}
	if e.Value != nil && strings.ContainsRune(*e.Value, 0) {
		return fmt.Errorf("%w: environment variable %s: the value holds a NUL byte", ErrGrant, e.Name)
	}
	return nil
}

// ParseHost parses the --allow-host syntax HOST[:PORT], where HOST is a DNS
// name, "*." and a domain (its subdomains, not the domain itself), or an IP
// address (IPv6 in brackets when a port follows). It returns the canonical
// form stored in Grants.Hosts: lower case, no trailing dot.
func ParseHost(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: host %q: %s", ErrGrant, s, why)
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		return bad(fmt.Sprintf("a host, not a URL: %s (a %s URL's port is granted by default)", host, scheme))
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port is not 1 to 65535")
		}
		port = strconv.Itoa(n)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return bad("an address with a zone cannot be granted")
		}
		host = addr.Unmap().String()
		if port == "" {
			if addr.Is6() && !addr.Is4In6() {
				return "[" + host + "]", nil
			}
			return host, nil
		}
		return net.JoinHostPort(host, port), nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := strings.TrimPrefix(host, "*.")
	if name == "" || len(host) > 253 {
		return bad("want a DNS name, *.domain or an IP address")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return bad("want a DNS name, *.domain or an IP address")
		}
	}
	if port == "" {
		return host, nil
	}
	return host + ":" + port, nil
}

// Check refuses grants that cannot hold: bad syntax in any field, two
// directories at one guest path, and a host directory that is missing or
// not a directory. It runs at deploy, on the machine that will run the
// program.
func (g *Grants) Check() error {
	if g == nil {
		return nil
	}
	guests := map[string]string{}
	for _, d := range g.Dirs {
		c, err := d.clean()
		if err != nil {
			return err
		}
		if c != d {
			return fmt.Errorf("%w: directory %s:%s is not in canonical form", ErrGrant, d.Host, d.Guest)
		}
		if other, dup := guests[d.Guest]; dup {
			return fmt.Errorf("%w: directories %s and %s are both granted at %s", ErrGrant, other, d.Host, d.Guest)
		}
		guests[d.Guest] = d.Host
		info, err := os.Lstat(d.Host)
		if err != nil {
			return fmt.Errorf("%w: directory %s: %w", ErrGrant, d.Host, pathErr(err))
		}
		if info.Mode()&os.ModeSymlink != 0 {
			// Mount refuses it too: a link could be pointed elsewhere later.
			return fmt.Errorf("%w: directory %s: a symbolic link; grant the directory it points to", ErrGrant, d.Host)
		}
		if !info.IsDir() {
			return fmt.Errorf("%w: directory %s: not a directory", ErrGrant, d.Host)
		}
		if real, err := filepath.EvalSymlinks(d.Host); err == nil && real != d.Host {
			return fmt.Errorf("%w: directory %s: a symbolic link is in its path; grant the directory it points to, %s", ErrGrant, d.Host, real)
		}
	}
	for _, e := range g.Env {
		if err := e.check(); err != nil {
			return err
		}
	}
	for _, h := range g.Hosts {
		c, err := ParseHost(h)
		if err != nil {
			return err
		}
		if c != h {
			return fmt.Errorf("%w: host %q is not in canonical form %q", ErrGrant, h, c)
		}
	}
	for _, a := range g.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: argument %q holds a NUL byte", ErrGrant, a)
		}
	}
	if g.Cwd != "" && (!strings.HasPrefix(g.Cwd, "/") || path.Clean(g.Cwd) != g.Cwd) {
		return fmt.Errorf("%w: working directory %q: want an absolute, clean slash path", ErrGrant, g.Cwd)
	}
	return nil
}

// Environ is the program's environment for one call, NAME=VALUE each, with
// the variables granted without a value looked up with lookup (os.LookupEnv).
func (g *Grants) Environ(lookup func(string) (string, bool)) []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, e := range g.Env {
		if e.Value != nil {
			out = append(out, e.Name+"="+*e.Value)
		} else if v, ok := lookup(e.Name); ok {
			out = append(out, e.Name+"="+v)
		}
	}
	if g.Cwd != "" {
		out = append(out, "PWD="+g.Cwd)
	}
	return out
}

// Lines describes every grant, one a line, in words an operator can act on.
// Values given to environment variables are not shown: they may be secrets.
func (g *Grants) Lines() []string { return g.lines(true) }

// GuestLines is Lines as the program sees its grants, for a model: each
// directory by the path the program reaches it at, never the host's.
func (g *Grants) GuestLines() []string { return g.lines(false) }

func (g *Grants) lines(hostPaths bool) []string {
	if g.IsZero() {
		return nil
	}
	var out []string
	for _, d := range g.Dirs {
		mode := "read-only"
		if d.Write {
			mode = "read-write"
		}
		if !hostPaths || d.Guest == filepath.ToSlash(d.Host) {
			out = append(out, fmt.Sprintf("directory %s, %s", d.Guest, mode))
		} else {
			out = append(out, fmt.Sprintf("directory %s at %s, %s", d.Host, d.Guest, mode))
		}
	}
	for _, e := range g.Env {
		if e.Value != nil {
			out = append(out, fmt.Sprintf("environment variable %s, set by the deployment", e.Name))
		} else {
			out = append(out, fmt.Sprintf("environment variable %s, from the host's environment", e.Name))
		}
	}
	for _, h := range g.Hosts {
		out = append(out, "network host "+describeHost(h))
	}
	if len(g.Args) > 0 && hostPaths {
		out = append(out, fmt.Sprintf("arguments %q", g.Args))
	} else if len(g.Args) > 0 {
		// A model is not shown them: an argument may be a secret.
		out = append(out, fmt.Sprintf("arguments (%d, not shown)", len(g.Args)))
	}
	if g.Cwd != "" {
		out = append(out, "working directory "+g.Cwd)
	}
	// InitEachCall is no grant: callers that show it show it apart.
	return out
}

// Short is the grants in one compact line for a table column: "-" for none.
// InitEachCall is no grant and is not in it.
func (g *Grants) Short() string {
	if g == nil {
		return "-"
	}
	var out []string
	for _, d := range g.Dirs {
		mode := "ro"
		if d.Write {
			mode = "rw"
		}
		out = append(out, mode+":"+d.Guest)
	}
	for _, e := range g.Env {
		out = append(out, "env:"+e.Name)
	}
	for _, h := range g.Hosts {
		out = append(out, "net:"+h)
	}
	if len(g.Args) > 0 {
		out = append(out, fmt.Sprintf("args:%d", len(g.Args)))
	}
	if g.Cwd != "" {
		out = append(out, "cwd:"+g.Cwd)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func describeHost(h string) string {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port = h, ""
	}
	what := host
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		what = "any subdomain of " + rest
	}
	if port == "" {
		return what + " (ports 80 and 443)"
	}
	return what + " (port " + port + ")"
}
