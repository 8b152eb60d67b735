package text

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
)

// Dialect and header detection, as DuckDB's sniffer does it (and Python's
// csv.Sniffer, roughly): where the user gives no delimiter, quote or
// escape, each candidate dialect cuts the head of the file into records,
// and the one under which every sampled record has the same number of
// fields, and the most fields, is the file's. A candidate whose quotes do
// not close (or close before a stray byte) is out. Ties go to the first
// candidate in DuckDB's order: ',' '|' ';' tab; '"' before '\''; quotes
// escaped by doubling before '\\'. Where no candidate cuts the head into
// consistent records of two fields or more, the defaults stay (',' '"'
// and doubling), and the read reports what does not fit as it always did.
//
// It runs once per file, at Inspect, over bytes the sample reads anyway;
// the tokenizer's hot path is the same, only its dialect is per file.

// sniffBytes bounds the head of a file the dialect is detected from.
const sniffBytes = 1 << 20

var (
	sniffDelims  = []byte{',', '|', ';', '\t'}
	sniffQuotes  = []byte{'"', '\''}
	sniffEscapes = []byte{0, '\\'}
)

// String says how a dialect reads, for inspect and for errors.
func (d dialect) String() string {
	show := func(c byte) string {
		if c == 0 {
			return "none"
		}
		return fmt.Sprintf("%q", rune(c))
	}
	esc := show(d.esc)
	if d.quote != 0 && (d.esc == 0 || d.esc == d.quote) {
		esc = "doubled quote"
	}
	return fmt.Sprintf("delimiter %s, quote %s, escape %s", show(d.delim), show(d.quote), esc)
}

// sniffDialect picks the dialect of a CSV or TSV file from head, its first
// bytes (all of them if atEOF). What the options give is kept as given.
func (f *Format) sniffDialect(head []byte, atEOF bool) dialect {
	g := f.given
	base := f.dialect()
	delims := []byte{base.delim}
	if g.Delimiter == 0 && f.kind == CSV {
		delims = sniffDelims
	}
	quotes := []byte{base.quote}
	if g.Quote == 0 && !g.NoQuote {
		quotes = sniffQuotes
	}
	escapes := []byte{base.esc}
	if g.Escape == 0 {
		escapes = sniffEscapes
	}
	if !atEOF {
		// The last line may be cut short; a record it starts is left out.
		if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
			head = head[:i+1]
		}
	}
	// A candidate scores its fields twice, plus one if it quotes a field:
	// of two that cut the records alike, the one whose quotes the file
	// uses reads them. A one-field cut counts only where the defaults cut
	// the file so too (a file of one column): elsewhere it means the
	// candidate's delimiter is not the file's.
	baseCols, _ := consistentFields(base, head, atEOF, f.opts.SampleRecords, f.opts.NullPadding)
	best, bestScore := base, 0
	for _, delim := range delims {
		for _, quote := range quotes {
			if quote != base.quote && bytes.IndexByte(head, quote) < 0 {
				continue // reads as the default quote does
			}
			for _, esc := range escapes {
				if quote == 0 && esc != 0 {
					continue
				}
				if esc != base.esc && bytes.IndexByte(head, esc) < 0 {
					continue
				}
				d := dialect{delim: delim, quote: quote, esc: esc, comment: base.comment}
				cols, quoted := consistentFields(d, head, atEOF, f.opts.SampleRecords, f.opts.NullPadding)
				if cols == 0 || (cols == 1 && baseCols != 1) {
					continue
				}
				score := 2 * cols
				if quoted {
					score++
				}
				if score > bestScore {
					best, bestScore = d, score
				}
			}
		}
	}
	return best
}

// consistentFields is the number of fields every record of head has under
// d, or 0 if the records differ in it or d cannot cut them, and whether a
// field was quoted. With pad (NullPadding) a record shorter than the first
// is consistent with it: it is read padded with nulls.
func consistentFields(d dialect, head []byte, atEOF bool, records int, pad bool) (int, bool) {
	t := &tokenizer{src: &source{buf: head}, d: d}
	cols, quoted := 0, false
	for n := 0; n < records; n++ {
		ok, err := t.next()
		if err != nil {
			var se *syntaxError
			if !atEOF && errors.As(err, &se) && se.msg == errUnclosed {
				break // a quoted field that runs past the head
			}
			return 0, false
		}
		if !ok {
			break
		}
		switch {
		case cols == 0:
			cols = len(t.fields)
		case pad && len(t.fields) < cols:
		case len(t.fields) != cols:
			return 0, false
		}
		quoted = quoted || slices.Contains(t.quoted, true)
	}
	return cols, quoted
}

// hasHeader decides, as DuckDB does, whether a CSV file's first record is a
// header, from its values and the guesses of the records below it: it is
// not one if each of its values fits the type of its column, unless every
// column is text (then nothing tells, and a header is the usual case) or
// every value is null. A one-record file is data if any value reads as
// something other than text.
func hasHeader(first [][]byte, isNull func(int) bool, guesses []guess, seen []bool, below int) bool {
	if below == 0 {
		for i, v := range first {
			if !isNull(i) && gAll.observe(v) != 0 {
				return false
			}
		}
		return true
	}
	if len(first) != len(guesses) {
		return true // the rows below are cut otherwise: leave it to the read
	}
	allNull := true
	for i := range first {
		allNull = allNull && isNull(i)
	}
	if allNull {
		return true // as DuckDB: a row of empty names is a header
	}
	allText := true
	for i, v := range first {
		if !seen[i] {
			continue // no value below: no type to fit
		}
		typ := guesses[i].csvType(true)
		if typ.ID() != arrow.STRING {
			allText = false
		}
		if !isNull(i) && !arrow.TypeEqual(guesses[i].observe(v).csvType(true), typ) {
			return true
		}
	}
	return allText
}

// describe says how a CSV file is read: its dialect and whether its first
// record is a header.
func (m *meta) describe() string {
	h := "no header"
	if m.header {
		h = "header"
	}
	return m.d.String() + ", " + h
}

// Dialect says how a CSV or TSV file is read, as detected or given: its
// delimiter, quote, escape and whether its first record is a header; ""
// for other files. inspect shows it.
func Dialect(fr *formats.Fragment) string {
	if m, ok := fr.Meta.(*meta); ok && m.sniffed {
		return m.describe()
	}
	return ""
}

// sameDialect fails unless every CSV file that has a record reads with one
// dialect and header choice: files of one dataset detected otherwise are
// most likely different data, or one file fools the detection.
func (f *Format) sameDialect(frags []*formats.Fragment) error {
	if f.kind != CSV && f.kind != TSV {
		return nil
	}
	var ref *formats.Fragment
	for _, fr := range frags {
		m := fr.Meta.(*meta)
		if !m.sniffed {
			continue
		}
		if ref == nil {
			ref = fr
			continue
		}
		r := ref.Meta.(*meta)
		if m.d != r.d || m.header != r.header {
			return fmt.Errorf("%w: %s reads as %s, but %s as %s: every file of a dataset must read alike (set Options.Delimiter, Quote, Escape, Header or NoHeader; --delimiter, --no-header)",
				formats.ErrSchema, ref.URL, r.describe(), fr.URL, m.describe())
		}
	}
	return nil
}
