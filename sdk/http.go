package berm

import (
	"encoding/binary"
	"strconv"
)

// sysHTTP is berm.http's number (ABI.md, berm.http).
const sysHTTP = 0xcd342abaa2542f6d // berm.http

// HTTPResponse is a response berm.http gave back, of any status.
type HTTPResponse struct {
	Status int
	// Header is the response's header block: "Name: value\r\n" lines,
	// names sorted.
	Header string
	Body   []byte
}

// HTTP makes one request through the host's berm.http: method, an absolute
// http or https URL, header an HTTP/1 header block ("Name: value" lines,
// separated by "\r\n" or "\n"), and body. The host follows redirects to
// granted hosts. The error is a *RefusedError when the host refused: the
// host is not granted, a bound was passed, the network failed; its message
// says which. The manifest must declare berm.http, and the deployment grant
// the host.
//
// Programs that use net/http reach it through sdk/bermhttp's Transport
// instead; this is what it calls, for programs that keep net/http (2 MB of
// image) out.
func HTTP(method, url, header string, body []byte) (*HTTPResponse, error) {
	in := frame([]byte(method), []byte(url), []byte(header), body)
	v := hostcall(sysHTTP, data(in), uint32(len(in)))
	out := staged(v)
	if v&errorBit != 0 {
		return nil, &RefusedError{Syscall: "berm.http", Message: string(out)}
	}
	f, ok := split(out, 3)
	if !ok {
		return nil, &RefusedError{Syscall: "berm.http", Message: "berm.http: the host's response is not a frame of 3 fields"}
	}
	status, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return nil, &RefusedError{Syscall: "berm.http", Message: "berm.http: the host's status " + strconv.Quote(string(f[0])) + " is not a number"}
	}
	return &HTTPResponse{Status: status, Header: string(f[1]), Body: f[2]}, nil
}

// split splits a frame into exactly n fields.
func split(b []byte, n int) ([][]byte, bool) {
	var fields [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, false
		}
		size := binary.LittleEndian.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return nil, false
		}
		fields = append(fields, b[4:4+size:4+size])
		b = b[4+size:]
	}
	return fields, len(fields) == n
}
