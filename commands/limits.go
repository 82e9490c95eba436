package commands

import (
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/runtime"
)

// limitFlags are the operator's limits, shared by run and serve.
func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "timeout", Value: runtime.DefaultDeadline, Usage: "deadline of a call, nested calls included (Go duration: 500ms, 30s, 2m)"},
		&cli.StringFlag{Name: "memory", Value: "128MiB", Usage: "memory limit of each instance (64MiB, 1GB, or bytes)"},
		&cli.StringFlag{Name: "max-args", Value: "1MiB", Usage: "size limit of a call's arguments"},
		&cli.StringFlag{Name: "max-result", Value: "16MiB", Usage: "size limit of a result or failure message"},
		&cli.IntFlag{Name: "max-call-depth", Value: runtime.DefaultCallDepth, Usage: "how deep berm.call may nest (0 refuses every nested call)"},
	}
}

// limitOptions are the values of limitFlags.
type limitOptions struct {
	timeout      time.Duration
	memory       string
	maxArgs      string
	maxResult    string
	maxCallDepth int
}

func readLimitFlags(cmd *cli.Command) limitOptions {
	return limitOptions{
		timeout:      cmd.Duration("timeout"),
		memory:       cmd.String("memory"),
		maxArgs:      cmd.String("max-args"),
		maxResult:    cmd.String("max-result"),
		maxCallDepth: int(cmd.Int("max-call-depth")),
	}
}

// maxMemory is the most a 32-bit memory holds.
const maxMemory = 4 << 30

// limits checks the flags and returns the runtime's limits.
func (o limitOptions) limits() (runtime.Limits, error) {
	if o.timeout <= 0 {
		return runtime.Limits{}, usagef("--timeout %s: want a positive duration", o.timeout)
	}
	if o.maxCallDepth < 0 {
		return runtime.Limits{}, usagef("--max-call-depth %d: want 0 or more", o.maxCallDepth)
	}
	l := runtime.Limits{Deadline: o.timeout}
	// Arguments go into, and a result comes out of, one 32-bit memory, so
	// no limit past 4GiB means anything; a larger one would only overflow
	// what is computed from it (a request body's bound).
	for _, f := range []struct {
		flag, value string
		set         func(uint64)
	}{
		{"--memory", o.memory, func(v uint64) { l.Memory = v }},
		{"--max-args", o.maxArgs, func(v uint64) { l.MaxArgs = int(v) }},
		{"--max-result", o.maxResult, func(v uint64) { l.MaxResult = int(v) }},
	} {
		v, err := parseSize(f.value)
		if err != nil {
			return runtime.Limits{}, usagef("%s: %v", f.flag, err)
		}
		if v == 0 || v > maxMemory {
			return runtime.Limits{}, usagef("%s %s: want more than 0 bytes and at most 4GiB (a 32-bit memory's most)", f.flag, f.value)
		}
		f.set(v)
	}
	if l.Memory < runtime.PageSize {
		return runtime.Limits{}, usagef("--memory %s: want 64KiB to 4GiB (a 32-bit memory's most)", o.memory)
	}
	return l, nil
}
