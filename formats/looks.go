package formats

import (
	"unicode"
	"unicode/utf8"
)

// LooksLikeText reports whether head, the first bytes of a file (possibly
// cut inside a character), look like a text file: valid UTF-8 (after an
// optional byte order mark), no control characters but tab, carriage
// return and line feed, and at least one line break. A binary driver that
// finds no magic says so in its error, so that a CSV file named .tbl or
// .dat is not reported as a broken binary file: it is a file that needs
// PlanOptions.Format.
func LooksLikeText(head []byte) bool {
	head = trimBOM(head)
	breaks := false
	for len(head) > 0 {
		r, size := utf8.DecodeRune(head)
		if r == utf8.RuneError && size <= 1 {
			// A character the sample cut is not a sign of binary data.
			return !utf8.FullRune(head) && breaks
		}
		switch {
		case r == '\n' || r == '\r':
			breaks = true
		case r == '\t':
		case unicode.IsControl(r):
			return false
		}
		head = head[size:]
	}
	return breaks
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}
