package commands

import (
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v3"
)

// suggestFlag is the flag of cmd meant by name (without its dashes), when
// one is near enough to be a typo of it, with its dashes ("--example");
// else "". cli picks the nearest; nearEnough decides whether it is meant.
func suggestFlag(cmd *cli.Command, name string) string {
	s := cli.SuggestFlag(cmd.VisibleFlags(), name, false)
	if !nearEnough(name, strings.TrimLeft(s, "-")) {
		return ""
	}
	return s
}

// suggestCommand is the subcommand of cmd meant by name, when one is near
// enough to be a typo of it; else "".
func suggestCommand(cmd *cli.Command, name string) string {
	s := cli.SuggestCommand(cmd.VisibleCommands(), name)
	if !nearEnough(name, s) {
		return ""
	}
	return s
}

// suggestName is the name of names nearest to typed (a tool's, say), when
// it is near enough to be a typo of it; else "".
func suggestName(typed string, names []string) string {
	best, dist := "", 0
	for _, n := range names {
		if !nearEnough(typed, n) {
			continue
		}
		if d := editDistance(typed, n); best == "" || d < dist {
			best, dist = n, d
		}
	}
	return best
}

// nearEnough reports whether typed is a typo of name: a character left out,
// added, changed or two swapped, or two such for names of 6 or more.
func nearEnough(typed, name string) bool {
	if name == "" || typed == name {
		return false
	}
	most := 1
	if utf8.RuneCountInString(name) >= 6 {
		most = 2
	}
	// Lengths further apart are further apart, and a long argument (one
	// pasted by mistake) is not compared character by character.
	if n, m := utf8.RuneCountInString(typed), utf8.RuneCountInString(name); n > m+most || m > n+most {
		return false
	}
	return editDistance(typed, name) <= most
}

// editDistance counts the insertions, deletions, substitutions and swaps of
// adjacent characters that turn a into b (optimal string alignment), so
// that "sevre" is one from "serve".
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance between x[:i] and y[:j].
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
