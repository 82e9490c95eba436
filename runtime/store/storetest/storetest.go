package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// Filler is a fast way to the suite's largest cases, which need a program
// to hold thousands of entries (MaxKeys is 16384): as many Sets take seconds
// where each syncs a file or commits a transaction. A backend's test offers
// it by returning, from open, a State that also implements Filler; without
// it the suite fills through Set, from several goroutines, and skips the
// one case that no Set can make: data over its quota.
type Filler interface {
	// Fill adds n entries to program's data, each charged one block as a Set
	// of a small key and value is, under keys that the suite never reads or
	// writes otherwise. It checks no bound: past them, it stands for data
	// written before the bounds were what they are. The handle's count of
	// the program's data may not have seen them; its next Set must.
	Fill(program string, n int) error
}

// Run runs the suite. For each case, newState makes a fresh, empty backing
// store (a directory, a database) and returns open, each call of which is a
// new handle on that store, as another process would hold: open must not
// share a handle's memory between calls. The suite closes the handles.
func Run(t *testing.T, newState func(t *testing.T) (open func() store.State)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Every case has a backing store of its own.
			if !c.alone {
				t.Parallel()
			}
			newHandle := newState(t)
			open := func() store.State {
				t.Helper()
				s := newHandle()
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				return s
			}
			c.run(t, open)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, open func() store.State)
	// alone: not beside other cases, which would slow what it times.
	alone bool
}{
	{"Ping", testPing, false},
	{"Images", testImages, false},
	{"BadDigests", testBadDigests, false},
	{"Deployments", testDeployments, false},
	{"DeployedTime", testDeployedTime, false},
	{"Grants", testGrants, false},
	{"Remove", testRemove, false},
	{"ProgramNames", testProgramNames, false},
	{"RacingDeployers", testRacingDeployers, false},
	{"Changes", testChanges, true},
	{"Data", testData, false},
	{"BinaryKeys", testBinaryKeys, false},
	{"DataLimits", testDataLimits, false},
	{"DataUsage", testDataUsage, false},
	{"DataQuota", testDataQuota, false},
	{"DataBlocks", testDataBlocks, false},
	{"MaxKeys", testMaxKeys, false},
	{"DataOverQuota", testDataOverQuota, false},
	{"DataTwoHandles", testDataTwoHandles, false},
	{"DataContext", testDataContext, false},
	{"RemoveRacingSets", testRemoveRacingSets, false},
	{"DataQuotaConcurrent/bytes/1 handle", racingBytes(1), false},
	{"DataQuotaConcurrent/bytes/2 handles", racingBytes(2), false},
	{"DataQuotaConcurrent/bytes/4 handles", racingBytes(4), false},
	{"DataQuotaConcurrent/keys/2 handles", racingKeys(2), false},
}

func testPing(t *testing.T, open func() store.State) {
	s := open()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a fresh state: %v", err)
	}
}

func testImages(t *testing.T, open func() store.State) {
	s := open()
	// Every byte value, NUL first as in "\x00asm".
	image := []byte("\x00asm not really")
	for b := range 256 {
		image = append(image, byte(b))
	}
	absent := manifest.Digest([]byte("never stored"))
	if s.HasImage(absent) {
		t.Fatal("HasImage of a fresh state")
	}
	digest, err := s.PutImage(image)
	if err != nil || digest != manifest.Digest(image) {
		t.Fatalf("PutImage = %s, %v; want %s", digest, err, manifest.Digest(image))
	}
	// The same bytes again are the same image.
	if again, err := s.PutImage(image); err != nil || again != digest {
		t.Fatalf("second PutImage = %s, %v", again, err)
	}
	got, err := s.Image(digest)
	if err != nil || string(got) != string(image) {
		t.Fatalf("Image = %q, %v", got, err)
	}
	if !s.HasImage(digest) {
		t.Error("HasImage of a stored image is false")
	}
	// Another handle reads what this one stored.
	other := open()
	if got, err := other.Image(digest); err != nil || string(got) != string(image) {
		t.Fatalf("Image through another handle = %q, %v", got, err)
	}
	if _, err := s.Image(absent); !errors.Is(err, store.ErrNoImage) {
		t.Fatalf("Image of an absent digest: %v, want ErrNoImage", err)
	}
	two, err := s.PutImage([]byte("two"))
	if err != nil || two == digest {
		t.Fatalf("PutImage of other bytes = %s, %v", two, err)
	}
	if got, err := other.Image(two); err != nil || string(got) != "two" {
		t.Fatalf("Image(two) = %q, %v", got, err)
	}
}

// badDigests are not sha256:<64 lowercase hex>; some would lead out of a
// directory were they file names.
var badDigests = []string{
	"",
	"sha256:",
	"sha256:../../etc/passwd",
	"sha256:" + strings.Repeat("0", 63),
	"sha256:" + strings.Repeat("0", 65),
	"sha256:" + strings.Repeat("A", 64),
	"sha512:" + strings.Repeat("0", 64),
	strings.Repeat("0", 64),
	"sha256:" + strings.Repeat("0", 62) + "/x",
}

func testBadDigests(t *testing.T, open func() store.State) {
	s := open()
	if _, err := s.PutImage([]byte("one")); err != nil {
		t.Fatal(err)
	}
	for _, digest := range badDigests {
		if image, err := s.Image(digest); err == nil {
			t.Errorf("Image(%q) = %q, want an error", digest, image)
		}
		if s.HasImage(digest) {
			t.Errorf("HasImage(%q) is true", digest)
		}
		if err := s.Deploy(store.Deployment{Name: "p", Digest: digest}); err == nil {
			t.Errorf("Deploy of digest %q succeeded", digest)
		}
	}
	if list, _, err := s.Deployments(); err != nil || len(list) != 0 {
		t.Errorf("Deployments after deploys of bad digests = %v, %v", list, err)
	}
}

// names lists the deployments' names, failing on damaged records: the
// suite never makes one.
func names(t *testing.T, s store.State) string {
	t.Helper()
	list, damaged, err := s.Deployments()
	if err != nil {
		t.Fatalf("Deployments: %v", err)
	}
	for _, d := range damaged {
		t.Errorf("damaged deployment %q: %v", d.Name, d.Err)
	}
	var out []string
	for _, d := range list {
		out = append(out, d.Name)
	}
	return strings.Join(out, " ")
}

func putImage(t *testing.T, s store.State, image string) string {
	t.Helper()
	digest, err := s.PutImage([]byte(image))
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func deploy(t *testing.T, s store.State, d store.Deployment) {
	t.Helper()
	if err := s.Deploy(d); err != nil {
		t.Fatalf("Deploy(%s): %v", d.Name, err)
	}
}

func testDeployments(t *testing.T, open func() store.State) {
	s := open()
	if got := names(t, s); got != "" {
		t.Fatalf("a fresh state lists %q", got)
	}
	if _, err := s.Deployment("p"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("Deployment of a fresh state: %v, want ErrNotDeployed", err)
	}
	// The image comes first.
	absent := manifest.Digest([]byte("never stored"))
	if err := s.Deploy(store.Deployment{Name: "p", Digest: absent}); !errors.Is(err, store.ErrNoImage) {
		t.Fatalf("deploy without its image: %v, want ErrNoImage", err)
	}
	if _, err := s.Deployment("p"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("a refused deploy left %v", err)
	}

	one, two := putImage(t, s, "one"), putImage(t, s, "two")
	deploy(t, s, store.Deployment{Name: "p", Digest: one, Source: "one.wasm"})
	d, err := s.Deployment("p")
	if err != nil || d.Name != "p" || d.Digest != one || d.Source != "one.wasm" {
		t.Fatalf("Deployment = %+v, %v", d, err)
	}
	// Another handle sees it, and replaces it at once.
	other := open()
	if d, err := other.Deployment("p"); err != nil || d.Digest != one {
		t.Fatalf("Deployment through another handle = %+v, %v", d, err)
	}
	deploy(t, other, store.Deployment{Name: "p", Digest: two, Source: "ghcr.io/x/two:latest@" + two})
	if d, err := s.Deployment("p"); err != nil || d.Digest != two || d.Source != "ghcr.io/x/two:latest@"+two {
		t.Fatalf("replaced Deployment = %+v, %v", d, err)
	}
	if got := names(t, s); got != "p" {
		t.Fatalf("after a replace, Deployments = %q, want p", got)
	}

	// Listed by name, whatever the order of deploys; the longest name and
	// dashes are names like any other.
	long := strings.Repeat("z", manifest.MaxProgramName)
	for _, name := range []string{"c", long, "a-1", "b", "a", "0"} {
		deploy(t, s, store.Deployment{Name: name, Digest: one})
	}
	want := "0 a a-1 b c p " + long
	if got := names(t, other); got != want {
		t.Fatalf("Deployments = %q, want %q", got, want)
	}
	list, _, _ := other.Deployments()
	for _, d := range list {
		if d.Deployed.IsZero() || (d.Digest != one && d.Digest != two) {
			t.Errorf("listed %+v", d)
		}
	}
	if d, err := other.Deployment(long); err != nil || d.Name != long {
		t.Fatalf("Deployment(%q) = %+v, %v", long, d, err)
	}
}

func testDeployedTime(t *testing.T, open func() store.State) {
	s := open()
	digest := putImage(t, s, "one")
	before := time.Now()
	deploy(t, s, store.Deployment{Name: "now", Digest: digest})
	d, err := s.Deployment("now")
	if err != nil {
		t.Fatal(err)
	}
	// Set when zero, by this clock or the database's: a minute apart at
	// most, for a database on another machine.
	if d.Deployed.IsZero() || d.Deployed.Before(before.Add(-time.Minute)) || d.Deployed.After(time.Now().Add(time.Minute)) {
		t.Errorf("Deployed = %v, want about %v", d.Deployed, before)
	}
	// Kept when given, to the second at least.
	given := time.Date(2024, 2, 29, 13, 14, 15, 0, time.UTC)
	deploy(t, s, store.Deployment{Name: "then", Digest: digest, Deployed: given})
	if d, err := open().Deployment("then"); err != nil || !d.Deployed.Equal(given) {
		t.Errorf("Deployed = %v, %v; want %v", d.Deployed, err, given)
	}
}

func testGrants(t *testing.T, open func() store.State) {
	s := open()
	digest := putImage(t, s, "one")
	value, empty := "secret value", ""
	grants := &sandbox.Grants{
		Dirs: []sandbox.Dir{
			{Host: "/srv/data", Guest: "/data", Write: true},
			{Host: "/etc/ssl", Guest: "/ssl"},
		},
		Env: []sandbox.Env{
			{Name: "TOKEN", Value: &value},
			{Name: "EMPTY", Value: &empty}, // set, to nothing
			{Name: "HOME"},                 // read from berm's environment
		},
		Hosts: []string{"api.example.com", "*.example.org:8443"},
		Args:  []string{"--verbose", "a b", ""},
		Cwd:   "/data",
	}
	deploy(t, s, store.Deployment{Name: "granted", Digest: digest, Grants: grants})
	deploy(t, s, store.Deployment{Name: "plain", Digest: digest})
	other := open()
	d, err := other.Deployment("granted")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Grants, grants) {
		t.Errorf("Grants = %s, want %s", show(d.Grants), show(grants))
	}
	if d, err := other.Deployment("plain"); err != nil || d.Grants != nil {
		t.Errorf("Grants of a deployment without = %s, %v; want nil", show(d.Grants), err)
	}
	list, _, err := other.Deployments()
	if err != nil || len(list) != 2 {
		t.Fatalf("Deployments = %v, %v", list, err)
	}
	if !reflect.DeepEqual(list[0].Grants, grants) || list[1].Grants != nil {
		t.Errorf("listed Grants = %s and %s", show(list[0].Grants), show(list[1].Grants))
	}
}

func show(g *sandbox.Grants) string {
	if g == nil {
		return "nil"
	}
	env := make([]string, len(g.Env))
	for i, e := range g.Env {
		env[i] = e.Name + "=<nil>"
		if e.Value != nil {
			env[i] = fmt.Sprintf("%s=%q", e.Name, *e.Value)
		}
	}
	return fmt.Sprintf("{Dirs:%+v Env:%v Hosts:%q Args:%q Cwd:%q}", g.Dirs, env, g.Hosts, g.Args, g.Cwd)
}

func testRemove(t *testing.T, open func() store.State) {
	s, other := open(), open()
	digest := putImage(t, s, "one")
	if err := s.Remove("p", false); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("Remove of nothing: %v, want ErrNotDeployed", err)
	}
	for _, name := range []string{"keep", "drop", "stays"} {
		deploy(t, s, store.Deployment{Name: name, Digest: digest})
		set(t, s, name, "k", "v")
	}
	if err := other.Remove("keep", true); err != nil {
		t.Fatal(err)
	}
	if err := other.Remove("drop", false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep", "drop"} {
		if _, err := s.Deployment(name); !errors.Is(err, store.ErrNotDeployed) {
			t.Errorf("Deployment(%s) once removed: %v, want ErrNotDeployed", name, err)
		}
		if err := s.Remove(name, false); !errors.Is(err, store.ErrNotDeployed) {
			t.Errorf("second Remove(%s): %v, want ErrNotDeployed", name, err)
		}
	}
	if got := names(t, s); got != "stays" {
		t.Errorf("Deployments = %q, want stays", got)
	}
	// The data went with drop's deployment, through either handle; keep's
	// is there for its next deploy, and stays's was never touched.
	for _, h := range []store.State{s, other} {
		if _, ok, err := h.Get(t.Context(), "drop", []byte("k")); ok || err != nil {
			t.Errorf("drop's data after Remove: %v, %v", ok, err)
		}
		if n, err := h.DataUsage("drop"); n != 0 || err != nil {
			t.Errorf("DataUsage(drop) after Remove = %d, %v; want 0", n, err)
		}
		for _, name := range []string{"keep", "stays"} {
			if v, ok, err := h.Get(t.Context(), name, []byte("k")); !ok || err != nil || string(v) != "v" {
				t.Errorf("%s's data = %q, %v, %v", name, v, ok, err)
			}
		}
	}
	deploy(t, s, store.Deployment{Name: "keep", Digest: digest})
	if v, ok, _ := other.Get(t.Context(), "keep", []byte("k")); !ok || string(v) != "v" {
		t.Errorf("keep's data after a new deploy = %q, %v", v, ok)
	}
	// Removing the data leaves none of it counted.
	set(t, s, "drop", "k2", "v")
	if n, err := s.DataUsage("drop"); n != store.BlockSize || err != nil {
		t.Errorf("DataUsage(drop) once set anew = %d, %v; want %d", n, err, store.BlockSize)
	}
}

// badNames are names that manifest.CheckProgramName refuses, some of which
// would lead out of a directory were they used as file names.
var badNames = []string{
	"", "../x", "..%2Fx", "a/b", "..", ".", ".tmp-x", "-x", "Upper", "x\x00", "x y", "é",
	strings.Repeat("a", manifest.MaxProgramName+1),
}

// testProgramNames: every method that takes a program name refuses one that
// is invalid, and nothing is written under it.
func testProgramNames(t *testing.T, open func() store.State) {
	s := open()
	digest := putImage(t, s, "one")
	methods := map[string]func(name string) error{
		"Deploy": func(name string) error { return s.Deploy(store.Deployment{Name: name, Digest: digest}) },
		"Deployment": func(name string) error {
			_, err := s.Deployment(name)
			return err
		},
		"Remove":              func(name string) error { return s.Remove(name, false) },
		"Remove keeping data": func(name string) error { return s.Remove(name, true) },
		"Get": func(name string) error {
			_, _, err := s.Get(t.Context(), name, []byte("k"))
			return err
		},
		"Set":    func(name string) error { return s.Set(t.Context(), name, []byte("k"), []byte("v")) },
		"Delete": func(name string) error { return s.Delete(t.Context(), name, []byte("k")) },
		"DataUsage": func(name string) error {
			_, err := s.DataUsage(name)
			return err
		},
	}
	for method, f := range methods {
		for _, name := range badNames {
			if err := f(name); !errors.Is(err, manifest.ErrProgramName) {
				t.Errorf("%s(%q) = %v, want ErrProgramName", method, name, err)
			}
		}
	}
	list, damaged, err := s.Deployments()
	if err != nil || len(list) != 0 || len(damaged) != 0 {
		t.Errorf("Deployments after bad names = %v, %v, %v", list, damaged, err)
	}
}

// testRacingDeployers has writers on several handles (as separate processes
// would be) deploy and replace names while they list: every read sees whole
// deployments only, and a name is never lost or doubled.
func testRacingDeployers(t *testing.T, open func() store.State) {
	var handles []store.State
	for range 4 {
		handles = append(handles, open())
	}
	digests := map[string]bool{}
	var list []string
	for i := range 4 {
		d := putImage(t, handles[i], fmt.Sprintf("image %d", i))
		digests[d] = true
		list = append(list, d)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 8 {
		s := handles[w%len(handles)]
		wg.Go(func() {
			<-start
			for i := range 40 {
				name := fmt.Sprintf("p%d", i%5)
				if err := s.Deploy(store.Deployment{Name: name, Digest: list[(w+i)%4], Source: name}); err != nil {
					t.Errorf("Deploy: %v", err)
				}
				deployed, damaged, err := s.Deployments()
				if err != nil {
					t.Errorf("Deployments: %v", err)
				}
				for _, d := range damaged {
					t.Errorf("damaged %q: %v", d.Name, d.Err)
				}
				for _, d := range deployed {
					if !digests[d.Digest] || d.Source != d.Name {
						t.Errorf("listed a torn deployment: %+v", d)
					}
				}
				if i%10 == 0 {
					for _, d := range deployed {
						if _, err := s.Image(d.Digest); err != nil {
							t.Error(err)
						}
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := names(t, open()); got != "p0 p1 p2 p3 p4" {
		t.Fatalf("Deployments = %q, want p0 to p4", got)
	}
	s := open()
	for k := range 5 {
		d, err := s.Deployment(fmt.Sprintf("p%d", k))
		if err != nil || !digests[d.Digest] || d.Source != d.Name {
			t.Errorf("p%d = %+v, %v", k, d, err)
		}
	}
	// Once the race is over, a deploy replaces what it left.
	deploy(t, handles[1], store.Deployment{Name: "p0", Digest: list[0], Source: "last"})
	if d, err := s.Deployment("p0"); err != nil || d.Digest != list[0] || d.Source != "last" {
		t.Errorf("p0 after the last deploy = %+v, %v", d, err)
	}
}

// testChanges: a state whose Changes is not nil tells of another handle's
// deploys and removals; nil says that only reading the deployments again
// tells. The bound is loose (a loaded CI must not fail it by chance): the
// second that the issue asks is the benchmark's to measure.
func testChanges(t *testing.T, open func() store.State) {
	s, other := open(), open()
	changes := s.Changes()
	if changes == nil {
		t.Skip("Changes is nil: other processes' deploys are seen by reading again")
	}
	digest := putImage(t, other, "one")
	wait := func(what string, change func() error) {
		t.Helper()
		// What is pending from before (buffered, coalesced) is drained,
		// so that only a signal sent for this change counts.
		for drained := false; !drained; {
			select {
			case <-changes:
			default:
				drained = true
			}
		}
		if err := change(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changes:
		case <-time.After(5 * time.Second):
			t.Fatalf("no change received within 5s of %s through another handle", what)
		}
	}
	wait("a deploy", func() error { return other.Deploy(store.Deployment{Name: "p", Digest: digest}) })
	wait("a redeploy", func() error { return other.Deploy(store.Deployment{Name: "p", Digest: digest, Source: "again"}) })
	wait("a removal", func() error { return other.Remove("p", false) })
}
