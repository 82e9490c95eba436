package mcpserve

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestIDKey(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{`7`, `7.0`, `0.7e1`, `70E-1`, `7.000e0`},
		{`0`, `-0`, `0.0`, `0e5`, `-0.0E-3`},
		{`1e308`, `10e307`, `1.0E+308`},
		{`123456789012345678901234567890`, `1.2345678901234567890123456789e29`},
		{`"a"`, `"\u0061"`},
		{`1e99999999999999999999`},
		// Strings a decoder reads as U+FFFD are distinct ids all the same
		// (they were one): lone surrogates, and bytes that are not UTF-8.
		{`"\ufffd"`, "\"\uFFFD\"", `"\uFFFD"`},
		{`"\ud800"`, `"\uD800"`},
		{`"\udc00"`},
		{"\"\xff\""},
		{"\"\xfe\""},
		{`"\ud800\udc00"`, "\"\U00010000\""},
		{`"\udc00\ud800"`},
	}
	for i, group := range same {
		for _, a := range group {
			if idKey([]byte(a)) != idKey([]byte(group[0])) {
				t.Errorf("%s and %s are different ids: %s, %s", a, group[0], idKey([]byte(a)), idKey([]byte(group[0])))
			}
			for j, other := range same {
				if j != i && idKey([]byte(a)) == idKey([]byte(other[0])) {
					t.Errorf("%s and %s are one id", a, other[0])
				}
			}
		}
	}
	for _, pair := range [][2]string{{`7`, `"7"`}, {`-1`, `1`}, {`1.5`, `1`}, {`10`, `1`}, {`100`, `1e3`}} {
		if idKey([]byte(pair[0])) == idKey([]byte(pair[1])) {
			t.Errorf("%s and %s are one id", pair[0], pair[1])
		}
	}
}

// memberSeeds are objects and arrays of every shape, and near misses.
var memberSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"id":2,"s":"a\"}b","a":[1,{"id":3}]}}`,
	` { "id" : "x" , "id" : 7 } `,
	`{"i\u0064":5,"ID":6}`,
	`[{"id":1},2,"three",[4],{"a":{}}]`,
	`{}`, `[]`, `{"a":[]}`, `"id"`, `{"a":1e308,"b":true,"c":null,"d":-0.5}`,
}

// FuzzMembers holds the scanner to encoding/json: the members of an object
// and the elements of an array are the values a decoder reads, byte for
// byte, and the member a decoder keeps of a duplicated key is member's.
func FuzzMembers(f *testing.F) {
	for _, seed := range memberSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			members(data, func(string, int, int) bool { return true }) // only must not panic
			elements(data, func(int, int) {})
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) == nil {
			if obj == nil { // null: no members
				obj = map[string]json.RawMessage{}
			}
			got := map[string]json.RawMessage{}
			members(data, func(key string, start, end int) bool {
				got[key] = json.RawMessage(data[start:end])
				return true
			})
			if !reflect.DeepEqual(got, obj) {
				t.Fatalf("%s: members read %q, encoding/json %q", data, got, obj)
			}
			if v, ok := obj["id"]; ok {
				if s, e, ok := member(data, "id"); !ok || string(data[s:e]) != string(v) {
					t.Fatalf("%s: member id %q, encoding/json %q", data, data[s:e], v)
				}
			}
		}
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) == nil {
			var got []json.RawMessage
			elements(data, func(start, end int) { got = append(got, json.RawMessage(data[start:end])) })
			if len(got) != len(arr) {
				t.Fatalf("%s: elements read %q, encoding/json %q", data, got, arr)
			}
			for i := range got {
				if string(got[i]) != string(arr[i]) {
					t.Fatalf("%s: element %d %q, encoding/json %q", data, i, got[i], arr[i])
				}
			}
		}
	})
}
