package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/control"
)

// SearchFunc searches the server's own index for query: at most limit
// programs, best first, fetching the index first when refresh is set. The
// command line fills it with the index the server's root is configured with;
// mcpserve does not know how an index is read. It runs outside the workers
// and --timeout, so it must answer in a few seconds when it has a clone,
// from the clone if need be (Offline, Fetching), and leave a slow fetch to
// go on without the caller: berm's waits 5 s for one.
type SearchFunc func(ctx context.Context, query string, limit int, refresh bool) (control.SearchResponse, error)

// maxSearchLimit bounds what one search returns over the network.
const maxSearchLimit = 100

// SearchHandler answers GET /v1/search?q=QUERY[&limit=N][&refresh=true]
// with search's control.SearchResponse. It registers nothing: mount it
// beside the control API, behind the same guard (token, Host, Origin).
func SearchHandler(search SearchFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		query := q.Get("q")
		if query == "" {
			writeError(w, http.StatusBadRequest, "invalid", errors.New("search: want ?q=QUERY"))
			return
		}
		limit := 10
		if s := q.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxSearchLimit {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Errorf("search: limit %q: want 1 to %d", s, maxSearchLimit))
				return
			}
			limit = n
		}
		resp, err := search(r.Context(), query, limit, q.Get("refresh") == "true")
		if err != nil {
			writeError(w, http.StatusBadGateway, "index", err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// SearchToolName is the name of the search tool AddSearchTool serves.
// Reserved: a program named "berm" with a tool "search" would be served
// under it too, so a server offering the tool must refuse such a program.
const SearchToolName = "berm_search"

// searchInput is the search tool's arguments.
type searchInput struct {
	Query string `json:"query" jsonschema:"what the program should do, in a few words: read a file, convert images"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many programs (default 10, at most 100)"`
}

// AddSearchTool offers models search as a read-only tool: it finds
// programs in the server's index and deploys nothing (the model tells its
// user the pinned reference, and the user deploys it). It is meant to be
// off unless the server is started with --catalog.
func AddSearchTool(s *mcp.Server, search SearchFunc) {
	open := true
	mcp.AddTool(s, &mcp.Tool{
		Name: SearchToolName,
		Description: "Finds programs that could be deployed on this berm server, in its index: " +
			"each result's reference@digest, tools, usage and claimed publisher, best first. Deploys nothing. " +
			"When offline is set, the results come from the copy of the index fetched at fetched " +
			"(with fetching, a fetch is under way: a search a little later may find newer programs).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &open},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in searchInput) (*mcp.CallToolResult, control.SearchResponse, error) {
		if in.Limit <= 0 {
			in.Limit = 10
		}
		in.Limit = min(in.Limit, maxSearchLimit)
		resp, err := search(ctx, in.Query, in.Limit, false)
		if err != nil {
			// The model sees it: it may try other words, or say so.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, control.SearchResponse{}, nil
		}
		b, err := json.Marshal(resp)
		if err != nil {
			return nil, control.SearchResponse{}, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, resp, nil
	})
}
