package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/mcpserve"
)

// fakeSearch answers every query with one result, and records the call.
type fakeSearch struct {
	query   string
	limit   int
	refresh bool
	err     error
	offline string // an answer from the clone, the fetch under way
}

func (f *fakeSearch) search(_ context.Context, query string, limit int, refresh bool) (control.SearchResponse, error) {
	f.query, f.limit, f.refresh = query, limit, refresh
	if f.err != nil {
		return control.SearchResponse{}, f.err
	}
	name := "reader"
	return control.SearchResponse{
		Index: "https://example.com/index", Offline: f.offline, Fetching: f.offline != "",
		Results: []control.SearchResult{{
			Reference: "ghcr.io/acme/reader:v1", Digest: "sha256:" + strings.Repeat("a", 64),
			Tools: []control.SearchTool{{Name: "read", Description: "Reads a file."}}, Score: 1.5, Deployed: &name,
		}},
	}, nil
}

func TestSearchHandler(t *testing.T) {
	t.Parallel()
	f := &fakeSearch{}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/search", mcpserve.SearchHandler(f.search))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	c, err := control.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := c.Search(ctx, "read a file", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	if f.query != "read a file" || f.limit != 3 || !f.refresh {
		t.Fatalf("the search got %+v", f)
	}
	if len(r.Results) != 1 || r.Results[0].Reference != "ghcr.io/acme/reader:v1" || *r.Results[0].Deployed != "reader" || r.Index != "https://example.com/index" {
		t.Fatalf("response = %+v", r)
	}
	if _, err := c.Search(ctx, "x", 0, false); err != nil || f.limit != 10 || f.refresh {
		t.Fatalf("defaults: %v, %+v", err, f)
	}
	for name, path := range map[string]string{"no query": "/v1/search", "limit": "/v1/search?q=x&limit=1000"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body control.ErrorBody
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Kind != "invalid" {
			t.Errorf("%s: %d %+v", name, resp.StatusCode, body)
		}
	}
	f.err = errors.New("index https://example.com/index: index unreachable: no route")
	if _, err := c.Search(ctx, "x", 1, false); err == nil || !strings.Contains(err.Error(), "index unreachable") {
		t.Fatalf("a failing search = %v", err)
	}
}

func TestSearchTool(t *testing.T) {
	t.Parallel()
	f := &fakeSearch{}
	s := mcp.NewServer(&mcp.Implementation{Name: "berm"}, nil)
	mcpserve.AddSearchTool(s, f.search)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != mcpserve.SearchToolName || !tools.Tools[0].Annotations.ReadOnlyHint {
		t.Fatalf("tools = %+v", tools.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserve.SearchToolName, Arguments: map[string]any{"query": "read a file"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || f.query != "read a file" || f.limit != 10 || f.refresh {
		t.Fatalf("call: %+v, search got %+v", res, f)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"reference":"ghcr.io/acme/reader:v1"`) {
		t.Fatalf("structured content = %s", b)
	}
	// An answer from the clone says so, as the model reads it.
	f.offline = "index https://example.com/index: still fetching after 5s: index not fetched in time"
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserve.SearchToolName, Arguments: map[string]any{"query": "read a file"}})
	if err != nil || res.IsError {
		t.Fatalf("an answer from the clone: %v, %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"offline":"`+f.offline+`"`) || !strings.Contains(text, `"fetching":true`) {
		t.Fatalf("an answer from the clone does not say so: %s", text)
	}
	f.err = errors.New("index unreachable")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserve.SearchToolName, Arguments: map[string]any{"query": "x"}}); err != nil || !res.IsError {
		t.Fatalf("a failing search: %v, %+v", err, res)
	}
}
