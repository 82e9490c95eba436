//go:build !wasip1

package berm

import (
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHTTPNumber(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte("berm.http"))
	if h.Sum64() != sysHTTP {
		t.Errorf("berm.http: constant 0x%x, FNV-1a 0x%x", uint64(sysHTTP), h.Sum64())
	}
}

func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "/here", http.StatusFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Header.Get("X-Test"))
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte(r.Method + " " + r.URL.Path + " " + string(b)))
	}))
	defer srv.Close()

	h := &FakeHost{HTTP: srv.Client().Transport}
	var resp *HTTPResponse
	var err error
	h.Run(func() { resp, err = HTTP("POST", srv.URL+"/p", "X-Test: 1\r\nX-Other: 2", []byte("body")) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusTeapot || string(resp.Body) != "POST /p body" || !strings.Contains(resp.Header, "X-Got: 1\r\n") {
		t.Errorf("response %d %q %q", resp.Status, resp.Header, resp.Body)
	}
	h.Run(func() { resp, err = HTTP("GET", srv.URL+"/away", "", nil) })
	if err != nil || string(resp.Body) != "GET /here " {
		t.Errorf("redirect: %v, %+v", err, resp)
	}

	h = &FakeHost{}
	h.Run(func() { resp, err = HTTP("GET", srv.URL, "", nil) })
	if r := (*RefusedError)(nil); !errors.As(err, &r) || r.Syscall != "berm.http" || !strings.Contains(r.Message, "not granted") {
		t.Errorf("without HTTP: %v, want a refusal", err)
	}
}
