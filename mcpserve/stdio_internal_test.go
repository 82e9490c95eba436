package mcpserve

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeSeeds are messages of every shape, and near misses.
var decodeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"hi"}}}`,
	`{"jsonrpc":"2.0","id":"a-1","method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":null,"method":"x","params":null}`,
	`{"jsonrpc":"2.0","id":1.7,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"x"}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}`,
	`{"jsonrpc":"2.0","id":true,"method":"x"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","ID":1,"Method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"id":"b","method":"x","method":"y"}`,
	`{"jsonrpc":"2.0","id":"\u00e9\n","m\u0065thod":"\u0079","params":[1]}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":1}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no","data":{"a":1}}}`,
	`{"jsonrpc":"2.0","id":1,"error":null}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1.5}}`,
	`{"jsonrpc":"2.0","result":1}`,
	`{"jsonrpc":"1.0","method":"x"}`,
	`{"jsonrpc":2,"method":"x"}`,
	`{"method":"x"}`,
	`{}`,
	`"2.0"`,
	`null`,
}

// decoded is a message as the tests compare it.
type decoded struct {
	Kind          string
	ID            any
	Method        string
	Params        json.RawMessage
	Result        json.RawMessage
	Error         jsonrpc.Error
	ErrorPresent  bool
	ParamsPresent bool
}

func describe(m jsonrpc.Message) decoded {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return decoded{Kind: "request", ID: m.ID.Raw(), Method: m.Method, Params: m.Params, ParamsPresent: m.Params != nil}
	case *jsonrpc.Response:
		d := decoded{Kind: "response", ID: m.ID.Raw(), Result: m.Result, ParamsPresent: m.Result != nil}
		if m.Error != nil {
			d.Error, d.ErrorPresent = *m.Error.(*jsonrpc.Error), true
		}
		return d
	}
	return decoded{Kind: "none"}
}

// sameAsSDK fails when decodeMessage and the SDK's DecodeMessage disagree on
// a line that is one JSON value: one decodes it and the other refuses it, or
// both decode it to different messages.
func sameAsSDK(t *testing.T, line []byte) {
	t.Helper()
	if !json.Valid(line) {
		return // the SDK's decoder reads the first value and ignores the rest
	}
	if hugeID(line) {
		return // berm takes an id the SDK cannot hold (decodeWire)
	}
	want, wantErr := jsonrpc.DecodeMessage(line)
	got, gotErr := decodeMessage(line)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%s: decodeMessage error %v, the SDK's %v", line, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(describe(got), describe(want)) {
		t.Fatalf("%s: decodeMessage\n%+v\nthe SDK\n%+v", line, describe(got), describe(want))
	}
}

// hugeID reports whether line is an object whose id is a number past a
// float64's range.
func hugeID(line []byte) bool {
	var wire map[string]json.RawMessage
	if json.Unmarshal(line, &wire) != nil || wire["id"] == nil {
		return false
	}
	var f float64
	err := json.Unmarshal(wire["id"], &f)
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && typeErr.Value == "number "+string(wire["id"])
}

func TestDecodeMessageAsSDK(t *testing.T) {
	t.Parallel()
	for _, seed := range decodeSeeds {
		sameAsSDK(t, []byte(seed))
	}
	// The SDK refuses JSON nested deeper than 1000.
	for _, depth := range []int{999, 1000, 1001} {
		params := strings.Repeat(`{"a":`, depth-1) + `"[{"` + strings.Repeat("}", depth-1)
		sameAsSDK(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":`+params+`}`))
		sameAsSDK(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`))
	}
}

// FuzzDecodeMessage holds berm's decoding of a stdio line to the SDK's.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range decodeSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		sameAsSDK(t, line)
	})
}

// BenchmarkDecodeMessage is a tools/call line decoded by berm and by the SDK.
func BenchmarkDecodeMessage(b *testing.B) {
	line := []byte(decodeSeeds[0])
	b.Run("berm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMessage(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.DecodeMessage(line); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sameEncoding fails when encodeResponse and the SDK's EncodeMessage write a
// response differently, and when encodeResponse with the client's id writes
// anything but the SDK's encoding with that id in place of the token.
func sameEncoding(t *testing.T, m *jsonrpc.Response) {
	t.Helper()
	want, wantErr := jsonrpc.EncodeMessage(m)
	got, gotErr := encodeResponse(m, nil)
	if (gotErr != nil) != (wantErr != nil) || string(got) != string(want) {
		t.Fatalf("encodeResponse wrote\n%s (%v)\nthe SDK\n%s (%v)", got, gotErr, want, wantErr)
	}
	for _, raw := range []string{`1e308`, `123456789012345678901234567890`, `-0.5`, `"\u00e9<"`} {
		token, _ := jsonrpc.MakeID(tokenPrefix + "1")
		r := *m
		r.ID = token
		sdk, _ := jsonrpc.EncodeMessage(&r)
		got, err := encodeResponse(&r, json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		wantRaw := strings.Replace(string(sdk), `"`+tokenPrefix+`1"`, raw, 1)
		if string(got) != wantRaw {
			t.Fatalf("encodeResponse with id %s wrote\n%s\nwant\n%s", raw, got, wantRaw)
		}
	}
}

// result is a result as the SDK hands it to the connection: encoded by
// encoding/json.
func result(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeMessageAsSDK(t *testing.T) {
	t.Parallel()
	ids := []any{int64(0), int64(-3), int64(1 << 53), "a-1", "", "<&>\u2028\x01\"\\é", "\xff"}
	results := []any{
		map[string]any{"content": []any{map[string]any{"type": "text", "text": `{"message":"hi"}`}}},
		map[string]any{},
		"<b>&</b>",
		nil,
	}
	for _, rawID := range ids {
		id, err := jsonrpc.MakeID(rawID)
		if rawID, ok := rawID.(int64); ok {
			id, err = jsonrpc.MakeID(float64(rawID))
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			sameEncoding(t, &jsonrpc.Response{ID: id, Result: result(t, r)})
		}
		sameEncoding(t, &jsonrpc.Response{ID: id})
		sameEncoding(t, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32601, Message: "no"}})
	}
}

// FuzzEncodeMessage holds berm's encoding of a response to the SDK's.
func FuzzEncodeMessage(f *testing.F) {
	f.Add(int64(7), "", `{"content":[{"type":"text","text":"hi"}]}`)
	f.Add(int64(0), "a-\u2028<", `{"a":"<&>"}`)
	f.Fuzz(func(t *testing.T, n int64, s, value string) {
		var v any
		if json.Unmarshal([]byte(value), &v) != nil {
			return
		}
		var id jsonrpc.ID
		var err error
		if s == "" {
			id, err = jsonrpc.MakeID(float64(n))
		} else {
			id, err = jsonrpc.MakeID(s)
		}
		if err != nil {
			t.Fatal(err)
		}
		sameEncoding(t, &jsonrpc.Response{ID: id, Result: result(t, v)})
	})
}
