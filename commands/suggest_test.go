package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

func TestSuggestName(t *testing.T) {
	t.Parallel()
	names := []string{"greet", "count", "now", "serve", "example", "max-args", "max-result"}
	for _, tc := range []struct{ typed, want string }{
		{"gret", "greet"},      // one left out
		{"sevre", "serve"},     // two swapped
		{"exmple", "example"},  // one left out, of a longer name
		{"exampel", "example"}, // swapped at the end
		{"max-rsult", "max-result"},
		{"xxample", "example"},
		{"cuont", "count"},
		{"greet", ""}, // the name itself is no typo
		{"now", ""},
		{"nw", "now"},
		{"zzz", ""},
		{"grt", ""},        // two off a short name
		{"ex", ""},         // far shorter
		{"exa", ""},        // a prefix is not a typo
		{"max-", ""},       // nor is this
		{"", ""},           // nothing typed
		{"grеet", "greet"}, // a Cyrillic е: one character, not two bytes
	} {
		if got := suggestName(tc.typed, names); got != tc.want {
			t.Errorf("suggestName(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "", 1},
		{"", "abc", 3},
		{"serve", "sevre", 1},
		{"ca", "abc", 3}, // optimal string alignment: no edit of a swapped pair
		{"kitten", "sitting", 3},
		{"héllo", "hello", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestExampleArgs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 65)
	for _, tc := range []struct{ params, want string }{
		{`{"type":"object","properties":{"name":{"type":"string"}}}`, `{"name":"x"}`},
		{`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`, `{"a":1}`},
		{`{"type":"object","properties":{"b":{"type":"boolean"},"a":{"type":"integer"}},"required":["b"]}`, `{"b":true}`},
		{`{"type":"object","properties":{"tags":{"type":["array","null"]}}}`, `{"tags":[]}`},
		{`{"type":"object","properties":{"q\"uote":{}}}`, `{"q\"uote":"x"}`},
		{`{"type":"object","properties":{"` + long + `":{}}}`, `{}`},
		{`{"type":"object"}`, `{}`},
		{`true`, `{}`},
	} {
		if got := exampleArgs(&manifest.Tool{Parameters: json.RawMessage(tc.params)}); got != tc.want {
			t.Errorf("exampleArgs(%s) = %s, want %s", tc.params, got, tc.want)
		}
	}
}
