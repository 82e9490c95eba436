package mcpserve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ErrAddrInUse: another process listens on the address.
var ErrAddrInUse = errors.New("address already in use")

// AddrInUseError is a listen refused because the address is taken. Berm
// tells whether what holds it answers GET /livez as berm serve does: then
// it is most likely a berm serve (or bermd) started before, which the user
// may mean to use rather than start another.
type AddrInUseError struct {
	Addr string
	Berm bool
	Err  error // the system's error
}

func (e *AddrInUseError) Error() string {
	who := "another program (not berm serve: it does not answer GET /livez as berm does)"
	if e.Berm {
		who = "a berm serve already running (it answers GET /livez as berm does)"
	}
	return fmt.Sprintf("listen on %s: %v: by %s", e.Addr, ErrAddrInUse, who)
}

func (e *AddrInUseError) Is(target error) bool { return target == ErrAddrInUse }
func (e *AddrInUseError) Unwrap() error        { return e.Err }

// probeTimeout bounds the question put to what holds a busy address.
const probeTimeout = time.Second

// Listen listens on addr for the HTTP service (HTTPConfig.Listener), so that
// berm serve can take its address before it loads anything: a busy address
// then fails at once, as an *AddrInUseError naming who holds it.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || !addrInUse(err) {
		return ln, err
	}
	return nil, &AddrInUseError{Addr: addr, Berm: answersLivez(addr), Err: err}
}

// answersLivez reports whether what listens on addr answers GET /livez as
// berm does, over HTTP or HTTPS (its certificate unchecked: nothing is sent
// but the question, and only the answer's form is read).
func answersLivez(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1" // a wildcard listener is reached on loopback
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		Proxy:           nil,
	}}
	defer client.CloseIdleConnections()
	for _, scheme := range []string{"http", "https"} {
		url := scheme + "://" + net.JoinHostPort(host, port) + "/livez"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		var body struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&body)
		resp.Body.Close()
		return err == nil && resp.StatusCode == http.StatusOK && body.Status == "live"
	}
	return false
}

// NextPort is addr with the port after its own, for a hint.
func NextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n >= 65535 {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}
