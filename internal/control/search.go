package control

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SearchResult is a program a search found: the index's line, its score,
// and the name it is deployed under where the search ran (nil when it is
// not). `berm search --json` prints an array of them.
type SearchResult struct {
	Reference string       `json:"reference"`
	Digest    string       `json:"digest"`
	Layer     string       `json:"layer"`
	Publisher string       `json:"publisher"`
	Published time.Time    `json:"published"`
	Usage     string       `json:"usage"`
	Tools     []SearchTool `json:"tools"`
	Syscalls  []string     `json:"syscalls"`
	Calls     []string     `json:"calls"`
	Score     float64      `json:"score"`
	Deployed  *string      `json:"deployed"`
}

// SearchTool is a tool of a program a search found.
type SearchTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// SearchResponse is the answer to GET /v1/search?q=QUERY[&limit=N][&refresh=true].
type SearchResponse struct {
	// Index is the URL of the index searched, Commit the commit.
	Index  string `json:"index"`
	Commit string `json:"commit"`
	// Fetched is when the index was last found up to date.
	Fetched time.Time `json:"fetched"`
	// Offline, when set, says why the index could not be fetched: the
	// results come from the clone fetched at Fetched.
	Offline string `json:"offline,omitempty"`
	// Fetching says the fetch was still under way when the search stopped
	// waiting for it (Offline says since when): a search a little later,
	// on a server, finds what it fetched.
	Fetching bool `json:"fetching,omitempty"`
	// Warnings are the lines of the index that were skipped (the first
	// few), Skipped how many in all.
	Warnings []string `json:"warnings,omitempty"`
	Skipped  int      `json:"skipped,omitempty"`
	// Results, best first.
	Results []SearchResult `json:"results"`
}

// Search asks the server to search its own index for query.
func (c *Client) Search(ctx context.Context, query string, limit int, refresh bool) (SearchResponse, error) {
	q := url.Values{"q": {query}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if refresh {
		q.Set("refresh", "true")
	}
	var r SearchResponse
	err := c.do(ctx, http.MethodGet, "/v1/search", q, nil, "", &r)
	return r, err
}
