package sandbox

import (
	"net/netip"
	"testing"
)

func TestAllowsHost(t *testing.T) {
	g := &Grants{Hosts: []string{
		"example.com",
		"api.example.org:8443",
		"*.corp.example",
		"*.wild.example:9000",
		"127.0.0.1:8080",
		"[::1]",
		"[2001:4860::1]:8443",
		"10.1.2.3",
	}}
	for _, tc := range []struct {
		name string
		host string
		port int
		want bool
	}{
		{"exact on 443", "example.com", 443, true},
		{"exact on 80", "example.com", 80, true},
		{"exact on another port", "example.com", 8080, false},
		{"case", "EXAMPLE.Com", 443, true},
		{"trailing dot", "example.com.", 443, true},
		{"subdomain of an exact grant", "www.example.com", 443, false},
		{"suffix that is not a subdomain", "badexample.com", 443, false},
		{"with port", "api.example.org", 8443, true},
		{"with port, default port", "api.example.org", 443, false},
		{"wildcard subdomain", "a.corp.example", 443, true},
		{"wildcard deeper", "a.b.corp.example", 80, true},
		{"wildcard not the domain", "corp.example", 443, false},
		{"wildcard lookalike", "evilcorp.example", 443, false},
		{"wildcard case and dot", "A.Corp.Example.", 443, true},
		{"wildcard with port", "x.wild.example", 9000, true},
		{"wildcard with port, other port", "x.wild.example", 443, false},
		{"address with port", "127.0.0.1", 8080, true},
		{"address, other port", "127.0.0.1", 8081, false},
		{"address mapped", "::ffff:127.0.0.1", 8080, true},
		{"v6 default port", "::1", 443, true},
		{"v6 bracketed", "[::1]", 80, true},
		{"v6 other port", "::1", 8080, false},
		{"v6 long form", "2001:4860:0:0:0:0:0:1", 8443, true},
		{"address without port", "10.1.2.3", 80, true},
		{"address is not a name", "10.1.2.3.example.com", 80, false},
		{"zone", "fe80::1%eth0", 443, false},
		{"empty", "", 443, false},
		{"not granted", "other.example", 443, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := g.AllowsHost(tc.host, tc.port); got != tc.want {
				t.Errorf("AllowsHost(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
			}
		})
	}
	var none *Grants
	if none.AllowsHost("example.com", 443) || (&Grants{}).AllowsHost("example.com", 443) {
		t.Error("no grants allow a host")
	}
	wild := &Grants{Hosts: []string{"*.0.0.127.in-addr.arpa", "*.1"}}
	if wild.AllowsHost("127.0.0.1", 443) || wild.AllowsHost("10.0.0.1", 443) {
		t.Error("a wildcard allows an address")
	}
}

func TestAllowsAddr(t *testing.T) {
	g := &Grants{Hosts: []string{"127.0.0.1:8080", "localhost:8080", "[fd00::1]", "*.internal"}}
	for _, tc := range []struct {
		addr string
		port int
		want bool
	}{
		{"127.0.0.1", 8080, true},
		{"::ffff:127.0.0.1", 8080, true},
		{"127.0.0.1", 80, false},
		{"127.0.0.2", 8080, false},
		{"fd00::1", 443, true},
		{"fd00::2", 443, false},
	} {
		if got := g.AllowsAddr(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("AllowsAddr(%s, %d) = %v, want %v", tc.addr, tc.port, got, tc.want)
		}
	}
	if g.AllowsAddr(netip.Addr{}, 8080) {
		t.Error("the zero address is allowed")
	}
}

func TestInternal(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"10.0.0.1", true},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"100.128.0.1", false},
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"169.254.169.254", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"172.32.0.1", false},
		{"192.0.0.170", true},
		{"192.0.2.1", true},
		{"192.168.1.1", true},
		{"198.18.0.1", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"224.0.0.251", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.215.14", false},
		{"::", true},
		{"::1", true},
		{"::127.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::7f00:1", true},       // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true},    // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", false},     // NAT64 of 8.8.8.8
		{"64:ff9b:1::1", true},          // local-use NAT64
		{"2002:7f00:1::1", true},        // 6to4 of 127.0.0.1
		{"2002:808:808::1", false},      // 6to4 of 8.8.8.8
		{"2001::1", true},               // Teredo
		{"2001:db8::1", true},           // documentation
		{"3fff::1", true},               // documentation
		{"100::1", true},                // discard
		{"fc00::1", true},               // unique local
		{"fd12:3456::1", true},          // unique local
		{"fe80::1", true},               // link-local
		{"fe80::1%eth0", true},          // link-local with a zone
		{"fec0::1", true},               // site-local
		{"ff02::1", true},               // multicast
		{"2001:4860:4860::8888", false}, // Google DNS
		{"2606:4700:4700::1111", false}, // Cloudflare DNS
	} {
		if got := Internal(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Internal(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if !Internal(netip.Addr{}) {
		t.Error("the zero address is not internal")
	}
}
