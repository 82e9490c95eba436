package index

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// maxToken drops what is no word (a hash, a base64 blob) from the terms.
const maxToken = 40

// terms splits text into the terms it is indexed and searched by: runs of
// letters and digits, lower-cased, English stop words dropped, the rest
// stemmed with the Snowball (Porter 2) English stemmer, so that "reads",
// "reading" and "read" are one term. Names split too: "file_reader" and
// "file-reader" are "file" and "reader".
func terms(text string, stems map[string]string, out []string) []string {
	for _, f := range strings.FieldsFunc(text, notWordRune) {
		if len(f) > maxToken {
			continue
		}
		f = strings.ToLower(f)
		if s, ok := stems[f]; ok {
			if s != "" {
				out = append(out, s)
			}
			continue
		}
		s := ""
		if !english.IsStopWord(f) {
			s = english.Stem(f, true)
		}
		if stems != nil {
			stems[f] = s
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
