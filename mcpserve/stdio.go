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
	"sync/atomic"
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
		ids:      newIDTable(),
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

	ids      *idTable      // calls read whose response is not yet written
	answered chan struct{} // a token after each response, for settle
	// version is the protocol the client's initialize negotiated, once
	// answered: whether it may send batches.
	version atomic.Pointer[string]
}

func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, n, err := readLine(br)
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var msgs []jsonrpc.Message
			if n > maxLine {
				c.writeRaw(overLimit(line, n))
			} else {
				msgs = c.accept(line)
			}
			for _, msg := range msgs {
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

// accept turns one line into the messages the SDK is to read, each call
// under its token (ids.go). What berm answers itself, it writes: a line that
// is not a message, a call whose id is in flight, a batch refused, a batch
// whose every element berm answers.
func (c *lineConn) accept(line []byte) []jsonrpc.Message {
	if line[0] == '[' {
		return c.acceptBatch(line)
	}
	msg, raw, errResp := decodeLine(line)
	if errResp == nil {
		msg, errResp = c.admit(msg, raw, nil)
	}
	if errResp != nil {
		c.writeRaw(append(errResp, '\n'))
	}
	if msg == nil {
		return nil
	}
	return []jsonrpc.Message{msg}
}

// admit readies a decoded message for the SDK: a call gets its token (or,
// its id being in flight, the error to answer it with); a cancellation names
// the token of the request it cancels, or is dropped when that is not in
// flight (MCP lets a receiver ignore it).
func (c *lineConn) admit(msg jsonrpc.Message, raw json.RawMessage, batch *lineBatch) (jsonrpc.Message, []byte) {
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case !ok:
		return msg, nil // a response to a request of the server's
	case req.IsCall():
		token, ok := c.ids.add(raw, req.Method, batch)
		if !ok {
			return nil, duplicateResponse(raw)
		}
		req.ID, _ = jsonrpc.MakeID(token)
		if batch != nil {
			batch.expect()
		}
		return req, nil
	case req.Method == methodCancelled:
		params, ok := cancelParams(c.ids, req.Params)
		if !ok {
			return nil, nil
		}
		req.Params = params
	}
	return req, nil
}

// acceptBatch serves a JSON-RPC batch as the protocol the client negotiated
// allows: 2025-03-26 and before have them (and the SDK's HTTP side takes
// them from such a client), later versions refuse them. The batch is
// answered with one array of the responses once every call in it is
// answered, as JSON-RPC says; what berm refuses in it is answered in that
// array too.
func (c *lineConn) acceptBatch(line []byte) []jsonrpc.Message {
	if v := c.version.Load(); v != nil && *v >= firstWithoutBatches {
		c.writeRaw(errorLine(nil, jsonrpc.CodeInvalidRequest, batchesEnded(*v)))
		return nil
	}
	if !json.Valid(line) {
		c.writeRaw(errorLine(nil, jsonrpc.CodeParseError, "parse error: a line is not one JSON value"))
		return nil
	}
	var spans [][2]int
	elements(line, func(start, end int) { spans = append(spans, [2]int{start, end}) })
	if len(spans) == 0 {
		c.writeRaw(errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch"))
		return nil
	}
	if len(spans) > maxBatch {
		c.writeRaw(errorLine(nil, jsonrpc.CodeInvalidRequest, batchTooLong(len(spans))))
		return nil
	}
	b := &lineBatch{max: 2 * c.s.svc.Limits().MaxResult}
	var msgs []jsonrpc.Message
	for _, span := range spans {
		msg, raw, errResp := decodeLine(line[span[0]:span[1]])
		if r, ok := msg.(*jsonrpc.Request); ok && r.Method == methodInitialize && errResp == nil {
			msg, errResp = nil, errorResponse(raw, jsonrpc.CodeInvalidRequest, "invalid request: initialize may not be part of a batch")
		}
		if errResp == nil {
			msg, errResp = c.admit(msg, raw, b)
		}
		if errResp != nil {
			b.answer(errResp)
		}
		if msg != nil {
			msgs = append(msgs, msg)
		}
	}
	if out, done := b.seal(); done && out != nil {
		c.writeRaw(append(out, '\n'))
	}
	return msgs
}

// firstWithoutBatches is the first protocol version without JSON-RPC
// batches.
const firstWithoutBatches = "2025-06-18"

// batchesEnded refuses a batch in a session of protocol version.
func batchesEnded(version string) string {
	return fmt.Sprintf("JSON-RPC batches are not supported in protocol %s (they ended with 2025-03-26): send one message at a time", version)
}

// lineBatch collects the responses to one batch, which go out together,
// once the last is ready, up to max bytes of them: a response past that is
// an error naming the bound, so that a batch holds no more than a call or
// two could.
type lineBatch struct {
	max int

	mu      sync.Mutex
	pending int  // calls not yet answered
	sealed  bool // every element read
	out     [][]byte
	size    int // of out
}

func (b *lineBatch) expect() {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
}

// answer adds a response (nil: a call that gets none, cancelled) and returns
// the batch's response once it is complete.
func (b *lineBatch) answer(resp []byte) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(resp)
	return b.doneLocked()
}

func (b *lineBatch) addLocked(resp []byte) {
	if resp != nil {
		b.out = append(b.out, resp)
		b.size += len(resp) + 1
	}
}

// resolve is answer for the response to the call whose id was raw.
func (b *lineBatch) resolve(resp []byte, raw json.RawMessage) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending--
	if resp != nil && b.size+len(resp) > b.max {
		resp = errorResponse(raw, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"invalid request: this response would take the batch's past %d bytes, the most a batch's responses may be (twice the result limit, --max-result): send this call on its own", b.max))
	}
	b.addLocked(resp)
	return b.doneLocked()
}

// seal marks every element read.
func (b *lineBatch) seal() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sealed = true
	return b.doneLocked()
}

// doneLocked is the batch's response once every element is read and every
// call answered: nil when nothing in it gets one (notifications, cancelled
// calls), which JSON-RPC answers with nothing at all.
func (b *lineBatch) doneLocked() ([]byte, bool) {
	if !b.sealed || b.pending > 0 {
		return nil, false
	}
	if len(b.out) == 0 {
		return nil, true
	}
	out := []byte{'['}
	out = append(out, bytes.Join(b.out, []byte{','})...)
	b.out = nil
	return append(out, ']'), true
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

// decodeLine decodes one message and its id as sent, or returns the error
// response to write.
func decodeLine(line []byte) (jsonrpc.Message, json.RawMessage, []byte) {
	msg, raw, err := decodeWire(line)
	var syntax *json.SyntaxError
	switch {
	case line[0] == '[':
		return nil, nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: a batch inside a batch")
	case line[0] != '{' && err != nil && !errors.As(err, &syntax):
		return nil, nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message is a JSON object")
	case errors.As(err, &syntax):
		return nil, nil, errorResponse(nil, jsonrpc.CodeParseError, "parse error: a line is not one JSON value")
	case err != nil:
		return nil, nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, raw, nil
}

// decodeMessage is jsonrpc.DecodeMessage, message for message, without its
// cost: the SDK decodes each JSON value it unmarshals with a decoder of its
// own, whose buffer of 32 KiB is the bulk of what a tools/call allocates
// (DecodeMessage takes two), and a process that allocates that much
// collects garbage every few calls. Keys are matched exactly, as the SDK
// matches them; an id is an integer or a string.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	msg, _, err := decodeWire(data)
	return msg, err
}

// decodeWire is decodeMessage that also returns the id as it is on the wire,
// for the response to echo (ids.go).
func decodeWire(data []byte) (jsonrpc.Message, json.RawMessage, error) {
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, nil, err
	}
	if deeper(data, maxDepth) {
		return nil, nil, fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)
	}
	var version string
	if raw, ok := wire["jsonrpc"]; ok {
		if err := json.Unmarshal(raw, &version); err != nil {
			return nil, nil, fmt.Errorf("jsonrpc: %w", err)
		}
	}
	if version != "2.0" {
		return nil, nil, fmt.Errorf("invalid message version tag %q; expected %q", version, "2.0")
	}
	var rawID any
	if raw, ok := wire["id"]; ok {
		if err := json.Unmarshal(raw, &rawID); err != nil {
			// A number past a float64's range (1e400) is still a JSON
			// number, which the SDK refuses as an id; berm echoes an id by
			// its text and never reads its value, so it takes it.
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
				return nil, nil, fmt.Errorf("id: %w", err)
			}
			rawID = float64(0)
		}
	}
	id, err := jsonrpc.MakeID(rawID)
	if err != nil {
		return nil, nil, err
	}
	if raw, ok := wire["method"]; ok {
		var method string
		if err := json.Unmarshal(raw, &method); err != nil {
			return nil, nil, fmt.Errorf("method: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: wire["params"]}, wire["id"], nil
	}
	if !id.IsValid() {
		return nil, nil, errors.New("a message with neither a method nor an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: wire["result"]}
	if raw, ok := wire["error"]; ok && string(raw) != "null" {
		werr, err := decodeError(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("error: %w", err)
		}
		resp.Error = werr
	}
	return resp, wire["id"], nil
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

// leadingID is the id of the JSON object that kept begins, as it is on the
// wire, when the first idScan bytes hold it: a top-level "id" key with its
// value whole (a number or a string), and no other top-level "id".
// Otherwise it is nil (id null). Clients write the id before the params,
// whose size is what puts a line over the limit.
func leadingID(kept []byte) json.RawMessage {
	if len(kept) > idScan {
		kept = kept[:idScan] // the rest costs a scan of up to 16 MiB
	}
	dec := json.NewDecoder(bytes.NewReader(kept))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	depth := 1      // of the next token
	isKey := true   // whether the next token at depth 1 is a key
	idNext := false // whether the next token is the value of a top-level "id"
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break // the cut, or the end of the object
		}
		switch {
		case idNext:
			idNext = false
			switch tok.(type) {
			case json.Number:
				// A number the cut ends may be the start of a longer one.
				if dec.InputOffset() == int64(len(kept)) {
					return nil
				}
			case string:
			default:
				return nil // null, an object, an array: not an id to answer
			}
			if id != nil {
				return nil // two ids: ambiguous
			}
			id = bytes.TrimLeft(kept[before:dec.InputOffset()], " \t\r\n:")
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
	return id
}

// errorResponse is a JSON-RPC error response to the request whose id was
// raw (nil: id null), the id written as the client sent it.
func errorResponse(raw json.RawMessage, code int64, message string) []byte {
	var msg bytes.Buffer
	enc := json.NewEncoder(&msg)
	enc.SetEscapeHTML(false) // as the SDK encodes
	enc.Encode(message)
	if raw == nil {
		raw = json.RawMessage("null")
	}
	b := make([]byte, 0, 64+len(raw)+msg.Len())
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, raw...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	b = append(b, bytes.TrimRight(msg.Bytes(), "\n")...)
	return append(b, "}}"...)
}

// errorLine is errorResponse as a line of stdio.
func errorLine(raw json.RawMessage, code int64, message string) []byte {
	return append(errorResponse(raw, code, message), '\n')
}

// duplicateResponse answers a call whose id is that of a call in flight.
// The SDK's stdio side left it unanswered: its jsonrpc2 connection drops the
// id of the duplicate to avoid answering the first with its error, which
// leaves a call without an id, and so without a response. The error carries
// the id, as the SDK's HTTP side answers it.
func duplicateResponse(raw json.RawMessage) []byte {
	shown := string(raw)
	if len(shown) > 64 {
		shown = shown[:61] + "..."
	}
	return errorResponse(raw, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
		"invalid request: id %s is that of a request in flight: give each request in flight an id of its own", shown))
}

// cancelParams rewrites the params of notifications/cancelled to name the
// token of the request it cancels, and marks that request cancelled: its
// response is not sent, as MCP asks of a receiver. It reports false when the
// request is not in flight (unknown, or answered already), which MCP lets a
// receiver ignore.
func cancelParams(ids *idTable, params json.RawMessage) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p["requestId"] == nil {
		return nil, false
	}
	token, ok := ids.cancel(p["requestId"])
	if !ok {
		return nil, false
	}
	p["requestId"] = quoteToken(token)
	out, err := json.Marshal(p)
	return out, err == nil
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		if m.err != nil {
			c.settle()
			return nil, m.err
		}
		if r, ok := m.msg.(*jsonrpc.Request); ok && r.IsCall() {
			c.s.owed.Add(1) // paid once its response is written, or dropped
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
		n := c.ids.len()
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

func (c *lineConn) Write(_ context.Context, m jsonrpc.Message) error {
	resp, isResp := m.(*jsonrpc.Response)
	if !isResp {
		data, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return err
		}
		return c.writeRaw(append(data, '\n'))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// Taken before the bytes go out: a client that has read them may reuse
	// the id at once, and that call must be in flight anew. Paid after:
	// shutdown waits for the response to be written.
	p, owed := c.ids.take(resp.ID)
	if !owed {
		data, err := encodeResponse(resp, nil)
		if err != nil {
			return err
		}
		return c.writeLocked(append(data, '\n'))
	}
	defer c.paid()
	var data []byte
	if !p.cancelled {
		if p.method == methodInitialize {
			c.noteVersion(resp)
		}
		var err error
		if data, err = encodeResponse(resp, p.raw); err != nil && p.batch == nil {
			return err
		}
	}
	if p.batch != nil {
		out, done := p.batch.resolve(data, p.raw)
		if !done || out == nil {
			return nil
		}
		data = out
	}
	if data == nil {
		return nil // cancelled: MCP has a receiver not respond
	}
	return c.writeLocked(append(data, '\n'))
}

// noteVersion keeps the protocol version the initialize response gives.
func (c *lineConn) noteVersion(resp *jsonrpc.Response) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if resp.Error == nil && json.Unmarshal(resp.Result, &r) == nil && r.ProtocolVersion != "" {
		c.version.Store(&r.ProtocolVersion)
	}
}

// encodeResponse is jsonrpc.EncodeMessage, byte for byte, with the id the
// client sent (raw; nil to keep the response's own) and a result written as
// it comes: the SDK encoded it into JSON already (compact, as encoding/json
// writes it), and EncodeMessage would scan and copy it again.
func encodeResponse(resp *jsonrpc.Response, raw json.RawMessage) ([]byte, error) {
	if resp.Error != nil || len(resp.Result) == 0 {
		data, err := jsonrpc.EncodeMessage(resp)
		if err != nil || raw == nil {
			return data, err
		}
		start, end, ok := firstMember(data, "id")
		if !ok {
			return data, nil
		}
		return splice(data, start, end, raw), nil
	}
	b := make([]byte, 0, len(resp.Result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	switch id := resp.ID.Raw().(type) {
	case string:
		if raw != nil {
			b = append(b, raw...)
			break
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as EncodeMessage
		if err := enc.Encode(id); err != nil {
			return nil, err
		}
		b = append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
	case int64:
		b = strconv.AppendInt(b, id, 10)
	default:
		return jsonrpc.EncodeMessage(resp)
	}
	b = append(b, `,"result":`...)
	b = append(b, resp.Result...)
	return append(b, '}'), nil
}

// paid records a response written (or that never will be).
func (c *lineConn) paid() {
	c.s.owed.Add(-1)
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
