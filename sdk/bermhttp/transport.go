package bermhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	berm "github.com/berm-dev/berm/sdk"
)

// Transport sends each request through berm.http. The host follows
// redirects (to granted hosts only), so the client sees the final response;
// it bounds the request and response bodies (ABI.md, berm.http). The request
// is made when RoundTrip is called and runs to its end: the request's
// context is checked before, not during (a program's deadline is the call's,
// which the host holds).
var Transport http.RoundTripper = transport{}

type transport struct{}

func (transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if req.URL == nil {
		return nil, errors.New("bermhttp: the request has no URL")
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if req.Host != "" && req.Host != req.URL.Host {
		return nil, fmt.Errorf("bermhttp: Host %q differs from the URL's host %q: berm.http sends the URL's", req.Host, req.URL.Host)
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, fmt.Errorf("bermhttp: reading the request's body: %w", err)
		}
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	r, err := berm.HTTP(method, req.URL.String(), headerBlock(req.Header), body)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status:        strconv.Itoa(r.Status) + " " + http.StatusText(r.Status),
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        parseHeader(r.Header),
		Body:          io.NopCloser(bytes.NewReader(r.Body)),
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}, nil
}

func headerBlock(h http.Header) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		for _, v := range h[name] {
			b.WriteString(name + ": " + v + "\r\n")
		}
	}
	return b.String()
}

func parseHeader(block string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(block, "\n") {
		name, value, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
		if ok {
			h.Add(name, strings.TrimSpace(value))
		}
	}
	return h
}
