package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunStdio serves MCP over r and w (stdin and stdout) until the client hangs
// up or ctx is done; then it lets calls in flight finish (up to drain) and
// writes their responses.
func (s *Server) RunStdio(ctx context.Context, r io.Reader, w io.Writer, drain time.Duration) error {
	r, release := pollable(r)
	defer release()
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			s.shutdown(drain)
			stop()
		case <-runCtx.Done():
		}
	}()
	err := s.mcp.Run(runCtx, lineTransport{r: r, w: w, s: s, drain: drain})
	if runCtx.Err() != nil {
		return nil
	}
	return err
}

// maxLine bounds one JSON-RPC message over stdio, as the SDK's own stdio
// transport does.
const maxLine = mcp.DefaultMaxLineLength

// idScan is how much of a line over maxLine is searched for its id.
const idScan = 64 << 10

// settleGrace is added to drain while the end of input waits for responses:
// drain is as long as a call may run, and a call read just before the end
// may not have started yet (it may wait for its program to compile), nor
// has its outcome been encoded.
const settleGrace = time.Second

// lineTransport is MCP's stdio framing, one JSON-RPC message a line, on which
// a malformed line gets a parse error (-32700, id null, as JSON-RPC says) and
// the next line is read: the SDK's own transport stops reading at the first,
// dropping the calls in flight. It holds back the end of input until the
// calls read have been answered (see settle), and counts the requests the
// server owes a response, for shutdown (see owed.go).
type lineTransport struct {
	r     io.Reader
	w     io.Writer
	s     *Server
	drain time.Duration
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		s:        t.s,
		w:        t.w,
		drain:    t.drain,
		in:       make(chan lineMsg),
		closed:   make(chan struct{}),
		owing:    map[jsonrpc.ID]bool{},
		answered: make(chan struct{}, 1),
	}
	go c.readLoop(t.r)
	return c, nil
}

type lineMsg struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	s         *Server
	w         io.Writer
	drain     time.Duration
	wmu       sync.Mutex
	in        chan lineMsg
	closed    chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	owing    map[jsonrpc.ID]bool // calls read whose response is not yet written
	answered chan struct{}       // a token after each response, for settle
}

func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, n, err := readLine(br)
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var derr []byte
			var msg jsonrpc.Message
			if n > maxLine {
				derr = overLimit(line, n)
			} else {
				msg, derr = decodeLine(line)
			}
			if derr != nil {
				c.writeRaw(derr)
			} else {
				select {
				case c.in <- lineMsg{msg: msg}:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			select {
			case c.in <- lineMsg{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// readLine reads through the next newline and returns it with its length. A
// line over maxLine is read to its end and returned cut to its first maxLine
// bytes at most, so that the next line is whole.
func readLine(br *bufio.Reader) ([]byte, int, error) {
	var line []byte
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if n <= maxLine {
			line = append(line, chunk...)
		}
		if err != bufio.ErrBufferFull {
			return line, n, err
		}
	}
}

// decodeLine decodes one message, or returns the error response to write.
func decodeLine(line []byte) (jsonrpc.Message, []byte) {
	if line[0] == '[' {
		return nil, errorLine(nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message a line")
	}
	msg, err := decodeMessage(line)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return nil, errorLine(nil, jsonrpc.CodeParseError, "parse error: a line is not one JSON value")
	case err != nil:
		return nil, errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, nil
}

// decodeMessage is jsonrpc.DecodeMessage, message for message, without its
// cost: the SDK decodes each JSON value it unmarshals with a decoder of its
// own, whose buffer of 32 KiB is the bulk of what a tools/call allocates
// (DecodeMessage takes two), and a process that allocates that much
// collects garbage every few calls. Keys are matched exactly, as the SDK
// matches them; an id is an integer or a string.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, err
	}
	if deeper(data, maxDepth) {
		return nil, fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)
	}
	var version string
	if raw, ok := wire["jsonrpc"]; ok {
		if err := json.Unmarshal(raw, &version); err != nil {
			return nil, fmt.Errorf("jsonrpc: %w", err)
		}
	}
	if version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", version, "2.0")
	}
	var rawID any
	if raw, ok := wire["id"]; ok {
		if err := json.Unmarshal(raw, &rawID); err != nil {
			return nil, fmt.Errorf("id: %w", err)
		}
	}
	id, err := jsonrpc.MakeID(rawID)
	if err != nil {
		return nil, err
	}
	if raw, ok := wire["method"]; ok {
		var method string
		if err := json.Unmarshal(raw, &method); err != nil {
			return nil, fmt.Errorf("method: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: wire["params"]}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a message with neither a method nor an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: wire["result"]}
	if raw, ok := wire["error"]; ok && string(raw) != "null" {
		werr, err := decodeError(raw)
		if err != nil {
			return nil, fmt.Errorf("error: %w", err)
		}
		resp.Error = werr
	}
	return resp, nil
}

// maxDepth is the deepest nesting of JSON the SDK reads, to bound its cost.
const maxDepth = 1000

// deeper reports whether valid JSON nests objects and arrays more than max
// deep.
func deeper(data []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > max {
				return true
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return false
}

// decodeError decodes a response's error object, its keys matched exactly.
func decodeError(raw json.RawMessage) (*jsonrpc.Error, error) {
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, err
	}
	var werr jsonrpc.Error
	if c, ok := wire["code"]; ok {
		if err := json.Unmarshal(c, &werr.Code); err != nil {
			return nil, err
		}
	}
	if m, ok := wire["message"]; ok {
		if err := json.Unmarshal(m, &werr.Message); err != nil {
			return nil, err
		}
	}
	if d, ok := wire["data"]; ok && string(d) != "null" {
		werr.Data = d
	}
	return &werr, nil
}

// overLimit is the error response to a line of n bytes, over maxLine, whose
// first bytes are kept: addressed to the request's id when those bytes hold
// it, so that a client waiting on that id is not left waiting.
func overLimit(kept []byte, n int) []byte {
	msg := fmt.Sprintf("invalid request: a line of %d bytes is over the limit of %d (one JSON-RPC message a line)", n, maxLine)
	return errorLine(leadingID(kept), jsonrpc.CodeInvalidRequest, msg)
}

// leadingID is the id of the JSON object that kept begins, as the SDK would
// read it (an integer or a string), when the first idScan bytes hold it: a
// top-level "id" key with its value whole, and no other top-level "id".
// Otherwise it is nil (id null). Clients write the id before the params,
// whose size is what puts a line over the limit.
func leadingID(kept []byte) any {
	if len(kept) > idScan {
		kept = kept[:idScan] // the rest costs a scan of up to 16 MiB
	}
	dec := json.NewDecoder(bytes.NewReader(kept))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var id any
	found := false
	depth := 1      // of the next token
	isKey := true   // whether the next token at depth 1 is a key
	idNext := false // whether the next token is the value of a top-level "id"
	for {
		tok, err := dec.Token()
		if err != nil {
			break // the cut, or the end of the object
		}
		switch {
		case idNext:
			idNext = false
			switch v := tok.(type) {
			case float64:
				// A number the cut ends may be the start of a longer one.
				if v != float64(int64(v)) || dec.InputOffset() == int64(len(kept)) {
					return nil
				}
			case string:
			default:
				return nil // null, an object, an array: not an id to answer
			}
			if found {
				return nil // two ids: ambiguous
			}
			id, found = tok, true
			isKey = true
		case tok == json.Delim('{') || tok == json.Delim('['):
			depth++
		case tok == json.Delim('}') || tok == json.Delim(']'):
			depth--
			if depth == 1 {
				isKey = true
			}
		case depth == 1 && isKey:
			idNext = tok == "id"
			isKey = false
		case depth == 1:
			isKey = true
		}
	}
	if !found {
		return nil
	}
	mid, err := jsonrpc.MakeID(id)
	if err != nil {
		return nil
	}
	return mid.Raw()
}

func errorLine(id any, code int64, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": code, "message": message},
	})
	return append(b, '\n')
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		if m.err != nil {
			c.settle()
			return nil, m.err
		}
		if r, ok := m.msg.(*jsonrpc.Request); ok && r.IsCall() {
			c.owe(r.ID)
		}
		return m.msg, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// settle holds back the end of input until every call read has been
// answered. The SDK ends the session as soon as Read reports it, cancelling
// the calls in flight and dropping their responses: a client that writes its
// requests and closes stdin (printf | berm serve --stdio) would get none.
// Writes go on meanwhile, notifications too. It gives up when the SDK closes
// the connection (as it does once a write fails: the client is gone), or once
// drain (and a grace) passes without a response written, lest something
// never answered keep the process alive: a request the server sent the
// client, which can no longer answer, or a call the SDK refused without a
// response.
func (c *lineConn) settle() {
	wait := c.drain + settleGrace
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		c.mu.Lock()
		n := len(c.owing)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-c.answered:
			t.Reset(wait) // calls past MaxConcurrent start as others end
		case <-t.C:
			c.s.log.Warn("stdin closed: responses not written", "calls", n, "waited", wait)
			return
		case <-c.closed:
			return
		}
	}
}

// owe records a call read. A call whose id is already owed is one the SDK
// refuses without a response, so it is not counted again.
func (c *lineConn) owe(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owing[id] {
		c.owing[id] = true
		c.s.owed.Add(1)
	}
}

func (c *lineConn) Write(_ context.Context, m jsonrpc.Message) error {
	resp, isResp := m.(*jsonrpc.Response)
	data, err := encodeMessage(m)
	if err != nil {
		if isResp {
			c.paid(resp.ID)
		}
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if isResp {
		// Before the bytes go out: a client that has read them may reuse
		// the id at once, and that call must be owed anew.
		c.paid(resp.ID)
	}
	return c.writeLocked(append(data, '\n'))
}

// encodeMessage is jsonrpc.EncodeMessage, byte for byte, with a result
// written as it comes: the SDK encoded it into JSON already (compact, as
// encoding/json writes it), and EncodeMessage would scan and copy it again.
func encodeMessage(m jsonrpc.Message) ([]byte, error) {
	resp, ok := m.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return jsonrpc.EncodeMessage(m)
	}
	b := make([]byte, 0, len(resp.Result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	switch id := resp.ID.Raw().(type) {
	case int64:
		b = strconv.AppendInt(b, id, 10)
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as EncodeMessage
		if err := enc.Encode(id); err != nil {
			return nil, err
		}
		b = append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
	default:
		return jsonrpc.EncodeMessage(m)
	}
	b = append(b, `,"result":`...)
	b = append(b, resp.Result...)
	return append(b, '}'), nil
}

// paid records a response written (or that never will be).
func (c *lineConn) paid(id jsonrpc.ID) {
	c.mu.Lock()
	if c.owing[id] {
		delete(c.owing, id)
		c.s.owed.Add(-1)
	}
	c.mu.Unlock()
	select {
	case c.answered <- struct{}{}:
	default:
	}
}

func (c *lineConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(b)
}

func (c *lineConn) writeLocked(b []byte) error {
	select {
	case <-c.closed:
		return errors.New("connection closed")
	default:
	}
	_, err := c.w.Write(b)
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
