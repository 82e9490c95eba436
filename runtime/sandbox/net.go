package sandbox

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// AllowsHost reports whether g grants host (a DNS name or an IP address,
// without brackets, as a URL's Hostname gives it) on port. A grant names
// the host exactly, or is "*.domain", which grants every subdomain of domain
// at any depth but not domain itself; an IP address is granted only by
// itself, never by a wildcard. A grant without a port grants 80 and 443.
// Names compare without case and without a trailing dot; addresses compare
// unmapped (::ffff:127.0.0.1 is 127.0.0.1).
func (g *Grants) AllowsHost(host string, port int) bool {
	if g == nil {
		return false
	}
	host, isAddr := canonicalHost(host)
	if host == "" {
		return false
	}
	for _, grant := range g.Hosts {
		name, ok := grantPort(grant, port)
		if !ok {
			continue
		}
		name, grantAddr := canonicalHost(name)
		switch {
		case name == host:
			return true
		case !isAddr && !grantAddr && strings.HasPrefix(name, "*."):
			if strings.HasSuffix(host, name[1:]) && len(host) > len(name)-1 {
				return true
			}
		}
	}
	return false
}

// AllowsAddr reports whether g grants the address ip itself on port: an IP
// address granted as such, not a name that resolves to it. berm.http reaches
// an Internal address only when this holds.
func (g *Grants) AllowsAddr(ip netip.Addr, port int) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	return g.AllowsHost(ip.Unmap().String(), port)
}

// canonicalHost lower-cases a name and drops its trailing dot, or gives an
// address in its unmapped form; isAddr tells which. An address with a zone
// is kept as it is, and matches no grant (ParseHost refuses zones).
func canonicalHost(h string) (string, bool) {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", true
		}
		return a.Unmap().String(), true
	}
	return strings.TrimSuffix(strings.ToLower(h), "."), false
}

// grantPort splits a grant into its host and reports whether it grants port.
func grantPort(grant string, port int) (string, bool) {
	if h, p, err := net.SplitHostPort(grant); err == nil {
		n, err := strconv.Atoi(p)
		return h, err == nil && n == port
	}
	return grant, port == 80 || port == 443
}

// internal are the ranges Internal refuses, each with why. IPv4-mapped
// addresses (::ffff:0:0/96) are judged by the IPv4 address they carry, and
// so are NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses, which a
// gateway turns into IPv4 traffic to the address inside.
var internal = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		// IPv4
		"0.0.0.0/8",       // "this network"; 0.0.0.0 reaches the local host
		"10.0.0.0/8",      // private (RFC 1918)
		"100.64.0.0/10",   // carrier-grade NAT (RFC 6598)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata (169.254.169.254) included
		"172.16.0.0/12",   // private (RFC 1918)
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation (TEST-NET-1)
		"192.88.99.0/24",  // 6to4 relay anycast, deprecated
		"192.168.0.0/16",  // private (RFC 1918)
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation (TEST-NET-2)
		"203.0.113.0/24",  // documentation (TEST-NET-3)
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, 255.255.255.255 (broadcast) included
		// IPv6
		"::/96",          // unspecified, loopback, IPv4-compatible (deprecated)
		"64:ff9b:1::/48", // NAT64 for local use (RFC 8215)
		"100::/64",       // discard-only
		"2001::/23",      // IETF protocol assignments: Teredo, benchmarking, ORCHID
		"2001:db8::/32",  // documentation
		"3fff::/20",      // documentation (RFC 9637)
		"fc00::/7",       // unique local
		"fe80::/10",      // link-local
		"fec0::/10",      // site-local, deprecated
		"ff00::/8",       // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Internal reports whether ip is an address a program must not reach unless
// it was granted as an address: loopback, private, link-local, carrier-grade
// NAT, unspecified, multicast, broadcast, reserved, documentation and
// benchmarking ranges, unique local IPv6, and IPv6 forms that carry such an
// IPv4 address (mapped, NAT64, 6to4). An invalid address is internal.
func Internal(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("").Unmap()
	switch {
	case nat64.Contains(ip):
		b := ip.As16()
		return Internal(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		b := ip.As16()
		return Internal(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, p := range internal {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
