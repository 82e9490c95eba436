package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// dockerAuths reads the "auths" of the config.json in dir.
func dockerAuths(t *testing.T, dir string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var config struct{ Auths map[string]json.RawMessage }
	if err := json.Unmarshal(b, &config); err != nil {
		t.Fatal(err)
	}
	return config.Auths
}

// TestLogin runs against a registry with htpasswd (basic) auth, its entry
// hashed with golang.org/x/crypto/bcrypt, and a temporary DOCKER_CONFIG
// directory: the real ~/.docker is never read or written.
func TestLogin(t *testing.T) {
	host := startRegistry(t, registryOptions{user: "berm", password: "s3cret"})
	dir := t.TempDir()
	client := func() *Client { return newClient(t, &Config{DockerConfig: dir}) }
	image := readEcho(t)
	ref := host + "/berm/echo:v1"

	if _, err := client().Push(t.Context(), ref, image, nil); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Push before login = %v, want ErrUnauthorized", err)
	}
	if _, err := client().Pull(t.Context(), ref, nil); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Pull before login = %v, want ErrUnauthorized", err)
	}

	for name, password := range map[string]string{"wrong password": "secret", "empty password": ""} {
		t.Run(name, func(t *testing.T) {
			err := client().Login(t.Context(), host, "berm", password)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Login = %v, want ErrUnauthorized", err)
			}
			t.Log(err)
			if auths := dockerAuths(t, dir); auths[host] != nil {
				t.Errorf("a refused login stored %s", auths[host])
			}
		})
	}

	if err := client().Login(t.Context(), host, "berm", "s3cret"); err != nil {
		t.Fatalf("Login: %v", err)
	}
	if auths := dockerAuths(t, dir); auths[host] == nil {
		t.Fatalf("config.json has no credentials for %s after login: %v", host, auths)
	}
	// A new client reads the stored credentials, as a new berm process would.
	c := client()
	pushed, err := c.Push(t.Context(), ref, image, nil)
	if err != nil {
		t.Fatalf("Push after login: %v", err)
	}
	got, err := client().Pull(t.Context(), pushed.Resolved, nil)
	if err != nil || !bytes.Equal(got.Bytes, image) {
		t.Fatalf("Pull after login: %v", err)
	}

	if err := client().Logout(t.Context(), host); err != nil {
		t.Fatalf("Logout: %v", err)
	}
	if auths := dockerAuths(t, dir); auths[host] != nil {
		t.Errorf("config.json still has credentials for %s after logout", host)
	}
	if _, err := client().Pull(t.Context(), ref, nil); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Pull after logout = %v, want ErrUnauthorized", err)
	}
	if err := client().Logout(t.Context(), host); err != nil {
		t.Errorf("second Logout: %v", err)
	}
}

func TestLoginBadRegistry(t *testing.T) {
	c := newClient(t, nil)
	for _, name := range []string{"", "a/b", "host:port:port"} {
		if err := c.Login(t.Context(), name, "u", "p"); !errors.Is(err, ErrReference) {
			t.Errorf("Login(%q) = %v, want ErrReference", name, err)
		}
	}
}
