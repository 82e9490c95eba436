package commands_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server searches the index of its own root: for `berm search --server`
// (GET /v1/search, under the token), and, with --catalog, for models
// through the read-only tool berm_search. Without --catalog no model sees
// it.
func TestServeSearch(t *testing.T) {
	t.Setenv("BERM_INDEX", "")
	dir, _ := searchIndex(t, searchReader)
	root := t.TempDir()
	if code, stderr := mainIn(t, root, nil, "config", "set", "index", dir); code != 0 {
		t.Fatalf("config set: exit %d\n%s", code, stderr)
	}

	base := startHTTP(t, root, "--token", "tok")
	var stdout bytes.Buffer
	code, stderr := mainIn(t, t.TempDir(), &stdout, "search", "--server", base, "--token", "tok", "--json", "read a file")
	if code != 0 {
		t.Fatalf("search --server: exit %d\n%s", code, stderr)
	}
	var results []searchResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil || len(results) == 0 || results[0]["reference"] != searchReader.Reference {
		t.Fatalf("search --server: %v\n%s", err, stdout.String())
	}
	if code, stderr := mainIn(t, t.TempDir(), nil, "search", "--server", base, "read a file"); code == 0 || !strings.Contains(stderr, "token") {
		t.Errorf("search --server without the token: exit %d\n%s", code, stderr)
	}

	for _, catalog := range []bool{false, true} {
		var args []string
		if catalog {
			args = append(args, "--catalog")
		}
		cs, _, _ := connectStdio(t, root, nil, args...)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var found *mcp.Tool
		for _, tool := range tools.Tools {
			if tool.Name == "berm_search" {
				found = tool
			}
		}
		if (found != nil) != catalog {
			t.Fatalf("catalog %v: berm_search listed %v", catalog, found != nil)
		}
		if !catalog {
			continue
		}
		if !found.Annotations.ReadOnlyHint {
			t.Errorf("berm_search is not read-only: %+v", found.Annotations)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "berm_search", Arguments: map[string]any{"query": "read a file", "limit": 3}})
		if err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("berm_search: %+v, %v", res, err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, searchReader.Reference) {
			t.Errorf("berm_search does not find %s:\n%s", searchReader.Reference, text)
		}
	}

	// Under --catalog, no program may take berm_search's name: wc has a
	// tool named search.
	catalog := startHTTP(t, root, "--token", "tok", "--catalog")
	code, stderr = mainIn(t, t.TempDir(), nil, "deploy", "--server", catalog, "--token", "tok", "--example", "wc", "berm")
	if code != 2 || !strings.Contains(stderr, "would be served as berm_search") {
		t.Errorf("deploy of berm.search under --catalog: exit %d\n%s", code, stderr)
	}
}
