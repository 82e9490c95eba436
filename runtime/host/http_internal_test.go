package host

import (
	"strings"
	"testing"
)

// FuzzParseHeader: whatever block a program sends, parseHeader refuses it
// or returns names that are tokens and values without control characters
// but tab, which
// net/http then writes as they are.
func FuzzParseHeader(f *testing.F) {
	for _, seed := range []string{
		"", "X-Test: yes\r\nContent-Type: text/plain\n", "x-test: lower\n\n", "no colon here",
		"X-A: b\rX-C: d", "Host: other.example", ": empty name", "X: \x00", "A:b\n\r\nC: d  \t",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, block string) {
		h, err := parseHeader([]byte(block))
		if err != nil {
			return
		}
		for name, values := range h {
			if !validToken(name) || strings.EqualFold(name, "Host") {
				t.Fatalf("name %q", name)
			}
			for _, v := range values {
				if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
					t.Fatalf("value %q", v)
				}
			}
		}
	})
}

func TestReadAtMost(t *testing.T) {
	for _, tc := range []struct {
		body  string
		limit int
		want  string
	}{
		{"", 4, ""},
		{"abc", 4, "abc"},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcde"},
		{strings.Repeat("x", 5000), 4096, strings.Repeat("x", 4097)},
	} {
		got, err := readAtMost(strings.NewReader(tc.body), []byte("head"), tc.limit)
		if err != nil || string(got) != "head"+tc.want {
			t.Errorf("readAtMost(%d bytes, %d) = %d bytes, %v; want %d", len(tc.body), tc.limit, len(got)-4, err, len(tc.want))
		}
	}
}
