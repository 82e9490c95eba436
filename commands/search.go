package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/runtime/store"
)

// maxWarnings is how many skipped lines of an index a search names (the
// index keeps index.MaxWarnings); past it, it counts them.
const maxWarnings = 5

// searchWait is how long a search of an index it has a clone of waits for
// the index's fetch before it searches the clone, saying so: an index's
// server that trickles would hold it up to index.FetchTimeout, and every
// search behind it. --refresh waits for the fetch; a first clone is waited
// for whatever this says.
const searchWait = 5 * time.Second

type searchOptions struct {
	root    string
	state   string // --state: "" for the directory root
	index   string
	json    bool
	refresh bool
	limit   int
	remote
	// now is the staleness clock; nil means time.Now.
	now func() time.Time
}

func newSearchCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "search",
		Usage:     "find programs in an index (a git repository anyone can publish to)",
		ArgsUsage: "QUERY",
		Description: `Ranks the programs of the index by how well their name, tools, usage and tools'
descriptions match QUERY (BM25, words stemmed: "reading files" finds "reads a
file"), and prints the best, each with its usage line. REFERENCE is pinned by
digest: give it to berm deploy as it is. PUBLISHER is what the line claims;
nothing checks it. A program deployed here is marked with its name.

   berm config set index https://github.com/ORG/berm-index    # once
   berm search read a file
   berm search --json "convert images" | jq -r '.[0] | .reference + "@" + .digest'
   berm deploy reader "$(berm search --json read a file | jq -r '.[0] | .reference + "@" + .digest')"
   berm search --server http://ci:7777 pdf

The index is cloned into the root (index/) on first use, with no git binary,
and fetched again when the clone is over 5 minutes old, or with --refresh.
When it cannot be reached, the last clone is searched and stderr says so,
with its age; so it is when its server answers nothing, or sends less than
4KiB/s, for 20 s, or takes over 15 minutes for a request or for the whole
fetch (index too slow), and when the fetch has not ended within 5 s (index
not fetched in time: berm search stops it, and a server lets it go on for
its next searches). --refresh waits for the fetch, up to its 15 minutes, as
a first clone is waited for.
The index is --index, else BERM_INDEX, else config.toml's index (berm config
set index URL). No match exits 0 with a note on stderr.
See docs/index.md for the index's format.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "index", Usage: "search the index at `URL` (https://, file:// or a path)", Sources: cli.EnvVars("BERM_INDEX")},
			&cli.BoolFlag{Name: "json", Usage: "print an array, best first: each line's fields, score and deployed (name or null)"},
			&cli.BoolFlag{Name: "refresh", Usage: "fetch the index whatever the clone's age, and wait for the fetch (up to 15 minutes)"},
			&cli.IntFlag{Name: "limit", Usage: "print at most `N` programs", Value: 10},
		}, serverFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			query := strings.TrimSpace(strings.Join(cmd.Args().Slice(), " "))
			if query == "" {
				return usagef("search takes a QUERY: berm search read a file")
			}
			if cmd.Int("limit") < 1 {
				return usagef("--limit must be at least 1")
			}
			opts := searchOptions{
				root:    cmd.String("root"),
				state:   stateFlag(cmd),
				index:   cmd.String("index"),
				json:    cmd.Bool("json"),
				refresh: cmd.Bool("refresh"),
				limit:   int(cmd.Int("limit")),
				remote:  readServerFlags(cmd),
			}
			return runSearch(ctx, e, opts, query)
		},
	}
}

// errNoIndex: no index to search is configured.
var errNoIndex = errors.New("no index configured")

func runSearch(ctx context.Context, e *env, opts searchOptions, query string) error {
	client, err := opts.client()
	if err != nil {
		return err
	}
	var r control.SearchResponse
	if client != nil {
		r, err = client.Search(ctx, query, opts.limit, opts.refresh)
	} else {
		r, err = searchLocal(ctx, opts, query)
	}
	if err != nil {
		return err
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: index: %s\n", printable(w))
	}
	if more := r.Skipped - len(r.Warnings); more > 0 {
		fmt.Fprintf(e.stderr, "berm: warning: index: %d more lines or files skipped\n", more)
	}
	if r.Offline != "" {
		fmt.Fprintf(e.stderr, "berm: warning: %s; searching the clone fetched %s ago\n",
			printable(r.Offline), age(time.Since(r.Fetched)))
	}
	if r.Fetching && !opts.refresh {
		fmt.Fprintf(e.stderr, "berm: hint: berm search --refresh waits for the fetch (up to %s)\n", minutes(index.FetchTimeout))
	}
	if len(r.Results) == 0 {
		fmt.Fprintf(e.stderr, "berm: no program in %s matches %q\n", printable(r.Index), query)
	}
	if opts.json {
		return writeJSON(e, r.Results)
	}
	if len(r.Results) == 0 {
		return nil
	}
	return printSearch(e.stdout, r.Results)
}

// searchLocal searches the index that --index, BERM_INDEX or config.toml
// names, cloned into the root.
func searchLocal(ctx context.Context, opts searchOptions, query string) (control.SearchResponse, error) {
	if opts.root == "" {
		return control.SearchResponse{}, noRoot()
	}
	url := opts.index
	if url == "" {
		var err error
		if url, err = configValue(opts.root, "index"); err != nil {
			return control.SearchResponse{}, err
		}
	}
	if url == "" {
		return control.SearchResponse{}, withHint(errNoIndex,
			"configure one: berm config set index URL (a git repository's https:// URL or a local path), or give --index URL")
	}
	st, err := openState(ctx, opts.root, opts.state, existingRoot)
	if err != nil {
		return control.SearchResponse{}, err
	}
	defer closeState(st)
	return searchIndex(ctx, opts.root, url, query, opts.limit, &index.Options{Refresh: opts.refresh, Now: opts.now, Wait: searchWaitFor(ctx, opts.refresh)}, st)
}

// searchWaitFor is how long a search waits for the fetch of an index it has
// a clone of (index.Options.Wait): searchWait, or with refresh until the
// fetch ends; never past half of what is left of ctx's deadline (a call's
// under serve), so that the clone's answer still makes it.
func searchWaitFor(ctx context.Context, refresh bool) time.Duration {
	wait := searchWait
	if refresh {
		wait = 0
	}
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d) / 2; wait == 0 || left < wait {
			wait = max(left, time.Millisecond)
		}
	}
	return wait
}

// serverSearch is the search a server offers (GET /v1/search, and the
// berm_search tool when it is on): the index url, or else the one its
// root's config.toml names, cloned into its root, the programs deployed in
// st marked (none when st is nil).
func serverSearch(root, url string, st store.State) mcpserve.SearchFunc {
	return func(ctx context.Context, query string, limit int, refresh bool) (control.SearchResponse, error) {
		u := url
		if u == "" {
			var err error
			if u, err = configValue(root, "index"); err != nil {
				return control.SearchResponse{}, err
			}
		}
		if u == "" {
			return control.SearchResponse{}, fmt.Errorf("%w on the server: berm config set index URL, with the server's root", errNoIndex)
		}
		// A fetch the search stops waiting for goes on in the server, for
		// the searches after it.
		return searchIndex(ctx, root, u, query, limit, &index.Options{Refresh: refresh, Wait: searchWaitFor(ctx, refresh), Detach: true}, st)
	}
}

// searchIndex searches the index at url, cloned under root, and marks the
// programs deployed in st, which may be nil. It is what a server's GET
// /v1/search answers with, too.
func searchIndex(ctx context.Context, root, url, query string, limit int, iopts *index.Options, st store.State) (control.SearchResponse, error) {
	ix, err := index.Open(ctx, root, url, iopts)
	if errors.Is(err, index.ErrSlow) {
		// No flag moves the bounds: they cut only a server that all but
		// stopped, and a clone made by git is searched with none.
		return control.SearchResponse{}, withHint(err, "the index's server sends too little or nothing: try again later, or clone it with git (git clone %s DIR) and search the clone with --index DIR", url)
	}
	if errors.Is(err, index.ErrBound) {
		return control.SearchResponse{}, withHint(err, "the index holds more than berm reads (docs/index.md, Bounds): its maintainers must remove what is past the bound")
	}
	if err != nil {
		return control.SearchResponse{}, withHint(err, "check the index's URL (--index, BERM_INDEX or `berm config get index`) and the network")
	}
	hits, err := ix.Search(query, limit)
	if err != nil {
		return control.SearchResponse{}, err
	}
	deployed, err := deployedByLayer(st)
	if err != nil {
		return control.SearchResponse{}, err
	}
	r := control.SearchResponse{Index: ix.URL, Commit: ix.Commit, Fetched: ix.Fetched, Skipped: ix.Skipped, Results: []control.SearchResult{}}
	if ix.Offline != nil {
		r.Offline = ix.Offline.Error()
		r.Fetching = errors.Is(ix.Offline, index.ErrFetching)
	}
	for i, w := range ix.Warnings {
		if i == maxWarnings {
			break
		}
		r.Warnings = append(r.Warnings, w.String())
	}
	for _, h := range hits {
		res := control.SearchResult{
			Reference: h.Reference, Digest: h.Digest, Layer: h.Layer,
			Publisher: h.Publisher, Published: h.Published, Usage: h.Usage,
			Tools: make([]control.SearchTool, len(h.Tools)), Syscalls: h.Syscalls, Calls: h.Calls,
			Score: h.Score,
		}
		for i, t := range h.Tools {
			res.Tools[i] = control.SearchTool{Name: t.Name, Description: t.Description}
		}
		if name, ok := deployed[h.Layer]; ok {
			res.Deployed = &name
		}
		r.Results = append(r.Results, res)
	}
	return r, nil
}

// deployedByLayer maps the layer digest of each program deployed in st to
// its name (the first in order when several share one). No state (a root
// that does not exist) deploys nothing, and a damaged record marks nothing.
func deployedByLayer(st store.State) (map[string]string, error) {
	if st == nil {
		return map[string]string{}, nil
	}
	list, _, err := st.Deployments()
	if err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	m := map[string]string{}
	for _, d := range list {
		if _, ok := m[d.Digest]; !ok {
			m[d.Digest] = d.Name
		}
	}
	return m, nil
}

// printSearch prints the table: REFERENCE (pinned), TOOLS, PUBLISHER, and
// under each program its usage line, after the name it is deployed under
// here. Everything but the score comes from someone else's index: it goes
// through printable.
func printSearch(w io.Writer, results []control.SearchResult) error {
	rows := [][3]string{{"REFERENCE", "TOOLS", "PUBLISHER"}}
	for _, r := range results {
		names := make([]string, len(r.Tools))
		for i, t := range r.Tools {
			names[i] = t.Name
		}
		publisher := "-"
		if r.Publisher != "" {
			publisher = r.Publisher + " (claimed)"
		}
		rows = append(rows, [3]string{r.Reference + "@" + r.Digest, strings.Join(names, ","), publisher})
	}
	var widths [2]int
	for _, row := range rows {
		for i := range widths {
			widths[i] = max(widths[i], utf8.RuneCountInString(printable(row[i])))
		}
	}
	pw := printableWriter{w}
	for i, row := range rows {
		fmt.Fprintf(pw, "%-*s  %-*s  %s\n", widths[0], row[0], widths[1], row[1], row[2])
		if i == 0 {
			continue
		}
		r := results[i-1]
		line := usageLine(r.Usage)
		if r.Deployed != nil {
			line = strings.TrimSpace("[deployed as " + *r.Deployed + "] " + line)
		}
		if line != "" {
			fmt.Fprintf(pw, "    %s\n", line)
		}
	}
	return nil
}

// usageLine is the first line of a usage, cut to fit a terminal's width.
func usageLine(usage string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(usage), "\n")
	line = strings.TrimSpace(strings.TrimLeft(line, "# "))
	if utf8.RuneCountInString(line) > 100 {
		line = string([]rune(line)[:99]) + "…"
	}
	return line
}

// age is a clone's age as a person reads it.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return plural(int(d.Minutes()), "minute")
	case d < 48*time.Hour:
		return plural(int(d.Hours()), "hour")
	}
	return plural(int(d.Hours()/24), "day")
}

// minutes is a bound of whole minutes as a person reads it: "15 minutes".
func minutes(d time.Duration) string { return plural(int(d.Minutes()), "minute") }

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
