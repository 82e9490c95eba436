// Command fetch is berm's example of the network grant: it GETs a URL
// through berm.http, from the hosts its deployment grants and no others:
//
//	berm deploy --example fetch --allow-host example.com
//
// It is built as a wasip1 reactor (see examples/README.md); its tool is a
// plain function, so that it tests on the host against berm.FakeHost. It calls
// berm.HTTP rather than net/http over sdk/bermhttp's Transport, which would
// work as well: net/http triples the image (11 MB against 3.3 MB) and
// doubles the time of a call, since its setup runs again in every instance.
package main

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	berm "github.com/berm-dev/berm/sdk"
)

// main never runs: a reactor's host calls its tools, after _initialize.
func main() {}

// Bounds of the body fetch returns, in bytes.
const (
	defaultMaxBytes = 64 << 10
	maxMaxBytes     = 1 << 20
)

type fetchArgs struct {
	URL      string `json:"url"`
	MaxBytes int    `json:"max_bytes"`
}

type fetchResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	// Body is the body as text, cut at MaxBytes (on a character's
	// boundary); empty when the body is not UTF-8.
	Body      string `json:"body"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Binary    bool   `json:"binary,omitempty"`
}

func fetchTool(a fetchArgs) (fetchResult, error) {
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fetchResult{}, fmt.Errorf(`url %q: want an absolute http or https URL, as in {"url": "https://example.com/"}`, a.URL)
	}
	limit := a.MaxBytes
	if limit <= 0 {
		limit = defaultMaxBytes
	}
	limit = min(limit, maxMaxBytes)
	resp, err := berm.HTTP("GET", u.String(), "", nil)
	if err != nil {
		return fetchResult{}, err // the host's refusal says what and why
	}
	b := resp.Body
	r := fetchResult{
		URL:         u.String(),
		Status:      resp.Status,
		ContentType: header(resp.Header, "Content-Type"),
		Bytes:       len(b),
	}
	if len(b) > limit {
		b, r.Truncated = b[:limit], true
		// Cut at a character's boundary: drop a partial rune at the end.
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	if utf8.Valid(b) {
		r.Body = string(b)
	} else {
		r.Binary = true
	}
	return r, nil
}

// header is the value of the field name in an HTTP/1 header block.
func header(block, name string) string {
	for _, line := range strings.Split(block, "\n") {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
		if ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
