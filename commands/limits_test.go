package commands

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{
		"0": 0, "1048576": 1 << 20, "64MiB": 64 << 20, "1GB": 1e9, "512k": 512 << 10,
		"1.5KiB": 1536, "0.3kb": 300, " 2 mib ": 2 << 20, "4GiB": 4 << 30, "10b": 10,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", " ", "nan", "NaN", "inf", "+Inf", "-inf", "infinity", "-1", "+1", "1e3", "0x10", "0x1p4",
		"1_000", ".5", "1.", "MiB", "lots", "1 2", "1MiBMiB", "99999999999999999999999",
		"9223372036854775808", strings.Repeat("9", 400), "8589934592GiB",
	} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestLimitFlags: each size and duration flag refuses nonsense with a usage
// error that names it.
func TestLimitFlags(t *testing.T) {
	t.Parallel()
	good := limitOptions{timeout: time.Second, memory: "128MiB", maxArgs: "1MiB", maxResult: "16MiB", maxCallDepth: 4}
	if _, err := good.limits(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		set  func(*limitOptions)
		flag string
	}{
		"max-args nan":       {func(o *limitOptions) { o.maxArgs = "nan" }, "--max-args"},
		"max-args inf":       {func(o *limitOptions) { o.maxArgs = "inf" }, "--max-args"},
		"max-args empty":     {func(o *limitOptions) { o.maxArgs = "" }, "--max-args"},
		"max-args negative":  {func(o *limitOptions) { o.maxArgs = "-5" }, "--max-args"},
		"max-args zero":      {func(o *limitOptions) { o.maxArgs = "0" }, "--max-args"},
		"max-args overflow":  {func(o *limitOptions) { o.maxArgs = "99999999999999999999TiB" }, "--max-args"},
		"max-args past 4GiB": {func(o *limitOptions) { o.maxArgs = "8000000TiB" }, "--max-args"},
		"max-result nan":     {func(o *limitOptions) { o.maxResult = "nan" }, "--max-result"},
		"max-result huge":    {func(o *limitOptions) { o.maxResult = "5GiB" }, "--max-result"},
		"memory inf":         {func(o *limitOptions) { o.memory = "inf" }, "--memory"},
		"memory tiny":        {func(o *limitOptions) { o.memory = "1k" }, "--memory"},
		"memory huge":        {func(o *limitOptions) { o.memory = "5GiB" }, "--memory"},
		"timeout zero":       {func(o *limitOptions) { o.timeout = 0 }, "--timeout"},
		"timeout negative":   {func(o *limitOptions) { o.timeout = -time.Second }, "--timeout"},
		"depth negative":     {func(o *limitOptions) { o.maxCallDepth = -1 }, "--max-call-depth"},
	} {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.set(&o)
			_, err := o.limits()
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%v, want a usage error naming %s", err, tc.flag)
			}
		})
	}
}
