package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berm-dev/berm/runtime/sandbox"
)

func TestParseDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		in   string
		want sandbox.Dir
	}{
		{"/srv/data", sandbox.Dir{Host: "/srv/data", Guest: "/srv/data"}},
		{"/srv/data:ro", sandbox.Dir{Host: "/srv/data", Guest: "/srv/data"}},
		{"/srv/data:rw", sandbox.Dir{Host: "/srv/data", Guest: "/srv/data", Write: true}},
		{"/srv/data:/data", sandbox.Dir{Host: "/srv/data", Guest: "/data"}},
		{"/srv/data:/data:rw", sandbox.Dir{Host: "/srv/data", Guest: "/data", Write: true}},
		{"/srv/./data/:/data/x/..", sandbox.Dir{Host: "/srv/data", Guest: "/data"}},
		{"data:/data", sandbox.Dir{Host: filepath.Join(wd, "data"), Guest: "/data"}},
		// A guest path named "ro" is written with its mode after it.
		{"/srv/data:/ro:ro", sandbox.Dir{Host: "/srv/data", Guest: "/ro"}},
	} {
		got, err := sandbox.ParseDir(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDir(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", ":/data", "/srv:data", "/a:/b:/c", "/a:/b:rx", "/srv:/da\x00ta", "/srv:/da\nta"} {
		if _, err := sandbox.ParseDir(bad); !errors.Is(err, sandbox.ErrGrant) {
			t.Errorf("ParseDir(%q) = %v, want ErrGrant", bad, err)
		}
	}
}

func TestParseEnv(t *testing.T) {
	e, err := sandbox.ParseEnv("MODE=a=b")
	if err != nil || e.Name != "MODE" || e.Value == nil || *e.Value != "a=b" {
		t.Errorf("ParseEnv(MODE=a=b) = %+v, %v", e, err)
	}
	e, err = sandbox.ParseEnv("TZ")
	if err != nil || e.Name != "TZ" || e.Value != nil {
		t.Errorf("ParseEnv(TZ) = %+v, %v; want no value (read at each call)", e, err)
	}
	e, err = sandbox.ParseEnv("EMPTY=")
	if err != nil || e.Value == nil || *e.Value != "" {
		t.Errorf("ParseEnv(EMPTY=) = %+v, %v; want the empty value", e, err)
	}
	for _, bad := range []string{"", "=x", "A\x00B", "A=\x00", "A\nB"} {
		if _, err := sandbox.ParseEnv(bad); !errors.Is(err, sandbox.ErrGrant) {
			t.Errorf("ParseEnv(%q) = %v, want ErrGrant", bad, err)
		}
	}
}

func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"API.Example.com.":      "api.example.com",
		"api.example.com:8443":  "api.example.com:8443",
		"*.example.com":         "*.example.com",
		"*.Example.com:0443":    "*.example.com:443",
		"127.0.0.1":             "127.0.0.1",
		"127.0.0.1:8080":        "127.0.0.1:8080",
		"::1":                   "[::1]",
		"[::1]":                 "[::1]",
		"[::1]:8080":            "[::1]:8080",
		"[::ffff:10.0.0.1]:80":  "10.0.0.1:80",
		"under_score.internal.": "under_score.internal",
	} {
		got, err := sandbox.ParseHost(in)
		if err != nil || got != want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "*.", "*", "a..b", "host:0", "host:65536", "host:x", "fe80::1%eth0", "http://host", "a/b", "*.*.com", strings.Repeat("a", 64) + ".com"} {
		if got, err := sandbox.ParseHost(bad); !errors.Is(err, sandbox.ErrGrant) {
			t.Errorf("ParseHost(%q) = %q, %v; want ErrGrant", bad, got, err)
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	ok := &sandbox.Grants{
		Dirs:  []sandbox.Dir{{Host: dir, Guest: "/data"}},
		Hosts: []string{"api.example.com"},
		Cwd:   "/data",
	}
	if err := ok.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	var none *sandbox.Grants
	if err := none.Check(); err != nil || !none.IsZero() {
		t.Fatalf("nil grants: Check %v, IsZero %v", err, none.IsZero())
	}
	for name, tt := range map[string]struct {
		g    sandbox.Grants
		want string
	}{
		"missing":     {sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir + "/gone", Guest: "/g"}}}, dir + "/gone"},
		"not a dir":   {sandbox.Grants{Dirs: []sandbox.Dir{{Host: file, Guest: "/f"}}}, "not a directory"},
		"a link":      {sandbox.Grants{Dirs: []sandbox.Dir{{Host: link, Guest: "/l"}}}, "a symbolic link; grant the directory it points to"},
		"relative":    {sandbox.Grants{Dirs: []sandbox.Dir{{Host: "rel", Guest: "/r"}}}, "canonical"},
		"same guest":  {sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "/x"}, {Host: "/", Guest: "/x"}}}, "both granted at /x"},
		"guest":       {sandbox.Grants{Dirs: []sandbox.Dir{{Host: dir, Guest: "x"}}}, "not an absolute path"},
		"host form":   {sandbox.Grants{Hosts: []string{"API.example.com"}}, "canonical"},
		"host syntax": {sandbox.Grants{Hosts: []string{"a b"}}, "a b"},
		"env":         {sandbox.Grants{Env: []sandbox.Env{{Name: "A=B"}}}, "A=B"},
		"cwd":         {sandbox.Grants{Cwd: "/a/../b"}, "clean"},
	} {
		err := tt.g.Check()
		if !errors.Is(err, sandbox.ErrGrant) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Check = %v, want ErrGrant naming %q", name, err, tt.want)
		}
	}
}

func TestEnviron(t *testing.T) {
	mode := "fast"
	g := &sandbox.Grants{Env: []sandbox.Env{{Name: "MODE", Value: &mode}, {Name: "TZ"}, {Name: "UNSET"}}, Cwd: "/data"}
	lookup := func(name string) (string, bool) {
		if name == "TZ" {
			return "UTC", true
		}
		return "", false
	}
	got := strings.Join(g.Environ(lookup), " ")
	if want := "MODE=fast TZ=UTC PWD=/data"; got != want {
		t.Errorf("Environ = %q, want %q (a variable unset on the host stays unset)", got, want)
	}
}

func TestDescribe(t *testing.T) {
	secret := "hunter2"
	g := &sandbox.Grants{
		Dirs:  []sandbox.Dir{{Host: "/srv/notes", Guest: "/notes", Write: true}, {Host: "/srv/docs", Guest: "/srv/docs"}},
		Env:   []sandbox.Env{{Name: "TOKEN", Value: &secret}, {Name: "TZ"}},
		Hosts: []string{"*.example.com", "127.0.0.1:8080"},
		Args:  []string{"-v"},
		Cwd:   "/notes",
	}
	lines := strings.Join(g.Lines(), "\n")
	for _, want := range []string{
		"directory /srv/notes at /notes, read-write",
		"directory /srv/docs, read-only",
		"environment variable TOKEN, set by the deployment",
		"environment variable TZ, from the host's environment",
		"network host any subdomain of example.com (ports 80 and 443)",
		"network host 127.0.0.1 (port 8080)",
		`arguments ["-v"]`,
		"working directory /notes",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("Lines lack %q:\n%s", want, lines)
		}
	}
	guest := strings.Join(g.GuestLines(), "\n")
	if !strings.Contains(guest, "directory /notes, read-write") || strings.Contains(guest, "/srv/notes") ||
		!strings.Contains(guest, "arguments (1, not shown)") || strings.Contains(guest, "-v") {
		t.Errorf("GuestLines name a host path, or not the guest's:\n%s", guest)
	}
	if strings.Contains(lines, secret) {
		t.Errorf("Lines show a value given to a variable, which may be a secret:\n%s", lines)
	}
	if got, want := g.Short(), "rw:/notes,ro:/srv/docs,env:TOKEN,env:TZ,net:*.example.com,net:127.0.0.1:8080,args:1,cwd:/notes"; got != want {
		t.Errorf("Short = %q, want %q", got, want)
	}
	if got := (*sandbox.Grants)(nil).Short(); got != "-" {
		t.Errorf("Short of nothing = %q, want -", got)
	}
	// InitEachCall is a setting, not a grant: it is recorded (not IsZero)
	// but neither Lines nor Short show it as something granted.
	each := &sandbox.Grants{InitEachCall: true}
	if each.IsZero() || len(each.Lines()) != 0 || each.Short() != "-" {
		t.Errorf("InitEachCall alone: IsZero %v, Lines %q, Short %q; want false, none, -", each.IsZero(), each.Lines(), each.Short())
	}
	if !g.Writable() || !g.Network() {
		t.Errorf("Writable %v, Network %v: want both", g.Writable(), g.Network())
	}
}
