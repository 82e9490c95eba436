//go:build !wasip1 && !bermdescribe

package berm

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// http serves berm.http for the FakeHost through h.HTTP.
func (h *FakeHost) http(method, url, header string, body []byte) uint64 {
	refuse := func(msg string) uint64 { return h.stage([]byte("berm.http: "+msg)) | errorBit | hostBit }
	req, err := http.NewRequest(method, url, bytes.NewReader(append([]byte{}, body...)))
	if err != nil {
		return refuse(err.Error())
	}
	if h.HTTP == nil {
		port := req.URL.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[req.URL.Scheme]
		}
		return refuse(method + " " + net.JoinHostPort(req.URL.Hostname(), port) + ": the host is not granted (FakeHost.HTTP is nil)")
	}
	for line := range strings.SplitSeq(header, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return refuse("bad header line " + strconv.Quote(line))
		}
		req.Header.Add(name, strings.TrimSpace(value))
	}
	resp, err := (&http.Client{Transport: h.HTTP}).Do(req)
	if err != nil {
		return refuse(err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return refuse(err.Error())
	}
	names := make([]string, 0, len(resp.Header))
	for name := range resp.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	var block strings.Builder
	for _, name := range names {
		for _, v := range resp.Header[name] {
			block.WriteString(name + ": " + v + "\r\n")
		}
	}
	return h.stage(frame([]byte(strconv.Itoa(resp.StatusCode)), []byte(block.String()), b))
}
