package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What berm does to /mcp before and after the SDK's streamable HTTP handler
// (mcpHTTP): it bounds sessions (sessions.go) and bodies, answers in
// JSON-RPC what the SDK would refuse in plain text, echoes each client's ids
// exactly (ids.go), sends no response to a request the client cancelled,
// and sends a long call's headers before its result.

// postHeader carries, from mcpHTTP to the SDK's handlers (RequestExtra.Header
// is the request's), the key of the POST being served; a client's own is
// deleted.
const postHeader = "Berm-Internal-Post"

// headersAfter is how long a call runs before its response's headers go
// out: the SDK writes nothing until the first event, so a client (or a
// proxy) waiting on a long call saw nothing, not even a status. A call done
// sooner sends its headers with its result, in one write.
const headersAfter = 50 * time.Millisecond

// postState is what a POST's handlers may reach of it.
type postState struct {
	ctx     context.Context // the POST's: done once its connection goes (or it is answered)
	session *session        // a new session's reservation (initialize binds it)
	ids     *idTable        // its session's requests in flight
	rw      *rewriter
}

// postOf is the POST a request came in, if it came over HTTP.
func (s *Server) postOf(extra *mcp.RequestExtra) *postState {
	if extra == nil || extra.Header == nil {
		return nil
	}
	key := extra.Header.Get(postHeader)
	if key == "" {
		return nil
	}
	ps, _ := s.posts.Load(key)
	p, _ := ps.(*postState)
	return p
}

// mcpHTTP serves /mcp through next, the SDK's handler. table is nil when
// stateless.
func (s *Server) mcpHTTP(table *sessionTable, maxBody int64, bodies *budget, next http.Handler) http.Handler {
	versions := mcp.SupportedProtocolVersions()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(postHeader)
		sid := r.Header.Get("Mcp-Session-Id")
		if r.Method != http.MethodPost {
			// A DELETE the SDK refuses (a protocol version it does not
			// speak) leaves the session open: berm then neither ends its
			// calls nor forgets it, which let a client hold sessions past
			// --max-sessions, uncounted.
			deleting := table != nil && sid != "" && r.Method == http.MethodDelete && checkVersion(r.Header, versions) == ""
			if table != nil && sid != "" {
				if se := table.lookup(sid); se != nil {
					switch {
					case r.Method == http.MethodGet:
						table.touch(se)
					case deleting:
						// Else the SDK's close waits for them: a call ran to
						// its deadline after the DELETE that ended its session.
						se.ids.cancelAll(errSessionEnded)
					}
				}
			}
			if !deleting {
				next.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			next.ServeHTTP(sw, r)
			if sw.code < 300 {
				table.remove(sid)
			}
			return
		}
		if msg, status := checkHeaders(r.Header, versions); msg != "" {
			writeRPC(w, status, errorResponse(nil, jsonrpc.CodeInvalidRequest, msg))
			return
		}
		body, give, ok := readBody(w, r, maxBody, "request body (the arguments limit and 64 KiB)", nil, bodies)
		if !ok {
			return
		}
		defer give()
		p, status, errBody := parsePost(body)
		if errBody != nil {
			writeRPC(w, status, errBody)
			return
		}
		if v := r.Header.Get("Mcp-Protocol-Version"); p.batch && v >= firstWithoutBatches {
			// As the SDK refuses it, by the header, in JSON-RPC.
			writeRPC(w, http.StatusBadRequest, errorResponse(nil, jsonrpc.CodeInvalidRequest, batchesEnded(v)))
			return
		}
		ps := &postState{ctx: r.Context()}
		switch {
		case table == nil:
			ps.ids = newIDTable() // stateless: the request is the session
		case sid == "":
			if !p.initialize() {
				msg := "invalid request: no Mcp-Session-Id: every request but initialize carries the session id that initialize answered with (its Mcp-Session-Id header)"
				if p.batch && p.has(methodInitialize) {
					msg = "invalid request: initialize may not be part of a batch"
				}
				writeRPC(w, http.StatusBadRequest, errorResponse(p.firstID(), jsonrpc.CodeInvalidRequest, msg))
				return
			}
			se, victim, err := table.reserve(clientOf(r))
			if err != nil {
				w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
				writeError(w, http.StatusServiceUnavailable, "too_many_sessions", fmt.Errorf("%w; retry later", err))
				return
			}
			if victim != nil {
				s.log.Debug("session ended for a new one", "session", victim.id, "client", victim.client, "idle", time.Since(victim.last).Round(time.Second))
				if n := table.noteFull(); n > 0 {
					s.log.Warn("sessions at their bound: each new one ends an idle one (--max-sessions, --max-sessions-per-client)", "ended", n)
				}
				// Its calls still running have lost their POSTs: no one
				// can receive them.
				victim.ids.cancelAll(errSessionEnded)
				go victim.ss.Close()
			}
			defer table.unreserve(se)
			ps.session, ps.ids = se, se.ids
		default:
			se := table.lookup(sid)
			if se == nil {
				// Ended (idle, deleted, or for a new one: its close may
				// still be under way), or never opened: 404, on which MCP
				// has a client initialize anew.
				writeRPC(w, http.StatusNotFound, errorResponse(p.firstID(), jsonrpc.CodeInvalidRequest,
					"invalid request: no such session (it ended: idle past --session-idle, deleted, or ended for a new one): initialize anew"))
				return
			}
			if p.batch && se.version >= firstWithoutBatches {
				// As over stdio: the SDK goes by the Mcp-Protocol-Version
				// header, and takes a batch from a client that omits it.
				writeRPC(w, http.StatusBadRequest, errorResponse(nil, jsonrpc.CodeInvalidRequest, batchesEnded(se.version)))
				return
			}
			table.begin(se, p.handshake())
			defer table.end(se)
			ps.ids = se.ids
		}
		out, tokens, status, errBody := p.admit(ps.ids)
		if errBody != nil {
			writeRPC(w, status, errBody)
			return
		}
		if out == nil {
			w.WriteHeader(http.StatusAccepted) // only what berm drops, as the SDK would accept it
			return
		}
		defer ps.ids.drop(tokens) // those the POST ended without answering
		ps.rw = &rewriter{w: w, ids: ps.ids, id: p.firstID()}
		w = ps.rw
		defer ps.rw.finish()
		key := strconv.FormatUint(s.postSeq.Add(1), 10)
		s.posts.Store(key, ps)
		defer s.posts.Delete(key)
		r.Header.Set(postHeader, key)
		var length int64
		readers := make([]io.Reader, len(out))
		for i, part := range out {
			readers[i] = bytes.NewReader(part)
			length += int64(len(part))
		}
		r.Body, r.ContentLength = io.NopCloser(io.MultiReader(readers...)), length
		next.ServeHTTP(w, r)
		if sid != "" && len(body) > releaseAbove {
			release(next, r, sid)
		}
	})
}

// checkHeaders refuses, as the SDK does but in JSON-RPC (it answered in
// plain text, which a client reports as a failed POST, not the error it
// is), a POST whose headers are not those of an MCP message: it returns the
// message and the status, or "". versions are those the SDK speaks.
func checkHeaders(h http.Header, versions []string) (string, int) {
	if ct := h.Get("Content-Type"); ct != "application/json" && mediaType(ct) != "application/json" {
		return fmt.Sprintf("invalid request: Content-Type %q: an MCP message is application/json", h.Get("Content-Type")), http.StatusUnsupportedMediaType
	}
	if json, stream := accepts(h.Values("Accept")); !json || !stream {
		return fmt.Sprintf("invalid request: Accept %q: a client of MCP's streamable HTTP accepts both application/json and text/event-stream", strings.Join(h.Values("Accept"), ", ")), http.StatusBadRequest
	}
	if len(h.Values("Last-Event-ID")) > 0 {
		return "invalid request: Last-Event-ID on a POST: a stream is resumed by a GET, and this server keeps no events to resume one from", http.StatusBadRequest
	}
	if msg := checkVersion(h, versions); msg != "" {
		return msg, http.StatusBadRequest
	}
	return "", 0
}

// statusWriter keeps the status of a DELETE's response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// checkVersion is the SDK's own check of every request: a version it does
// not know, unless newer than those it does (go-sdk v1.8.0,
// mcp/streamable.go, ServeHTTP).
func checkVersion(h http.Header, versions []string) string {
	if v := h.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(versions, v) && v < newestProtocol {
		return fmt.Sprintf("invalid request: Mcp-Protocol-Version %q: not a version this server speaks (%s); send the one initialize negotiated",
			v, strings.Join(versions, ", "))
	}
	return ""
}

func mediaType(v string) string {
	mt, _, _ := mime.ParseMediaType(v)
	return mt
}

// newestProtocol is the protocol version from which the SDK takes a version
// it does not know (SEP-2575).
const newestProtocol = "2026-07-28"

// accepts is the SDK's reading of Accept (streamableAccepts).
func accepts(values []string) (json, stream bool) {
	if len(values) == 1 && values[0] == "application/json, text/event-stream" {
		return true, true // what clients send
	}
	for _, v := range values {
		for _, token := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(token, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				json = true
			case "text/event-stream", "text/*":
				stream = true
			case "*/*":
				json, stream = true, true
			}
		}
	}
	return json, stream
}

// post is a POST's body, read as the SDK reads it.
type post struct {
	body  []byte
	batch bool
	msgs  []postMsg
}

// postMsg is one message of a POST.
type postMsg struct {
	data []byte          // its bytes in the body
	msg  jsonrpc.Message // as the SDK reads it
	raw  json.RawMessage // its id as sent; nil when it has none
}

// parsePost reads a POST's body, or returns the error response to answer it
// with: JSON-RPC, as stdio answers, where the SDK answered in plain text.
func parsePost(body []byte) (*post, int, []byte) {
	errParse := errorResponse(nil, jsonrpc.CodeParseError, "parse error: the body is not one JSON value")
	p := &post{body: body}
	var spans [][2]int
	if i := skipSpace(body, 0); i < len(body) && body[i] == '[' {
		if !json.Valid(body) {
			return nil, http.StatusBadRequest, errParse
		}
		p.batch = true
		elements(body, func(start, end int) { spans = append(spans, [2]int{start, end}) })
		if len(spans) == 0 {
			return nil, http.StatusBadRequest, errorResponse(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
		}
		if len(spans) > maxBatch {
			return nil, http.StatusBadRequest, errorResponse(nil, jsonrpc.CodeInvalidRequest, batchTooLong(len(spans)))
		}
	} else {
		spans = [][2]int{{0, len(body)}}
	}
	for i, span := range spans {
		data := body[span[0]:span[1]]
		msg, raw, err := decodeWire(data)
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || (err != nil && !p.batch && !json.Valid(data)) {
			return nil, http.StatusBadRequest, errParse
		}
		if err != nil {
			what := "invalid request: "
			if p.batch {
				what += fmt.Sprintf("batch element %d: ", i)
			}
			if data[0] != '{' {
				err = errors.New("a message is a JSON object")
			}
			return nil, http.StatusBadRequest, errorResponse(nil, jsonrpc.CodeInvalidRequest, what+err.Error())
		}
		p.msgs = append(p.msgs, postMsg{data: data, msg: msg, raw: raw})
	}
	return p, 0, nil
}

// initialize reports whether the POST is one initialize request, which alone
// may come without a session.
func (p *post) initialize() bool {
	if p.batch || len(p.msgs) != 1 {
		return false
	}
	r, ok := p.msgs[0].msg.(*jsonrpc.Request)
	return ok && r.Method == methodInitialize
}

// has reports whether the POST has a request of method.
func (p *post) has(method string) bool {
	for _, m := range p.msgs {
		if r, ok := m.msg.(*jsonrpc.Request); ok && r.Method == method {
			return true
		}
	}
	return false
}

// handshake reports whether the POST is only the handshake.
func (p *post) handshake() bool {
	for _, m := range p.msgs {
		if r, ok := m.msg.(*jsonrpc.Request); !ok || (r.Method != methodInitialize && r.Method != methodInitialized) {
			return false
		}
	}
	return true
}

// firstID is the id of the POST's one request, to answer a refusal with.
func (p *post) firstID() json.RawMessage {
	if p.batch || len(p.msgs) != 1 {
		return nil
	}
	if r, ok := p.msgs[0].msg.(*jsonrpc.Request); ok && r.IsCall() {
		return p.msgs[0].raw
	}
	return nil
}

// admit checks the POST's requests as the SDK would, and returns the body
// the SDK is to read, in pieces: each call under a token of ids (the tokens too), a
// cancellation naming the token it cancels. It is nil when nothing is left
// for the SDK (berm dropped it all). Or it returns the error response to
// answer with: an error JSON-RPC would send the request is answered 200, as
// over stdio, and the SDK's refusals of a whole POST are 400.
func (p *post) admit(ids *idTable) ([][]byte, []string, int, []byte) {
	var parts [][][]byte // each message, in pieces of the body and tokens
	var tokens []string
	fail := func(status int, body []byte) ([][]byte, []string, int, []byte) {
		ids.drop(tokens)
		return nil, nil, status, body
	}
	for i, m := range p.msgs {
		req, ok := m.msg.(*jsonrpc.Request)
		if !ok {
			parts = append(parts, [][]byte{m.data}) // a response to the server's request
			continue
		}
		e, drop := checkMethod(req)
		if p.batch && req.Method == methodInitialize {
			e = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: initialize may not be part of a batch"}
		}
		switch {
		case drop:
			continue
		case e != nil && p.batch:
			return fail(http.StatusBadRequest, errorResponse(nil, e.Code, fmt.Sprintf("%s (batch element %d)", e.Message, i)))
		case e != nil && req.IsCall():
			return fail(http.StatusOK, errorResponse(m.raw, e.Code, e.Message))
		case e != nil:
			return fail(http.StatusBadRequest, errorResponse(nil, e.Code, e.Message))
		case req.IsCall():
			token, ok := ids.add(m.raw, req.Method, nil)
			if !ok {
				// As the SDK's HTTP side answers one: 400, so that a
				// client does not take it for the answer to the first.
				return fail(http.StatusBadRequest, duplicateResponse(m.raw))
			}
			tokens = append(tokens, token)
			parts = append(parts, callPieces(m.data, token, req.Method == methodToolsCall))
		case req.Method == methodCancelled:
			params, ok := cancelParams(ids, req.Params)
			if !ok {
				continue
			}
			parts = append(parts, [][]byte{[]byte(`{"jsonrpc":"2.0","method":"` + methodCancelled + `","params":` + string(params) + `}`)})
		default:
			parts = append(parts, [][]byte{m.data})
		}
	}
	switch {
	case len(parts) == 0:
		return nil, nil, 0, nil
	case !p.batch:
		return parts[0], tokens, 0, nil
	}
	out := [][]byte{[]byte("[")}
	for i, part := range parts {
		if i > 0 {
			out = append(out, []byte(","))
		}
		out = append(out, part...)
	}
	return append(out, []byte("]")), tokens, 0, nil
}

// metaToken is the key, in a tools/call's _meta, under which berm tells
// the call's handler its token (server.go, holdOf): the SDK hands a handler
// no request id. The handler takes it out.
const metaToken = "berm/token"

// callPieces is a call's message as the SDK is to read it, in pieces, not a
// spliced copy (the arguments may be 16 MiB): its id replaced by its token,
// and for a tools/call the token in its params' _meta too, last, so that a
// client's own key of that name does not win.
func callPieces(data []byte, token string, tool bool) [][]byte {
	type edit struct {
		start, end int
		with       []byte
	}
	start, end, _ := member(data, "id")
	edits := []edit{{start, end, quoteToken(token)}}
	if ps, pe, ok := member(data, "params"); tool && ok && data[ps] == '{' {
		entry := `"` + metaToken + `":` + string(quoteToken(token))
		params := data[ps:pe]
		ms, me, ok := member(params, "_meta")
		switch {
		case !ok:
			with := `"_meta":{` + entry + `}`
			if skipSpace(params, 1) < len(params)-1 {
				with += ","
			}
			edits = append(edits, edit{ps + 1, ps + 1, []byte(with)})
		case params[ms] == '{':
			if skipSpace(params, ms+1) < me-1 {
				entry = "," + entry
			}
			edits = append(edits, edit{ps + me - 1, ps + me - 1, []byte(entry)})
		case string(params[ms:me]) == "null":
			edits = append(edits, edit{ps + ms, ps + me, []byte("{" + entry + "}")})
		}
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var pieces [][]byte
	at := 0
	for _, e := range edits {
		pieces = append(pieces, data[at:e.start], e.with)
		at = e.end
	}
	return append(pieces, data[at:])
}

// maxBatch bounds the messages of a batch (protocol 2025-03-26 and before),
// over HTTP and stdio. Each gets a response of its own, and a POST of 1 MiB
// of tools/list asked for 317 MB of them: 100 is more than a client batches
// (the few requests it has to make at once), and keeps a batch's cost that
// of a hundred requests sent one by one.
const maxBatch = 100

func batchTooLong(n int) string {
	return fmt.Sprintf("invalid request: a batch of %d messages, over the bound of %d: send at most %d at a time", n, maxBatch, maxBatch)
}

// writeRPC answers a POST with a JSON-RPC message of berm's.
func writeRPC(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// rewriter is the response to a POST on its way to the client: each
// response to one of its calls gets the client's id in place of its token,
// or is dropped when the client cancelled the call. The SDK answers in a
// stream of events (text/event-stream, one event a write, each a JSON-RPC
// message on one data line) or in one JSON body; a refusal of its in plain
// text becomes a JSON-RPC error, as over stdio; anything else goes through as
// it is. It also lets a long call send its headers early (flushHeaders).
type rewriter struct {
	w   http.ResponseWriter
	ids *idTable
	id  json.RawMessage // of the POST's one request, to answer a refusal with

	mu     sync.Mutex
	mode   int // of the response, once its headers are
	status int // of a refusal in plain text, sent at finish
	buf    []byte
	// late: the SDK answered with a status of its own (protocol
	// 2026-07-28: 400 or 404 and a raw JSON-RPC error) after berm had sent
	// the headers of a stream; what follows is that message, sent at finish
	// as the stream's event.
	late   bool
	headed bool // headers sent, or held (modePlain)
	done   bool // the handler returned
}

const (
	modeUnknown = iota
	modeEvents
	modeJSON
	modePlain // the SDK's refusal in plain text
	modeOther
)

func (rw *rewriter) Header() http.Header { return rw.w.Header() }

// modeOf is the response's mode from its headers and status.
func (rw *rewriter) modeOf(code int) int {
	switch ct := rw.w.Header().Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		return modeEvents
	case strings.HasPrefix(ct, "application/json"):
		return modeJSON
	case strings.HasPrefix(ct, "text/plain") && code >= 400:
		return modePlain
	}
	return modeOther
}

func (rw *rewriter) WriteHeader(code int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.headed {
		// The SDK's status override (deliverLocked), too late for a status.
		rw.late = rw.late || (code >= 400 && rw.mode == modeEvents)
		return
	}
	rw.headed = true
	if rw.mode = rw.modeOf(code); rw.mode == modePlain {
		rw.status = code
		return
	}
	rw.w.WriteHeader(code)
}

func (rw *rewriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.done {
		return 0, errors.New("response already finished")
	}
	if !rw.headed {
		rw.headed, rw.mode = true, rw.modeOf(http.StatusOK)
	}
	switch {
	case rw.late, rw.mode == modeJSON, rw.mode == modePlain:
		rw.buf = append(rw.buf, p...) // rewritten whole, at finish
		return len(p), nil
	case rw.mode == modeOther:
		return rw.w.Write(p)
	}
	data := p
	if len(rw.buf) > 0 {
		data = append(rw.buf, p...)
	}
	for {
		i := bytes.Index(data, []byte("\n\n"))
		if i < 0 {
			break
		}
		if err := rw.eventLocked(data[:i+2]); err != nil {
			return 0, err
		}
		data = data[i+2:]
	}
	rw.buf = append(rw.buf[:0], data...)
	return len(p), nil
}

// eventLocked writes one event of the stream, its message's id put back.
func (rw *rewriter) eventLocked(ev []byte) error {
	start := 0
	if !bytes.HasPrefix(ev, []byte("data: ")) {
		if start = bytes.Index(ev, []byte("\ndata: ")); start < 0 {
			_, err := rw.w.Write(ev)
			return err
		}
		start++
	}
	start += len("data: ")
	end := start + bytes.IndexByte(ev[start:], '\n')
	id, s, e, p := rw.answer(ev[start:end])
	defer p.sent() // once written, or dropped
	switch {
	case p != nil && p.cancelled:
		return nil
	case id == nil:
		_, err := rw.w.Write(ev)
		return err
	}
	if len(ev) <= spliceBelow {
		_, err := rw.w.Write(splice(ev, start+s, start+e, id))
		return err
	}
	// In three writes, not one spliced copy: a result may be 16 MiB.
	for _, part := range [][]byte{ev[:start+s], id, ev[start+e:]} {
		if _, err := rw.w.Write(part); err != nil {
			return err
		}
	}
	return nil
}

// spliceBelow is the size of an event under which its id is put back in a
// copy, written at once: each write costs more than copying that much.
const spliceBelow = 64 << 10

// answered is what a response answers of the POST's calls: nil when it
// answers none of them.
type answered struct {
	cancelled bool
	call      *callHold
}

// sent releases what the call held until its response went out.
func (a *answered) sent() {
	if a != nil {
		a.call.sent()
	}
}

// answer reads a message the SDK sends: when it answers one of the calls,
// it returns the client's id and the span of the token to replace, and the
// call (cancelled when the client cancelled it: then it is not sent).
func (rw *rewriter) answer(msg []byte) (id []byte, start, end int, a *answered) {
	start, end, ok := firstMember(msg, "id")
	if !ok || msg[start] != '"' || !bytes.HasPrefix(msg[start+1:], []byte(tokenPrefix)) {
		return nil, 0, 0, nil
	}
	token, err := jsonrpc.MakeID(string(msg[start+1 : end-1]))
	if err != nil {
		return nil, 0, 0, nil
	}
	p, ok := rw.ids.take(token)
	if !ok {
		return nil, 0, 0, nil
	}
	a = &answered{cancelled: p.cancelled, call: p.call}
	if p.cancelled {
		return nil, 0, 0, a
	}
	return p.raw, start, end, a
}

// flushHeaders sends the headers of a stream that has sent nothing yet.
// The SDK has set them before it hands the calls on, so a call's handler
// may call it.
func (rw *rewriter) flushHeaders() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.done || rw.headed || rw.modeOf(http.StatusOK) != modeEvents {
		return
	}
	rw.headed, rw.mode = true, modeEvents
	http.NewResponseController(rw.w).Flush()
}

func (rw *rewriter) FlushError() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.late || rw.mode == modeJSON || rw.mode == modePlain {
		return nil // nothing is written until finish
	}
	return http.NewResponseController(rw.w).Flush()
}

func (rw *rewriter) Flush() { rw.FlushError() }

func (rw *rewriter) Unwrap() http.ResponseWriter { return rw.w }

// finish writes what is left once the handler has returned: a JSON body,
// its ids put back; the rest of a stream; the event of a late status
// override; a refusal in plain text as a JSON-RPC error.
func (rw *rewriter) finish() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.done = true
	switch {
	case rw.mode == modePlain:
		msg := strings.TrimSpace(strings.TrimPrefix(string(rw.buf), "Bad Request: "))
		rw.w.Header().Set("Content-Type", "application/json")
		rw.w.WriteHeader(rw.status)
		rw.w.Write(errorResponse(rw.id, jsonrpc.CodeInvalidRequest, "invalid request: "+msg))
	case rw.late:
		var answers []*answered
		if out := rw.rewriteJSON(rw.buf, &answers); len(out) > 0 {
			rw.w.Write(slices.Concat([]byte("event: message\ndata: "), out, []byte("\n\n")))
		}
		for _, a := range answers {
			a.sent()
		}
	case len(rw.buf) == 0:
	case rw.mode == modeJSON:
		var answers []*answered
		rw.w.Write(rw.rewriteJSON(rw.buf, &answers))
		for _, a := range answers {
			a.sent()
		}
	default:
		rw.w.Write(rw.buf)
	}
	rw.buf = nil
}

// rewriteJSON puts back the ids of a JSON body: one message or an array. It
// adds the calls answered to answers.
func (rw *rewriter) rewriteJSON(body []byte, answers *[]*answered) []byte {
	one := func(msg []byte) []byte {
		id, s, e, a := rw.answer(msg)
		if a != nil {
			*answers = append(*answers, a)
		}
		switch {
		case a != nil && a.cancelled:
			return nil
		case id == nil:
			return msg
		}
		return splice(msg, s, e, id)
	}
	if i := skipSpace(body, 0); i >= len(body) || body[i] != '[' {
		return one(bytes.TrimSpace(body))
	}
	var parts [][]byte
	elements(body, func(start, end int) {
		if out := one(body[start:end]); out != nil {
			parts = append(parts, out)
		}
	})
	out := []byte{'['}
	out = append(out, bytes.Join(parts, []byte{','})...)
	return append(out, ']')
}
