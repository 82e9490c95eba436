//go:build !wasip1

package bermhttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	berm "github.com/berm-dev/berm/sdk"
	"github.com/berm-dev/berm/sdk/bermhttp"
)

func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Got", r.Header.Get("X-Test"))
		w.Write([]byte(r.Method + " " + string(b)))
	}))
	defer srv.Close()
	client := &http.Client{Transport: bermhttp.Transport}

	h := &berm.FakeHost{HTTP: srv.Client().Transport}
	h.Run(func() {
		req, _ := http.NewRequest("PUT", srv.URL, strings.NewReader("hi"))
		req.Header.Set("X-Test", "yes")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Status != "200 OK" || string(b) != "PUT hi" ||
			resp.Header.Get("X-Got") != "yes" || resp.Header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s %q %v", resp.Status, b, resp.Header)
		}
	})

	h = &berm.FakeHost{}
	h.Run(func() {
		_, err := client.Get(srv.URL)
		if r := (*berm.RefusedError)(nil); !errors.As(err, &r) || r.Syscall != "berm.http" {
			t.Errorf("refused: %v, want a *berm.RefusedError", err)
		}
	})
}
