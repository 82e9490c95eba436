package mcpserve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A client's request ids are echoed exactly as it sent them, as JSON-RPC
// asks. The SDK cannot: it reads a numeric id as a float64 and keeps it as an
// int64 (go-sdk v1.8.0, internal/jsonrpc2/messages.go, MakeID), so 1e308 and
// 123456789012345678901234567890 both came back as -9223372036854775808, and
// 1.5 as 1. So every call a client makes reaches the SDK under a token of
// berm's, a string the SDK carries exactly, and its response goes out with
// the client's own id, byte for byte, in place of the token: over stdio in
// lineConn, over HTTP in the POST's response (a JSON body or each event of
// its stream). Since the SDK never sees a client's id, berm also answers a
// second request whose id is in flight (the SDK's stdio side left it
// unanswered), and knows which responses a client cancelled.

// tokenPrefix starts every token. No client id can collide with one: the SDK
// sees no client id at all.
const tokenPrefix = "berm-id-"

// idTable holds one peer's requests in flight: a session's, or a stateless
// request's.
type idTable struct {
	mu      sync.Mutex
	seq     uint64
	byToken map[string]*inFlight
	byKey   map[string]string // idKey of the client's id -> its token
}

// inFlight is one request the server owes a response.
type inFlight struct {
	raw       json.RawMessage // the id as the client sent it
	key       string          // idKey(raw)
	method    string
	cancelled bool       // notifications/cancelled named it: no response goes out
	batch     *lineBatch // over stdio, the batch it came in, if any
	// Over HTTP, a tools/call's hold on the server while its handler runs
	// and its result waits to be written (server.go): it is how DELETE, an
	// eviction and a late notifications/cancelled reach the call.
	call    *callHold
	running bool // its handler has not returned
	// ended: its POST ended before its response went out (the client hung
	// up), so none will; it is forgotten when its handler returns.
	ended bool
}

func newIDTable() *idTable {
	return &idTable{byToken: map[string]*inFlight{}, byKey: map[string]string{}}
}

// add records a request and returns the token it reaches the SDK under, or
// false when a request with the same id is in flight.
func (t *idTable) add(raw json.RawMessage, method string, batch *lineBatch) (string, bool) {
	key := idKey(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.byKey[key]; dup {
		return "", false
	}
	t.seq++
	token := tokenPrefix + strconv.FormatUint(t.seq, 10)
	t.byToken[token] = &inFlight{raw: raw, key: key, method: method, batch: batch}
	t.byKey[key] = token
	return token, true
}

// take removes the request a response answers, by the response's id.
func (t *idTable) take(id jsonrpc.ID) (*inFlight, bool) {
	token, ok := id.Raw().(string)
	if !ok || !strings.HasPrefix(token, tokenPrefix) {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.byToken[token]
	if ok {
		t.deleteLocked(token, p)
	}
	return p, ok
}

func (t *idTable) deleteLocked(token string, p *inFlight) {
	delete(t.byToken, token)
	delete(t.byKey, p.key)
}

// drop forgets requests that will get no response this way (their HTTP
// request ended first), but for calls whose handler still runs: those are
// kept, so that a notifications/cancelled sent after the POST's connection
// went still finds them (as MCP has a client do), until the handler returns.
func (t *idTable) drop(tokens []string) {
	var gone []*callHold
	t.mu.Lock()
	for _, token := range tokens {
		p, ok := t.byToken[token]
		switch {
		case !ok:
		case p.running:
			p.ended = true
		default:
			t.deleteLocked(token, p)
			gone = append(gone, p.call)
		}
	}
	t.mu.Unlock()
	for _, c := range gone {
		c.sent() // no response will go out
	}
}

// bind gives the call in flight under token its hold, and reports false
// when there is no such call (its POST ended already, say).
func (t *idTable) bind(token string, c *callHold) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.byToken[token]
	if !ok || p.call != nil || p.method != methodToolsCall {
		return false
	}
	p.call, p.running = c, true
	return true
}

// returned records that the handler of the call under token has returned:
// its response is on its way, or, its POST having ended, never will be.
func (t *idTable) returned(token string) {
	t.mu.Lock()
	p, ok := t.byToken[token]
	if ok {
		p.running = false
		if p.ended {
			t.deleteLocked(token, p)
		}
	}
	t.mu.Unlock()
	if ok && p.ended {
		p.call.sent()
	}
}

// cancel marks the request in flight under the client's id raw as
// cancelled, and returns its token, for the SDK to cancel its handler; a
// call whose POST has ended is cancelled here, the SDK having no stream to
// answer it on.
func (t *idTable) cancel(raw json.RawMessage) (string, bool) {
	key := idKey(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	token, ok := t.byKey[key]
	if !ok || t.byToken[token].method == methodInitialize {
		return "", false // MCP: a client must not cancel initialize
	}
	p := t.byToken[token]
	p.cancelled = true
	if p.call != nil {
		p.call.cancel(errCancelled)
	}
	return token, true
}

// cancelAll ends every call in flight, for cause: its session ended.
func (t *idTable) cancelAll(cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byToken {
		if p.call != nil {
			p.call.cancel(cause)
		}
	}
}

func (t *idTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byToken)
}

// idKey is what makes two ids the same id: a string's value, whatever its
// escapes; a number's value, whatever its form (7, 7.0 and 0.7e1 are one id,
// as the SDK would also have them).
func idKey(raw []byte) string {
	if len(raw) > 0 && raw[0] == '"' {
		if plainASCII(string(raw[1 : len(raw)-1])) {
			return "s" + string(raw[1:len(raw)-1])
		}
		if s, ok := stringValue(raw); ok {
			return "s" + s
		}
		return "r" + string(raw)
	}
	return "n" + canonicalNumber(raw)
}

// stringValue is the value of a JSON string, its escapes decoded, without
// the loss of a decoder: encoding/json reads a lone surrogate (\ud800) and a
// byte that is not UTF-8 alike as U+FFFD, which made "\ud800", "\udc00" and
// "\ufffd" one id. Each of those is kept apart here: a lone surrogate as
// 0xff then its four hex digits, an invalid byte as 0xfe then the byte (0xff
// and 0xfe are never part of UTF-8, so no valid string reads the same). It
// reports false for what is not a JSON string.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 >= len(in) {
				return "", false
			}
			switch e := in[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(in[i+2:])
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r < 0xdc00 && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if r2, ok := hex4(in[i+2:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
							out = utf8.AppendRune(out, utf16.DecodeRune(r, r2))
							i += 6
							continue
						}
					}
					out = append(out, 0xff)
					out = append(out, fmt.Sprintf("%04x", r)...)
					continue
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && n == 1 {
				out = append(out, 0xfe, c)
			} else {
				out = append(out, in[i:i+n]...)
			}
			i += n
		}
	}
	return string(out), true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(v), err == nil
}

// canonicalNumber writes a JSON number as its digits, without leading or
// trailing zeros, and the power of ten they are multiplied by: 1e3, 1000 and
// 1000.0 are all "1e3", 0 and -0.0 are "0". What is not a JSON number, or has
// an exponent of more digits than an int64 holds, is kept as it is.
func canonicalNumber(raw []byte) string {
	s := string(raw)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return string(raw)
	}
	e := int64(0)
	if hasExp {
		exp = strings.TrimPrefix(exp, "+")
		if len(strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")) > 17 {
			return string(raw)
		}
		v, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return string(raw)
		}
		e = v
	}
	e -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	e += int64(len(digits) - len(trimmed))
	out := trimmed + "e" + strconv.FormatInt(e, 10)
	if neg {
		out = "-" + out
	}
	return out
}

// JSON scanning. These read the members of an object and the elements of an
// array by their byte spans, so that an id can be put in place or read out
// without decoding and encoding what is around it: a tool's arguments reach
// the program byte for byte (ABI.md), and a result of 16 MiB is not copied
// to change its first bytes. They expect valid JSON (checked before, or the
// SDK's own output) and stop, without panicking, at anything else.

// members calls f with the key (decoded) and value span of each member of
// the JSON object data, in order, until f returns false.
func members(data []byte, f func(key string, start, end int) bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return
		}
		ks := i
		i = skipString(data, i)
		if i < 0 {
			return
		}
		key := string(data[ks+1 : i-1])
		if !plainASCII(key) {
			// Decoded as a decoder decodes it: escapes, and invalid
			// UTF-8 as U+FFFD.
			if json.Unmarshal(data[ks:i], &key) != nil {
				return
			}
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return
		}
		vs := skipSpace(data, i+1)
		ve := skipValue(data, vs)
		if ve < 0 || !f(key, vs, ve) {
			return
		}
		i = skipSpace(data, ve)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

// member is the span of the value of the last member named key (the one a
// decoder keeps), or ok false when there is none.
func member(data []byte, key string) (start, end int, ok bool) {
	members(data, func(k string, s, e int) bool {
		if k == key {
			start, end, ok = s, e, true
		}
		return true
	})
	return start, end, ok
}

// firstMember is member for output that has each key once: it stops at the
// first, so that the rest (a result of megabytes) is not scanned.
func firstMember(data []byte, key string) (start, end int, ok bool) {
	members(data, func(k string, s, e int) bool {
		if k == key {
			start, end, ok = s, e, true
			return false
		}
		return true
	})
	return start, end, ok
}

// elements calls f with the span of each element of the JSON array data.
func elements(data []byte, f func(start, end int)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return
	}
	for {
		vs := skipSpace(data, i)
		ve := skipValue(data, vs)
		if ve < 0 {
			return
		}
		f(vs, ve)
		i = skipSpace(data, ve)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

// plainASCII reports whether a string's JSON text is its value.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that starts at i, or -1.
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index past the value that starts at i, or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				if j = skipString(data, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// splice returns data with the bytes from start to end replaced by with.
func splice(data []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(with))
	out = append(out, data[:start]...)
	out = append(out, with...)
	return append(out, data[end:]...)
}

// quoteToken is a token as the SDK encodes it: plain ASCII, so no escapes.
func quoteToken(token string) []byte { return []byte(`"` + token + `"`) }
