package runtime

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzLogWriterFatal writes a program's output in pieces, under a budget of
// lines and bytes that may be spent before its end: whatever the pieces, the
// call's fatal line is the first line of the output that FatalLine takes,
// as fatalText quotes it, and each line that is not empty is either logged
// or counted dropped.
func FuzzLogWriterFatal(f *testing.F) {
	for _, seed := range []struct {
		out          string
		lines, bytes uint16
		piece        uint16
	}{
		{"panic: assignment to entry in nil map\n\ngoroutine 1 [running]:\n", 1000, 1 << 10, 7},
		{"a\nb\nc\npanic: past the budget\n", 2, 1 << 10, 100},
		{"a\nb\npanic: begun before the budget was spent\n", 2, 1 << 10, 5},
		{"runtime: out of memory\nfatal error: out of memory\n", 1000, 1 << 10, 1},
		{"log: panic: not at the start\npanic\npanic:\nfatal error:x\n", 1, 1 << 10, 3},
		{"f\nfa\nfatal\npanic: no newline", 0, 0, 2},
		{"p\n\n\npanic: \xff\xfe bytes that are not UTF-8\n", 1, 4, 9},
		{"panic: \x1b]0;retitled\x07 \u009b31m\r\n", 1000, 1 << 10, 64},
	} {
		f.Add([]byte(seed.out), seed.lines, seed.bytes, seed.piece)
	}
	f.Fuzz(func(t *testing.T, out []byte, lines, budget, piece uint16) {
		var logged int
		r := &Runtime{log: func(context.Context, string, string, []byte) { logged++ }}
		c := &Call{rt: r, program: &Program{Name: "p"}, tool: "t"}
		c.ownLogs = logBudget{lines: int(lines), bytes: int(budget)}
		c.logs = &c.ownLogs
		w := &logWriter{ctx: context.Background(), c: c}
		n := int(piece)%64 + 1
		for b := out; len(b) > 0; {
			k := min(n, len(b))
			w.Write(b[:k])
			b = b[k:]
		}
		w.flush()

		want, nonEmpty := "", 0
		for line := range bytes.SplitSeq(out, []byte{'\n'}) {
			if len(line) == 0 {
				continue
			}
			nonEmpty++
			if want == "" && FatalLine(line) {
				want = fatalText(line[:min(len(line), maxFatalLine+utf8.UTFMax)])
			}
		}
		if c.fatal != want {
			t.Errorf("fatal line %q, want %q", c.fatal, want)
		}
		if logged+c.logs.dropped != nonEmpty {
			t.Errorf("%d lines logged and %d dropped, want %d in all", logged, c.logs.dropped, nonEmpty)
		}
		if len(c.fatal) > maxFatalLine+len("…") || !utf8.ValidString(c.fatal) ||
			strings.ContainsFunc(c.fatal, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) {
			t.Errorf("fatal line %q: over %d bytes, not UTF-8, or with control characters", c.fatal, maxFatalLine)
		}
	})
}

// BenchmarkLogWriter writes 4 MiB of output (MaxOutput) through a logWriter
// in writes of 4 KiB, under the default budget: 1,000 lines logged, the rest
// dropped, among which the fatal line is looked for. f_nl is the worst case
// of that search: each line a start of "fatal error: ".
func BenchmarkLogWriter(b *testing.B) {
	for _, in := range []struct {
		name string
		line []byte
	}{
		{"lines80", append(bytes.Repeat([]byte("x"), 79), '\n')},
		{"a_nl", []byte("a\n")},
		{"f_nl", []byte("f\n")},
		{"newlines", []byte("\n")},
	} {
		out := bytes.Repeat(in.line, (4<<20)/len(in.line))
		b.Run(in.name, func(b *testing.B) {
			r := &Runtime{log: func(context.Context, string, string, []byte) {}}
			r.limits = r.limits.withDefaults()
			for b.Loop() {
				c := &Call{rt: r, program: &Program{Name: "p"}, tool: "t"}
				c.ownLogs = logBudget{lines: r.limits.MaxLogLines, bytes: r.limits.MaxLogBytes}
				c.logs = &c.ownLogs
				w := &logWriter{ctx: context.Background(), c: c}
				for p := out; len(p) > 0; p = p[min(4096, len(p)):] {
					w.Write(p[:min(4096, len(p))])
				}
				w.flush()
			}
		})
	}
}
