package registry

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berm-dev/berm/internal/registrytest"
)

// The tests run against real registries: Debian's docker-registry package
// (github.com/distribution/distribution), started here on loopback, one per
// test that needs it, and the oras CLI for cross-checks. Without them, -short
// skips those tests and a full run fails, naming what to install.

const echoWasm = "../testdata/echo.wasm"

// readEcho returns testdata/echo.wasm, a valid berm program.
func readEcho(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(echoWasm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// padded returns module grown to size bytes (or left as it is when already
// that large) by a custom section that is not .berm.abi, so that it stays the
// same valid program. Its bytes are pseudo-random, seeded, so that no layer
// compresses away.
func padded(module []byte, size int, seed uint64) []byte {
	const name = "berm-test-padding"
	body := binary.AppendUvarint(nil, uint64(len(name)))
	body = append(body, name...)
	total := func(n int) int {
		return len(module) + 1 + len(binary.AppendUvarint(nil, uint64(len(body)+n))) + len(body) + n
	}
	if total(0) > size {
		return bytes.Clone(module)
	}
	n := 0
	for total(n+1) <= size {
		n = max(n+1, size-total(0)-binary.MaxVarintLen64)
	}
	out := append(bytes.Clone(module), 0)
	out = binary.AppendUvarint(out, uint64(len(body)+n))
	out = append(out, body...)
	rng := rand.New(rand.NewPCG(seed, 0))
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = byte(rng.Uint32())
	}
	return append(out, pad...)
}

// startRegistry starts a registry for the test (see registrytest.Start).
func startRegistry(t testing.TB, opts registryOptions) string {
	t.Helper()
	return registrytest.Start(t, &registrytest.Options{User: opts.user, Password: opts.password})
}

// registryOptions describe a registry to start.
type registryOptions struct {
	// user and password, when set, turn on htpasswd (basic) auth.
	user, password string
}

func orasBin(t testing.TB) string { return registrytest.Oras(t) }

// newClient returns a Client with its own, empty Docker config directory, so
// that no test reads or writes ~/.docker.
func newClient(t testing.TB, cfg *Config) *Client {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.DockerConfig == "" {
		cfg.DockerConfig = t.TempDir()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runOras runs the oras CLI in dir with its own Docker config.
func runOras(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(orasBin(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("oras %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
