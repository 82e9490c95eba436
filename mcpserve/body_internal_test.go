package mcpserve

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestReadBodyCutOff: a body that ends before its Content-Length, or inside
// a chunk of chunked encoding, is refused with 400, not taken as the
// request (io.ReadFull's ErrUnexpectedEOF read as the body's end let both
// through).
func TestReadBodyCutOff(t *testing.T) {
	t.Parallel()
	const msg = `{"jsonrpc":"2.0","method":"ping","id":1}`
	for name, request := range map[string]string{
		"content-length": "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + msg,
		"chunked":        "POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" + msg,
		"whole":          "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\nConnection: close\r\n\r\n" + msg,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			type read struct {
				body string
				ok   bool
			}
			got := make(chan read, 1)
			bodies := new(budget)
			bodies.init(1 << 30)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, release, ok := readBody(w, r, 1<<20, "request body", nil, bodies)
				if ok {
					release()
				}
				got <- read{string(body), ok}
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, request)
			c.(*net.TCPConn).CloseWrite()
			select {
			case r := <-got:
				if whole := name == "whole"; r.ok != whole || whole && r.body != msg {
					t.Errorf("readBody = %q, %v; want it refused but for the whole body", r.body, r.ok)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("readBody did not return")
			}
			if bodies.inUse() != 0 {
				t.Errorf("%d bytes left held", bodies.inUse())
			}
		})
	}
}
