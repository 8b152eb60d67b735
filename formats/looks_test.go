package formats

import (
	"testing"
	"unicode/utf8"
)

func TestLooksLikeText(t *testing.T) {
	for _, c := range []struct {
		head string
		want bool
	}{
		{"id,name\n1,a\n", true},
		{"\xef\xbb\xbfid;name\r\n1;é\r\n", true}, // a BOM, CRLF, accents
		{"a\tb\n1\t2", true},
		{"{\"a\": 1}\n{\"a\": 2}\n", true},
		{"id,name\n1,caf\xc3", true},      // the sample cut inside a character
		{"id,name", false},                // no line break: not enough to tell
		{"", false},                       // nothing
		{"PAR1\x15\x04\x15", false},       // binary
		{"ORC\x0a\x00\n", false},          // control bytes
		{"id,name\n\xff\xfe1,a\n", false}, // invalid UTF-8
		{"a\x00b\nc\n", false},            // NUL
	} {
		if got := LooksLikeText([]byte(c.head)); got != c.want {
			t.Errorf("LooksLikeText(%q) = %v, want %v", c.head, got, c.want)
		}
	}
}

// FuzzLooksLikeText: never panics, and what it calls text is valid UTF-8
// up to a character the sample may have cut.
func FuzzLooksLikeText(f *testing.F) {
	for _, s := range []string{"id,name\n1,a\n", "\xef\xbb\xbfa\r\n", "a\nb\xc3", "PAR1", "\x00\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !LooksLikeText(b) {
			return
		}
		for i := len(b); i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.Valid(b[:i]) {
				return
			}
		}
		t.Errorf("%q called text, but is not UTF-8", b)
	})
}
