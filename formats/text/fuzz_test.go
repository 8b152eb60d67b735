package text

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readBoth reads body as a file named name whole (one unit) and cut into
// ranges of unit bytes. Neither may panic; where both succeed they must
// deliver the same rows, and where the cut one fails the whole one may
// not have succeeded silently with rows the cut one lost.
func readBoth(t *testing.T, name string, body []byte, unit int64, o Options) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
		t.Fatal(err)
	}
	o.SampleRecords = 3 // so that quoted line ends are met past the sample too
	whole := o
	whole.UnitBytes = 1 << 40
	a, errA := readAll(t, whole, nil, dir)
	cut := o
	cut.UnitBytes = unit
	b, errB := readAll(t, cut, nil, dir)
	if errA == nil && errB == nil && a.String() != b.String() {
		t.Fatalf("whole and cut into %d-byte ranges differ:\n%q\n%q", unit, a.String(), b.String())
	}
	// The counting pass must agree with the rows a whole read delivers.
	counted := cut
	counted.Count = true
	c, errC := readAll(t, counted, nil, dir)
	if errA == nil && errC == nil && a.String() != c.String() {
		t.Fatalf("whole and counted differ:\n%q\n%q", a.String(), c.String())
	}
}

func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n3,4\n",
		"a,b\r\n1,\"x,y\"\r\n\r\n2,\"q\"\"q\"\n",
		"a\n\"multi\nline\"\n2\n",
		"# c\na,b\n#x\n1,2",
		"a,b\n1,\"open\n",
		"a,b\r1,2\r3,4",
		"a,b\n1,2,3\n4\n",
		// Shapes the sniffer decides on (sniff.go): other delimiters,
		// quotes and escapes, no header, one line.
		"a;b\n1;\"x;y\"\n2;3,5\n",
		"a|b\n1|x,y\n",
		"a\tb\n1\t\"x\ty\"\n",
		"a;b\n1;'p;q'\n",
		"a,b\n1,\"p\\\"q\"\n2,\"r\"\n",
		"1,2\n3,4\n",
		"1,2.5,x\n",
		"x,1\ny,2\n",
		",\n1,2\n",
		// DuckDB's readings: blank lines of a one-column file, a comment
		// prefix, stray quotes, a preamble, spaces around quotes, a
		// trailing delimiter.
		"w\nx\n\ny\n\r\n\nz",
		"# c\na;b\n1;2 # x\n#\n3;\"4#\"\n",
		"id,t\n1,a \"b\n2,\"c\" d\n",
		"notes\nmore\na,b\n1,2\n",
		"a,b\n1, \"x,y\"  ,\n",
		"a|b\n1|2|\n3|4|\n",
	} {
		f.Add([]byte(s), uint8(3), false)
	}
	// Ragged records read with NullPadding (unit's bit 64 sets it): short
	// ones padded, a long one, a short quoted one, a detected pipe.
	for _, s := range []string{
		"a,b,c\n1,x,2.5\n2\n3,y\n",
		"a,b\n1,2,3\n4\n",
		"a,b,c\n1,\"x\ny\"\n2\n",
		"a|b|c\n1|x|2\n3\n",
		"a,b\n\n1\n",
	} {
		f.Add([]byte(s), uint8(3|64), false)
	}
	// Invalid UTF-8 in header names and values, with ReplaceInvalidUTF8
	// (unit's bit 128) and without.
	for _, s := range []string{"a,caf\xe9\n1,x\xe9\n", "\xff\xfe,b\n1,\"\xc3\"\n"} {
		f.Add([]byte(s), uint8(3), false)
		f.Add([]byte(s), uint8(3|128), false)
	}
	// Dates, times and timestamps in DuckDB's forms, changing form past
	// the head sample (3 records) so that the stretches sampled after it
	// widen the column.
	for _, s := range []string{
		"d,t,ts\n01-02-2000,5:40,2020-01-01 10:00:00+02\n13-01-2000,05:40:33.5,2020-01-01T10:00:00Z\n",
		"d\n1/2/2000\n1/3/2000\n1/4/2000\n1/5/2000\n1/13/2000\n",
		"a\n1\n2\n3\n4\n5.5\nx\n",
		"a,b\n01-01-68,2005-10-3\n31-12-99,2005-1-13 1:02:03\n2000.01.02,24:00\n",
	} {
		f.Add([]byte(s), uint8(3), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, unit uint8, comment bool) {
		o := Options{NullPadding: unit&64 != 0, ReplaceInvalidUTF8: unit&128 != 0}
		if comment {
			o.Comment = '#'
		}
		readBoth(t, "f.csv", body, int64(unit%64)+1, o)
	})
}

func FuzzJSONLines(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"a\":2.5,\"b\":\"x\"}\n",
		"{\"a\":[1,2],\"s\":{\"k\":null}}\r\n\n  \n{\"a\":[]}",
		"{\"a\":1}\n{\"a\":\"x\"}\n",
		"[1]\n",
		"{\"a\":\"\\u00e9\\n\"}\n",
		"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4.5,\"late\":true}\n",
	} {
		f.Add([]byte(s), uint8(5))
	}
	// Invalid UTF-8 in strings and keys, with ReplaceInvalidUTF8 (unit's
	// bit 128) and without.
	for _, s := range []string{"{\"a\":\"caf\xe9\"}\n{\"a\":\"ok\"}\n", "{\"k\xff\":[\"\xc3\"]}\n"} {
		f.Add([]byte(s), uint8(5))
		f.Add([]byte(s), uint8(5|128))
	}
	f.Fuzz(func(t *testing.T, body []byte, unit uint8) {
		readBoth(t, "f.jsonl", body, int64(unit%64)+1, Options{ReplaceInvalidUTF8: unit&128 != 0})
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		"[{\"a\":1},{\"a\":2}]",
		"{\"a\":1} {\"a\":2}",
		"[{\"a\":1},",
		"[]",
		"[{\"a\":{\"b\":[1,null]}}]",
		"[{\"a\":\"caf\xe9\"},{\"k\xff\":1}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f.json"), body, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = readAll(t, Options{}, nil, dir) // any error, no panic, no leak
		_, _ = readAll(t, Options{BadRows: BadRowsSkip}, nil, dir)
		_, _ = readAll(t, Options{ReplaceInvalidUTF8: true}, nil, dir)
	})
}

// cutsAgree checks that the sniffer's scan (sniffScan) and the tokenizer
// cut body into rows of the same field counts under d, where both read it:
// the sniffer decides on the counts the read then meets. A comment prefix
// is left out (DuckDB's scan marks some rows after a closing quote as
// comments, which the read keeps).
func cutsAgree(t *testing.T, d dialect, body []byte) {
	sc := newSniffScan(d, body, true)
	var counts []int
	for !sc.finished && !sc.failed {
		sc.chunk()
		for _, r := range sc.rows() {
			counts = append(counts, r.cols)
		}
	}
	if sc.failed {
		return
	}
	tk := &tokenizer{src: &source{buf: body}, d: d}
	var got []int
	for {
		ok, err := tk.next()
		if err != nil {
			var se *syntaxError
			if errors.As(err, &se) && (se.msg == "escape at the end of the file" ||
				se.msg == errUnclosed && sc.prev == stUnquoted && sc.cur == stQuoted ||
				strings.HasPrefix(se.msg, fmt.Sprintf("unexpected %q after a closing quote", rune(d.quote)))) {
				// DuckDB's scan ends a field open at the end after an
				// escape or a doubled quote, and takes a quote after a
				// closing quote and spaces for a doubled one; the
				// tokenizer refuses them.
				return
			}
			t.Fatalf("%s: the sniffer cuts %q into rows of %v fields, the tokenizer fails: %v", d, body, counts, err)
		}
		if !ok {
			break
		}
		got = append(got, len(tk.fields))
	}
	if !slices.Equal(got, counts) {
		t.Fatalf("%s: %q: the sniffer cuts rows of %v fields, the tokenizer %v", d, body, counts, got)
	}
}

// sniffDialects are the dialects cutsAgree tries, by index.
var sniffDialects = func() []dialect {
	var out []dialect
	for _, qe := range sniffQuoteEscapes {
		for _, delim := range sniffDelims {
			out = append(out, dialect{delim: delim, quote: qe[0], esc: qe[1]})
		}
	}
	return out
}()

// Random bodies of the bytes that matter to a dialect: the sniffer's cut
// and the tokenizer's agree on every one of them.
func TestSniffCutsAgree(t *testing.T) {
	const alphabet = "ab1 ,;|\t\"'\\\n\r"
	rng := rand.New(rand.NewPCG(3, 4))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		body := make([]byte, rng.IntN(24))
		for i := range body {
			body[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cutsAgree(t, sniffDialects[rng.IntN(len(sniffDialects))], body)
	}
}

// FuzzSniff: detecting the dialect of any head neither panics nor hangs,
// gives a dialect the read can use (the tokenizer reads the head with it,
// or reports a syntax error), and the sniffer's cut of rows agrees with the
// tokenizer's under any candidate dialect.
func FuzzSniff(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n",
		"# c\na;b\n1;2 # x\n3;4\n",
		"id,text\n1,she said \"hi\n2,\"q\" x\n",
		"a,b\n1, \"x,y\"\n",
		"\n\nword\nx\n\ny\n",
		"some notes\nmore,notes\na,b,c\n1,2,3\n",
		"a|b\n1|2|\n3|4|\n",
		"\"a\"\"b\",'c'\r\n\"\\\"\",x\r\n",
		"a,b\r1,2\r\r3,4",
	} {
		f.Add([]byte(s), uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, head []byte, pick uint8, cut bool) {
		fm := New(CSV, Options{NullPadding: pick&128 != 0})
		sn := fm.sniffDialect(head, !cut)
		if sn.skip < 0 || sn.cols < 0 || sn.d.delim == 0 {
			t.Fatalf("sniffed %+v", sn)
		}
		tk := &tokenizer{src: &source{buf: head}, d: sn.d}
		skipLines(tk, sn.skip)
		for {
			ok, err := tk.next()
			if err != nil {
				var se *syntaxError
				if !errors.As(err, &se) {
					t.Fatalf("%s: %v", sn.d, err)
				}
				break
			}
			if !ok {
				break
			}
		}
		cutsAgree(t, sniffDialects[int(pick)%len(sniffDialects)], head)
	})
}
