package commands

import "testing"

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"4KiB/s", 4 << 10, true},
		{"4KiB", 4 << 10, true},
		{"1MB/s", 1e6, true},
		{" 512 /S ", 512, true},
		{"0", 0, true},
		{"fast", 0, false},
		{"-1", 0, false},
		{"4KiB/m", 0, false},
		{"/s", 0, false},
	} {
		got, err := parseRate(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseRate(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
