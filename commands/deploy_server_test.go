package commands_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/berm-dev/berm/internal/registrytest"
)

// berm deploy --server in a project finds that the server refuses it (no
// server there, a token it does not take) before pushing the image, not
// after.
func TestDeployServerChecksBeforePushing(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t, nil)
	docker := t.TempDir()
	project := t.TempDir()
	b, _ := os.ReadFile(fixturePath("echo.wasm"))
	os.WriteFile(filepath.Join(project, "example.wasm"), b, 0o644)
	os.WriteFile(filepath.Join(project, "berm.toml"), []byte("name = \"example\"\nimage = \""+host+"/org/example\"\n"), 0o644)
	base := startHTTP(t, t.TempDir(), "--token", "tok")

	for _, tc := range []struct {
		name   string
		server string
		words  []string
	}{
		{"no token", base, []string{"unauthorized", "nothing pushed to " + host + "/org/example", "hint: give the server's token"}},
		{"no server there", "http://" + closedPort(t), []string{"unreachable", "nothing pushed to " + host + "/org/example", "hint: is berm serve running there?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := bermEnv(t, t.TempDir(), docker, "deploy", "--server", tc.server)
			cmd.Dir = project
			fails(t, cmd, tc.words...)
			resp, err := http.Get("http://" + host + "/v2/org/example/tags/list")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("the registry holds org/example (%s): deploy pushed before the server refused it", resp.Status)
			}
		})
	}

	// With the token, it pushes and the server deploys.
	cmd := bermEnv(t, t.TempDir(), docker, "deploy", "--server", base, "--token", "tok")
	cmd.Dir = project
	run(t, cmd)
}
