package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one JSON-RPC message over stdio, as the SDK's own stdio
// transport does.
const maxLine = mcp.DefaultMaxLineLength

// lineTransport is MCP's stdio framing, one JSON-RPC message a line, on which
// a malformed line gets a parse error (-32700, id null, as JSON-RPC says) and
// the next line is read: the SDK's own transport stops reading at the first,
// dropping the calls in flight. It also counts the requests the server owes a
// response, for shutdown (see owed.go).
type lineTransport struct {
	r io.Reader
	w io.Writer
	s *Server
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{s: t.s, w: t.w, in: make(chan lineMsg), closed: make(chan struct{})}
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
	wmu       sync.Mutex
	in        chan lineMsg
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if line = bytes.TrimSpace(line); len(line) > 0 {
			switch msg, derr := decodeLine(line); {
			case derr != nil:
				c.writeRaw(derr)
			default:
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

// readLine reads through the next newline. A line over maxLine is read to its
// end and returned cut, so that it fails to decode and the next line is whole.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		}
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// decodeLine decodes one message, or returns the error response to write.
func decodeLine(line []byte) (jsonrpc.Message, []byte) {
	if line[0] == '[' {
		return nil, errorLine(jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message a line")
	}
	if !json.Valid(line) {
		return nil, errorLine(jsonrpc.CodeParseError, "parse error: a line is not one JSON value")
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, errorLine(jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, nil
}

func errorLine(code int64, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": message},
	})
	return append(b, '\n')
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		if m.err != nil {
			return nil, m.err
		}
		if r, ok := m.msg.(*jsonrpc.Request); ok && r.IsCall() {
			c.s.owed.Add(1)
		}
		return m.msg, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *lineConn) Write(_ context.Context, m jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return err
	}
	err = c.writeRaw(append(data, '\n'))
	if _, ok := m.(*jsonrpc.Response); ok {
		c.s.owed.Add(-1)
	}
	return err
}

func (c *lineConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
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
