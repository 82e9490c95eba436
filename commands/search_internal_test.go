package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// TestSearchServer: `berm search --server URL` asks a server's
// GET /v1/search, which searches the server's own index and root.
func TestSearchServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	indextest.Init(t, dir)
	files := indextest.Generate("ghcr.io", 50)
	indextest.Add(files, indextest.Entry("ghcr.io", "acme/slurp", "get", "Reads documents.", "Reads the contents of a file at a path."))
	indextest.Commit(t, dir, files)

	serverRoot := t.TempDir()
	mux := http.NewServeMux()
	mux.Handle("GET /v1/search", mcpserve.SearchHandler(serverSearch(serverRoot, "", nil)))
	ts := httptest.NewServer(mux)
	defer ts.Close()

	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr}
	opts := searchOptions{root: t.TempDir(), limit: 2, json: true, remote: remote{server: ts.URL}}
	// No index configured on the server: the error says where to configure one.
	if err := runSearch(context.Background(), e, opts, "read a file"); err == nil || !strings.Contains(err.Error(), "no index configured on the server") {
		t.Fatalf("no index on the server: %v", err)
	}
	if err := runConfig(context.Background(), e, serverRoot, []string{"set", "index", dir}); err != nil {
		t.Fatal(err)
	}
	if err := runSearch(context.Background(), e, opts, "read a file"); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var results []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) != 2 || results[0]["reference"] != "ghcr.io/acme/slurp:v1" {
		t.Fatalf("%v: %s", err, stdout.String())
	}
}
