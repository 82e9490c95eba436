package commands

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var sizeUnits = []struct {
	suffix string
	scale  uint64
}{
	// Longest suffixes first, so "MiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// parseSize reads a size with an optional unit: "64MiB", "1GB", "512k",
// "1048576", "1.5GiB". Binary units (KiB, MiB, GiB) and the single letters
// are powers of 1024; KB, MB, GB powers of 1000. The number is plain decimal
// digits: strconv.ParseFloat alone would take nan, inf, 1e9 and 0x10.
func parseSize(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := uint64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, scale = strings.TrimSpace(rest), u.scale
			break
		}
	}
	if !sizeNumber.MatchString(t) {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, such as 64MiB, 1GB or 1048576", s)
	}
	// The syntax is checked, so the only error left is a number out of
	// float64's range, which is too large as well.
	n, err := strconv.ParseFloat(t, 64)
	// Rounded, not truncated: 0.3KB is 300 bytes, not 299.99999999999994.
	v := math.Round(n * float64(scale))
	if err != nil || v >= 1<<63 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return uint64(v), nil
}

var sizeNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// formatSize prints a byte count for people: "1.9 MiB (1993322 bytes)".
func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB (%d bytes)", float64(n)/(1<<30), n)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return plural(int(n), "byte")
}
