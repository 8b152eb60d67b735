package text

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkTokenize cuts a few MB of records, the CSV tokenizer's hot path:
// short unquoted fields, quoted fields with doubled quotes and line ends,
// comment and blank lines between records, and JSON Lines. "stream" reads
// through the source's growing window, as a file is read, rather than from
// one buffer.
func BenchmarkTokenize(b *testing.B) {
	var plain, quoted, commented, lines bytes.Buffer
	for i := range 100_000 {
		fmt.Fprintf(&plain, "%d,%d.%02d,label%d,%d\n", i, i%1000, i%100, i%7, i*31%1009)
		fmt.Fprintf(&quoted, "%d,\"a \"\"quoted\"\" %d\",\"two\nlines\",x\r\n", i, i%13)
		if i%4 == 0 {
			commented.WriteString("# a comment line\n\n")
		}
		fmt.Fprintf(&commented, "%d,%d,label%d\n", i, i%1000, i%7)
		fmt.Fprintf(&lines, "{\"id\":%d,\"x\":%d.5,\"s\":\"label%d\"}\n", i, i%1000, i%7)
	}
	csv := dialect{delim: ',', quote: '"'}
	for _, c := range []struct {
		name   string
		d      dialect
		data   []byte
		stream bool
	}{
		{"plain", csv, plain.Bytes(), false},
		{"plain/stream", csv, plain.Bytes(), true},
		{"quoted", csv, quoted.Bytes(), false},
		{"comments", dialect{delim: ',', quote: '"', comment: '#'}, commented.Bytes(), false},
		{"lines", dialect{lines: true}, lines.Bytes(), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				src := &source{buf: c.data}
				if c.stream {
					src = &source{r: bytes.NewReader(c.data), step: 64 << 10}
				}
				t := &tokenizer{src: src, d: c.d}
				n := 0
				for {
					ok, err := t.next()
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					n++
				}
				if n != 100_000 {
					b.Fatalf("%d records, want 100000", n)
				}
			}
		})
	}
}
