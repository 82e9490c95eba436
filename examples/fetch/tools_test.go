//go:build !wasip1

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	berm "github.com/berm-dev/berm/sdk"
)

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("héllo"))
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0xff, 0xfe, 0})
		case "/moved":
			http.Redirect(w, r, "/text", http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, args string
		want       fetchResult
		failure    string
	}{
		{name: "text", args: `{"url":"` + srv.URL + `/text"}`,
			want: fetchResult{URL: srv.URL + "/text", Status: 200, ContentType: "text/plain; charset=utf-8", Body: "héllo", Bytes: 6}},
		{name: "cut on a character", args: `{"url":"` + srv.URL + `/text","max_bytes":2}`,
			want: fetchResult{URL: srv.URL + "/text", Status: 200, ContentType: "text/plain; charset=utf-8", Body: "h", Bytes: 6, Truncated: true}},
		{name: "redirect", args: `{"url":"` + srv.URL + `/moved"}`,
			want: fetchResult{URL: srv.URL + "/moved", Status: 200, ContentType: "text/plain; charset=utf-8", Body: "héllo", Bytes: 6}},
		{name: "binary", args: `{"url":"` + srv.URL + `/binary"}`,
			want: fetchResult{URL: srv.URL + "/binary", Status: 200, ContentType: "application/octet-stream", Bytes: 3, Binary: true}},
		{name: "not found is a result", args: `{"url":"` + srv.URL + `/nope"}`,
			want: fetchResult{URL: srv.URL + "/nope", Status: 404, ContentType: "text/plain; charset=utf-8", Body: "404 page not found\n", Bytes: 19}},
		{name: "not a URL", args: `{"url":"example.com"}`,
			failure: `url "example.com": want an absolute http or https URL, as in {"url": "https://example.com/"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &berm.FakeHost{Args: []byte(tc.args), HTTP: srv.Client().Transport}
			h.Run(func() { berm.Handle(fetchTool) })
			if tc.failure != "" {
				if h.Failure != tc.failure {
					t.Errorf("failure %q, want %q", h.Failure, tc.failure)
				}
				return
			}
			var got fetchResult
			if err := json.Unmarshal(h.Result, &got); err != nil || h.Failed {
				t.Fatalf("result %q, failure %q: %v", h.Result, h.Failure, err)
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestFetchRefused: the host's refusal is the tool's failure, its message
// whole.
func TestFetchRefused(t *testing.T) {
	h := &berm.FakeHost{Args: []byte(`{"url":"https://example.com/"}`)}
	h.Run(func() { berm.Handle(fetchTool) })
	if !h.Failed || !strings.HasPrefix(h.Failure, "berm.http: GET example.com:443: the host is not granted") {
		t.Errorf("failure %q, want the host's refusal", h.Failure)
	}
}
