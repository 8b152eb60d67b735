package text

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
)

// meta is what Inspect and Settle learn of a file.
type meta struct {
	comp compression
	// names are the file's columns, in its order (CSV fields, JSON keys
	// of the sample).
	names []string
	// bounds are the units' byte ranges: unit i is [bounds[i],
	// bounds[i+1]). A split file's first unit starts after the header; a
	// whole file's is [0, size).
	bounds []int64
	split  bool
	// whole says why a plain CSV or JSON Lines file is one unit, for
	// inspect; "" if it is split or small.
	whole string
	// dataLine is the line the first unit of a split file starts at.
	dataLine int64
	// csvTypes and jsonTypes are the types the sample suggests, by column;
	// guesses what the CSV sample knows of each column (with the orders
	// of its dates' fields, which the read needs too).
	csvTypes []arrow.DataType
	guesses  []guess
	// raw and seen are the guesses before a file's date orders are
	// settled (fileForms), and whether each column had a value: the
	// stretches sampled across the file (spread.go) narrow them on.
	raw  []guess
	seen []bool
	// sampledTo is where the records of the head sample end: the file's
	// size if it read them all.
	sampledTo int64
	// shared are the date orders of the sampled files' columns, by name,
	// for a column this file's own sample has no date in (its head all
	// null, say) while the dataset reads it as dates.
	shared map[string]guess
	// d is the dialect the file is read with; header whether its first
	// record names the columns; sniffed whether it had a record to tell
	// (as given or detected, see sniff.go).
	d       dialect
	header  bool
	sniffed bool
	// skip is the lines skipped before the header (or the first record):
	// a preamble, as detected. dataStart is where the records after the
	// header start, in the decompressed bytes.
	skip      int
	dataStart int64
	// first is the first record of a file whose detection found no
	// header: the stretches sampled across the file may make it one.
	first     *firstRecord
	jsonType  *jtype
	sampleErr error
	// rowStarts[i] is the file row unit i starts at, once counted.
	rowStarts []int64
	// unitSkipped[i] is the bad rows the counting pass skipped in unit i
	// (BadRowsSkip), for reads in rows to report (ownedSkips).
	unitSkipped []int64
}

// Whole says why a plain CSV or JSON Lines file is read as one unit ("" if
// it is split into byte ranges, or not a file that could be): inspect
// shows it.
func Whole(f *formats.Fragment) string {
	if m, ok := f.Meta.(*meta); ok {
		return m.whole
	}
	return ""
}

// open returns a source over the file's (decompressed) bytes from data,
// which holds the stored bytes from the start.
func (m *meta) open(data io.Reader) (*source, func(), error) {
	src := &source{step: 1 << 20}
	closeFn := func() {}
	switch m.comp {
	case gzipped:
		zr, err := gzip.NewReader(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %w", formats.ErrCorrupt, err)
		}
		src.r = zr
	case zstded:
		zr, err := zstd.NewReader(data, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %w", formats.ErrCorrupt, err)
		}
		src.r, closeFn = zr, zr.Close
	default:
		src.r = data
	}
	return src, closeFn, nil
}

// dialect is the dialect the options give, before detection.
func (f *Format) dialect() dialect {
	o := f.opts
	if f.kind == JSONLines {
		return dialect{lines: true}
	}
	return dialect{delim: o.Delimiter, quote: o.Quote, esc: o.Escape, comment: o.Comment}
}

func (f *Format) nulls() [][]byte {
	out := make([][]byte, len(f.opts.NullStrings))
	for i, s := range f.opts.NullStrings {
		out[i] = []byte(s)
	}
	return out
}

// Inspect reads the head of the file: the header, and a sample of records
// that types are inferred from (see Settle), and cuts a plain CSV or JSON
// Lines file into byte ranges.
func (f *Format) Inspect(ctx context.Context, fr *formats.Fragment, _ []string) error {
	if f.opts.Header && f.opts.NoHeader {
		return fmt.Errorf("%s: text: Options.Header and Options.NoHeader are both set", fr.URL)
	}
	comp, _ := splitName(fr.URL)
	m := &meta{comp: comp, bounds: []int64{0, fr.Size}, dataLine: 1}
	stored := io.NewSectionReader(fr.Source.ReaderAt(ctx), 0, fr.Size)
	src, closeSrc, err := m.open(stored)
	if err != nil {
		return err
	}
	defer closeSrc()
	var dataStart int64
	switch f.kind {
	case CSV, TSV, JSONLines:
		dataStart, err = f.sample(src, m)
		m.dataStart = dataStart
	case JSON:
		err = f.sampleJSON(src, m)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if comp == plain && f.kind != JSON && m.whole == "" && fr.Size-dataStart > f.opts.UnitBytes {
		m.split = true
		m.bounds = m.bounds[:0]
		for at := dataStart; at < fr.Size; at += f.opts.UnitBytes {
			m.bounds = append(m.bounds, at)
		}
		m.bounds = append(m.bounds, fr.Size)
		if !f.opts.Count { // the counting pass scans the file itself
			if err := f.settleCuts(ctx, fr, m); err != nil {
				return err
			}
		}
	}
	fr.Units = make([]formats.Unit, len(m.bounds)-1)
	for i := range fr.Units {
		fr.Units[i] = formats.Unit{Rows: -1, Offset: m.bounds[i], Bytes: m.bounds[i+1] - m.bounds[i]}
	}
	fr.Rows = -1
	fr.Meta = m
	if comp == plain && f.kind != JSON && dataStart >= fr.Size {
		// Nothing after the header: no rows, known without counting, so
		// that an empty file is an empty dataset, not one of unknown size.
		if err := f.setCounts(fr, m, []int64{0}); err != nil {
			return err
		}
	}
	// A provisional schema; Settle sets the dataset's.
	fields := make([]arrow.Field, len(m.names))
	for i, n := range m.names {
		fields[i] = arrow.Field{Name: n, Type: arrow.BinaryTypes.String, Nullable: true}
	}
	fr.Schema = arrow.NewSchema(fields, nil)
	return nil
}

// sample reads a CSV file's header and SampleRecords records, or a JSON
// Lines file's, and returns where the records after the header start. For
// CSV it first detects the dialect and then whether there is a header,
// where the options do not say (sniff.go).
func (f *Format) sample(src *source, m *meta) (int64, error) {
	o := f.opts
	m.d = f.dialect()
	csv := f.kind != JSONLines
	t := &tokenizer{src: src, d: m.d}
	blankRows := false
	nulls := f.nulls()
	isNull := func(v []byte, quoted bool) bool { return isNullValue(v, quoted, nulls) }
	if csv {
		for len(src.buf) < sniffBytes && src.r != nil {
			if _, err := src.more(0); err != nil {
				return 0, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
			}
		}
		sn := f.sniffDialect(src.buf, src.r == nil)
		m.d, m.skip = sn.d, sn.skip
		t.d = sn.d
		if bytes.HasPrefix(src.buf, bom) {
			t.pos = len(bom)
		}
		if !skipLines(t, sn.skip) {
			m.skip = 0
		}
		// Blank lines are rows of null in a file of one column, once
		// the first record is read.
		blankRows = sn.cols == 1 && isNull(nil, false)
	}
	var guesses []guess
	var seen []bool
	// The first record, kept until the records below say whether it is a
	// header (or read as one where Header says so).
	var first [][]byte
	var firstQuoted []bool
	var firstStart, afterFirst, firstLine, firstOwnLine int64
	firstMultiline := false
	below := 0
	records := o.SampleRecords
	if csv {
		records++ // the first, and SampleRecords below it
	}
	for n := 0; n < records; n++ {
		ok, err := t.next()
		if err != nil {
			if first == nil && csv && !o.NoHeader {
				return 0, fmt.Errorf("%w: header: %w", formats.ErrCorrupt, err)
			}
			if errors.Is(err, errRecordTooLarge) || src.r != nil {
				return 0, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
			}
			// A broken record in the sample is reported by the read that
			// meets it, which knows whether bad rows are skipped.
			m.sampleErr = err
			break
		}
		if !ok {
			m.sampledTo = math.MaxInt64 // every record
			break
		}
		m.sampledTo = t.end
		if csv && first == nil {
			for _, v := range t.fields {
				first = append(first, bytes.Clone(v))
			}
			firstQuoted = slices.Clone(t.quoted)
			firstStart, afterFirst, firstLine, firstMultiline = t.start, t.end, t.consumed+1, t.multiline
			firstOwnLine = t.line
			t.d.blankRows = blankRows
			continue
		}
		if t.multiline && m.whole == "" {
			m.whole = fmt.Sprintf("a quoted field holds a line end (record at byte %d), so record boundaries cannot be found from an arbitrary byte", t.start)
		}
		if f.kind == JSONLines {
			jt, err := f.inferSampled(t.fields[0])
			if err != nil {
				m.sampleErr = fmt.Errorf("line %d, byte %d: %w", t.line, t.start, err)
				continue
			}
			if m.jsonType == nil {
				m.jsonType = jt
			} else {
				m.jsonType.merge(jt)
			}
			continue
		}
		below++
		guesses, seen = observeRecord(guesses, seen, t.fields, t.quoted, isNull)
	}
	if f.kind == JSONLines {
		m.names = m.jsonType.keys()
		if m.names == nil && m.sampleErr != nil {
			return 0, fmt.Errorf("%w: no record of the sample reads as a JSON object: %w", formats.ErrCorrupt, m.sampleErr)
		}
		return 0, nil
	}
	var dataStart int64
	if first != nil {
		m.sniffed = true
		m.d.blankRows = blankRows
		switch {
		case o.Header:
			m.header = true
		case o.NoHeader:
		default:
			m.header = hasHeader(first, func(i int) bool { return isNull(first[i], firstQuoted[i]) }, guesses, seen, below)
		}
		if m.header {
			names, err := headerNames(first, o.ReplaceInvalidUTF8)
			if err != nil {
				return 0, err
			}
			m.names = names
			dataStart = afterFirst
			m.dataLine = firstLine
			if firstMultiline {
				m.whole = fmt.Sprintf("the header holds a quoted line end (byte %d)", firstStart)
			}
		} else {
			if !o.NoHeader {
				m.first = &firstRecord{fields: first, quoted: firstQuoted, end: afterFirst, line: firstLine}
			}
			for i := range first {
				m.names = append(m.names, columnName(len(first), i))
			}
			// The records start at the first: after a preamble skipped,
			// or a byte order mark, not at the file's first byte.
			dataStart = firstStart
			m.dataLine = firstOwnLine
			guesses, seen = observeRecord(guesses, seen, first, firstQuoted, isNull)
			if firstMultiline {
				m.whole = fmt.Sprintf("a quoted field holds a line end (record at byte %d), so record boundaries cannot be found from an arbitrary byte", firstStart)
			}
		}
	}
	m.raw, m.seen = guesses, seen
	m.settleTypes()
	return dataStart, nil
}

// firstRecord is a file's first record, where it was taken for data.
type firstRecord struct {
	fields [][]byte
	quoted []bool
	// end is where the record ends, line the line after it.
	end, line int64
}

// recheckHeader takes the first record of a file for a header after all,
// where the types the whole sample gives no longer fit it (DuckDB
// decides on the header after sampling across the file too: a column
// that turns to text past the head makes its first value a name).
func (f *Format) recheckHeader(fr *formats.Fragment, m *meta) {
	if m.first == nil || m.header {
		return
	}
	nulls := f.nulls()
	first := m.first
	if !hasHeader(first.fields, func(i int) bool { return isNullValue(first.fields[i], first.quoted[i], nulls) }, m.raw, m.seen, 1) {
		return
	}
	names, err := headerNames(first.fields, f.opts.ReplaceInvalidUTF8)
	if err != nil {
		return // a name that cannot be one: the record stays data
	}
	m.names, m.header, m.first = names, true, nil
	m.dataStart, m.dataLine = first.end, first.line
	if m.split {
		m.bounds[0] = first.end
		for len(m.bounds) > 2 && m.bounds[1] <= m.bounds[0] {
			m.bounds = slices.Delete(m.bounds, 1, 2)
		}
		fr.Units = make([]formats.Unit, len(m.bounds)-1)
		for i := range fr.Units {
			fr.Units[i] = formats.Unit{Rows: -1, Offset: m.bounds[i], Bytes: m.bounds[i+1] - m.bounds[i]}
		}
	}
	m.settleTypes()
}

// settleTypes sets a CSV file's types from its sample's guesses.
func (m *meta) settleTypes() {
	for len(m.raw) < len(m.names) {
		m.raw, m.seen = append(m.raw, gAll), append(m.seen, false)
	}
	m.guesses = slices.Clone(m.raw)
	fileForms(m.guesses, m.seen)
	m.csvTypes = make([]arrow.DataType, len(m.names))
	for i := range m.names {
		m.csvTypes[i] = m.guesses[i].csvType(m.seen[i]) // no value: null, no say
	}
}

// observeRecord narrows the guesses of a CSV sample's columns by one
// record's values, growing them to its fields.
func observeRecord(guesses []guess, seen []bool, fields [][]byte, quoted []bool, isNull func([]byte, bool) bool) ([]guess, []bool) {
	for len(guesses) < len(fields) {
		guesses, seen = append(guesses, gAll), append(seen, false)
	}
	for i, v := range fields {
		if isNull(v, quoted[i]) {
			continue
		}
		guesses[i] = guesses[i].observe(v)
		seen[i] = true
	}
	return guesses, seen
}

// guess is what the sample knows of column i: gAll (nothing ruled out) if
// it had no value for it.
func (m *meta) guess(i int) guess {
	if i < len(m.guesses) {
		return m.guesses[i]
	}
	return gAll
}

// forms are the orders column i reads dates and timestamps in: its own
// sample's, else those of the sampled file that gave the column its type.
func (m *meta) forms(i int) (date, ts guess) {
	g := m.guess(i)
	seen := i < len(m.seen) && m.seen[i]
	if i < len(m.names) && (!seen || (!isDate(g&gDate) && !isDate(g>>tsShift))) {
		if sg, ok := m.shared[m.names[i]]; ok {
			g = sg
		}
	}
	return g.dateForm(), g.tsForm()
}

// shareForms gives every file the date orders of the sampled files'
// columns (the first that has dates in a column).
func shareForms(sampled, all []*formats.Fragment) {
	shared := map[string]guess{}
	for _, fr := range sampled {
		m := fr.Meta.(*meta)
		for i, n := range m.names {
			g := m.guess(i)
			if _, ok := shared[n]; !ok && i < len(m.seen) && m.seen[i] && (isDate(g&gDate) || isDate(g>>tsShift)) {
				shared[n] = g
			}
		}
	}
	for _, fr := range all {
		fr.Meta.(*meta).shared = shared
	}
}

func (t *jtype) keys() []string {
	if t == nil {
		return nil
	}
	return t.names
}

// sampleJSON infers a .json file's types from its first SampleRecords
// records and, as spread.go samples CSV and JSON Lines files, from those
// that start in stretches spread over the rest. The file is read whole for
// it (a .json file is one unit); past the head its records are found by a
// scan of their nesting and strings only (skipValue), as no record can be
// found from an arbitrary byte of a JSON array.
func (f *Format) sampleJSON(src *source, m *meta) error {
	data, err := drain(src)
	if err != nil {
		return err
	}
	n := 0
	rest := int64(-1) // where the records after the head start
	infer := func(rec []byte, off int64) {
		jt, err := f.inferSampled(rec)
		switch {
		case err != nil && m.sampleErr == nil:
			m.sampleErr = fmt.Errorf("record %d, byte %d: %w", n, off, err)
		case err != nil:
		case m.jsonType == nil:
			m.jsonType = jt
		default:
			m.jsonType.merge(jt)
		}
	}
	err = jsonRecords(data, func(rec []byte, off int64) (bool, error) {
		if n == f.opts.SampleRecords {
			rest = off
			return false, nil
		}
		infer(rec, off)
		n++
		return true, nil
	})
	if err != nil && m.sampleErr == nil {
		m.sampleErr = err
	}
	if rest >= 0 {
		starts, span := spreadStarts(rest, int64(len(data)))
		walkJSON(data, int(rest), func(rec []byte, off int64) bool {
			for len(starts) > 0 && off >= starts[0]+span {
				starts = starts[1:]
			}
			if len(starts) > 0 && off >= starts[0] {
				infer(rec, off)
			}
			n++
			return len(starts) > 0
		})
	}
	m.names = m.jsonType.keys()
	if m.names == nil && m.sampleErr != nil {
		return fmt.Errorf("%w: no record of the sample reads as a JSON object: %w", formats.ErrCorrupt, m.sampleErr)
	}
	return nil
}

// walkJSON calls fn with the records of a .json file from byte i (between
// two records) on, until fn returns false, the records end, or one is
// malformed (the read reports it).
func walkJSON(data []byte, i int, fn func(rec []byte, off int64) bool) {
	for {
		i = skipWS(data, i)
		if i < len(data) && data[i] == ',' {
			i = skipWS(data, i+1)
		}
		if i >= len(data) || data[i] == ']' {
			return
		}
		j, err := skipValue(data, i)
		if err != nil || j <= i || !fn(data[i:j], int64(i)) {
			return
		}
		i = j
	}
}

// inferSampled infers a sampled JSON record's type. A record that is not
// UTF-8 has no say unless ReplaceInvalidUTF8 reads it (its keys as the read
// will name them): encoding/json would replace its bytes silently, and the
// read reports it as a bad row.
func (f *Format) inferSampled(rec []byte) (*jtype, error) {
	rec, err := validUTF8(rec, f.opts.ReplaceInvalidUTF8)
	if err != nil {
		return nil, err
	}
	return inferRecord(rec)
}

// drain reads what is left of a source.
func drain(src *source) ([]byte, error) {
	for {
		ok, err := src.more(0)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
		if !ok {
			return src.buf, nil
		}
	}
}

// columnName names column i of n that has no name, as DuckDB does:
// column0, column1, ..., the number padded with zeros to the width of the
// last (column00 to column10 for 11 columns).
func columnName(n, i int) string {
	return fmt.Sprintf("column%0*d", len(strconv.Itoa(max(n-1, 0))), i)
}

// headerNames names the columns from a header record as DuckDB does: a
// name is trimmed of spaces, an empty one becomes columnN (columnName),
// and one that repeats an earlier name, in any case, gets a suffix
// (a, A_1, a_2), so every column can be selected by name.
func headerNames(fields [][]byte, replace bool) ([]string, error) {
	names := make([]string, len(fields))
	count := map[string]int{} // by lower case: how often a name came
	for i, f := range fields {
		if i == 0 {
			f = bytes.TrimPrefix(f, bom)
		}
		// A name that is not UTF-8 is treated as a value that is not:
		// replaced where asked, else an error (not a silent U+FFFD).
		if !utf8.Valid(f) {
			if !replace {
				return nil, fmt.Errorf("%w: the header's column %d of %d, %q, is not valid UTF-8 (text.Options.ReplaceInvalidUTF8, --invalid-utf8 replace, reads it with U+FFFD)", formats.ErrCorrupt, i+1, len(fields), clip(f))
			}
			f = []byte(strings.ToValidUTF8(string(f), "\uFFFD"))
		}
		n := string(f)
		if strings.TrimSpace(n) == "" {
			n = columnName(len(fields), i)
		}
		n = strings.TrimFunc(n, func(r rune) bool { return unicode.Is(unicode.Zs, r) })
		for {
			k, ok := count[strings.ToLower(n)]
			if !ok {
				break
			}
			count[strings.ToLower(n)] = k + 1
			n = fmt.Sprintf("%s_%d", n, k+1)
		}
		count[strings.ToLower(n)] = 0
		names[i] = n
	}
	return names, nil
}

// Settle gives the files one schema: Options.Schema if set, else the
// types the samples of the first SampleFiles files suggest, widened across
// them; later files take those types for the columns they share. It then
// runs the counting pass if Options.Count asks for one.
func (f *Format) Settle(ctx context.Context, frags []*formats.Fragment) error {
	o := f.opts
	if err := f.spreadAll(ctx, frags); err != nil {
		return err
	}
	if err := f.sameDialect(frags); err != nil {
		return err
	}
	types := map[string]arrow.DataType{}
	from := map[string]string{}
	if o.Schema == nil {
		for _, fr := range frags[:min(len(frags), o.SampleFiles)] {
			m := fr.Meta.(*meta)
			own, err := f.sampleTypes(m)
			if err != nil {
				return fmt.Errorf("%s: %w: %w", fr.URL, formats.ErrSchema, err)
			}
			for i, n := range m.names {
				t := own[i]
				prev, ok := types[n]
				if !ok {
					types[n], from[n] = t, fr.URL
					continue
				}
				w, ok := widenText(prev, t, o.WidenToString)
				if !ok {
					return fmt.Errorf("%w: column %q is %s in %s but %s in %s (set WidenToString to read it as text)", formats.ErrSchema, n, prev, from[n], t, fr.URL)
				}
				types[n] = w
			}
		}
	} else {
		for _, fl := range o.Schema.Fields() {
			if f.kind != JSON && f.kind != JSONLines && !supported(fl.Type) {
				return fmt.Errorf("%w: column %q: type %s is not supported in CSV files", formats.ErrSchema, fl.Name, fl.Type)
			}
			types[fl.Name] = fl.Type
		}
	}
	for _, fr := range frags {
		m := fr.Meta.(*meta)
		if o.Schema != nil && (f.kind == JSON || f.kind == JSONLines || !m.header) {
			// Columns come from the schema: by name for JSON, by position
			// for CSV without a header.
			if f.kind != JSON && f.kind != JSONLines && len(m.names) > 0 && len(m.names) != o.Schema.NumFields() {
				return fmt.Errorf("%s: %w: its records have %d fields, the schema %d", fr.URL, formats.ErrSchema, len(m.names), o.Schema.NumFields())
			}
			m.names = nil
			for _, fl := range o.Schema.Fields() {
				m.names = append(m.names, fl.Name)
			}
		}
		var own []arrow.DataType
		fields := make([]arrow.Field, len(m.names))
		for i, n := range m.names {
			t, ok := types[n]
			if !ok {
				if o.Schema != nil {
					return fmt.Errorf("%s: %w: column %q is not in the given schema", fr.URL, formats.ErrSchema, n)
				}
				if own == nil {
					var err error
					if own, err = f.sampleTypes(m); err != nil {
						return fmt.Errorf("%s: %w: %w", fr.URL, formats.ErrSchema, err)
					}
				}
				t = own[i]
			}
			if t.ID() == arrow.NULL {
				t = arrow.BinaryTypes.String // no file had a value
			}
			fields[i] = arrow.Field{Name: n, Type: t, Nullable: true}
		}
		fr.Schema = arrow.NewSchema(fields, nil)
	}
	keyless(frags)
	shareForms(frags[:min(len(frags), o.SampleFiles)], frags)
	if o.Count {
		return f.countAll(ctx, frags)
	}
	return nil
}

// sampleTypes is the arrow type of each of the file's columns, as its
// sample suggests.
func (f *Format) sampleTypes(m *meta) ([]arrow.DataType, error) {
	if f.kind == CSV || f.kind == TSV {
		return m.csvTypes, nil
	}
	out := make([]arrow.DataType, len(m.names))
	if m.jsonType == nil {
		return out, nil
	}
	for i, n := range m.names {
		t, err := m.jsonType.fields[n].arrowType(n, f.opts.WidenToString)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// widenText is the type two files' inferred types of a column widen to:
// equal types stay, integers and floats become floats, a date and a
// timestamp a timestamp, structs and lists of the same shape merge field
// by field; anything else is text if toString, a conflict otherwise.
func widenText(a, b arrow.DataType, toString bool) (arrow.DataType, bool) {
	if arrow.TypeEqual(a, b) {
		return a, true
	}
	if a.ID() == arrow.NULL {
		return b, true
	}
	if b.ID() == arrow.NULL {
		return a, true
	}
	isNum := func(t arrow.DataType) bool { return t.ID() == arrow.INT64 || t.ID() == arrow.FLOAT64 }
	switch {
	case isNum(a) && isNum(b):
		return arrow.PrimitiveTypes.Float64, true
	case (a.ID() == arrow.DATE32 && b.ID() == arrow.TIMESTAMP) || (a.ID() == arrow.TIMESTAMP && b.ID() == arrow.DATE32):
		return &arrow.TimestampType{Unit: arrow.Microsecond}, true
	}
	if toString {
		return arrow.BinaryTypes.String, true
	}
	return nil, false
}

// countAll runs the counting pass over every file, from the plan cache
// where it holds the file's counts.
func (f *Format) countAll(ctx context.Context, frags []*formats.Fragment) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, fr := range frags {
		g.Go(func() error {
			m := fr.Meta.(*meta)
			key := fr.CacheKey("text-count2/" + f.fingerprint(fr))
			var cached unitCounts
			if c := fr.Cache(); c != nil {
				if v, err := c.Get(gctx, key); err == nil && json.Unmarshal(v, &cached) == nil && cached.fits(len(fr.Units)) {
					m.unitSkipped = cached.Skipped
					return f.setCounts(fr, m, cached.Rows)
				}
			}
			counts, err := f.count(gctx, fr)
			if err != nil {
				return fmt.Errorf("%s: counting pass: %w", fr.URL, err)
			}
			if c := fr.Cache(); c != nil {
				if v, err := json.Marshal(unitCounts{Rows: counts, Skipped: m.unitSkipped}); err == nil {
					_ = c.Set(gctx, key, v) // a cache that fails costs a recount, no more
				}
			}
			return f.setCounts(fr, m, counts)
		})
	}
	return g.Wait()
}

func (f *Format) setCounts(fr *formats.Fragment, m *meta, counts []int64) error {
	m.rowStarts = make([]int64, len(counts)+1)
	for i, n := range counts {
		fr.Units[i].Rows = n
		m.rowStarts[i+1] = m.rowStarts[i] + n
	}
	fr.Rows = m.rowStarts[len(counts)]
	return nil
}

// fingerprint names what a file's counts depend on besides its bytes.
func (f *Format) fingerprint(fr *formats.Fragment) string {
	o := f.opts
	m := fr.Meta.(*meta)
	s := fmt.Sprintf("%s|%q|%q|%q|%q|%t|%q|%t|%d|%d|%s", f.kind, m.d.delim, m.d.quote, m.d.esc, m.d.comment, m.header, o.NullStrings, o.NullPadding, o.BadRows, o.UnitBytes, fr.Schema)
	return s
}

// count counts each unit's rows: with record boundaries only where every
// record that is cut is a row (bad rows fail the read), by decoding where
// bad rows are skipped or records are JSON values. A split file is scanned
// whole from its start, so its record boundaries are known for sure: if a
// quoted line end lies past a unit's start, the file becomes one unit.
func (f *Format) count(ctx context.Context, fr *formats.Fragment) ([]int64, error) {
	m := fr.Meta.(*meta)
	r := &formats.Read{Range: formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(fr.Units)}, Schema: fr.Schema}
	fe, err := f.Fetch(ctx, fr, r)
	if err != nil {
		return nil, err
	}
	boundariesOnly := f.opts.BadRows == BadRowsError && f.kind != JSON
	counts := make([]int64, len(fr.Units))
	u := 0
	cuts := m.bounds[1 : len(m.bounds)-1]
	onRow := func(at int64) {
		for u+1 < len(counts) && at >= m.bounds[u+1] {
			u++
		}
		counts[u]++
	}
	skipped := make([]int64, len(fr.Units))
	onBad := func(at int64) { skipped[m.unitOf(at)]++ }
	ok, err := f.scanWhole(ctx, fr, fe, r, boundariesOnly, onRow, onBad, cuts)
	if err != nil {
		return nil, err
	}
	m.unitSkipped = nil
	if slices.ContainsFunc(skipped, func(n int64) bool { return n > 0 }) {
		m.unitSkipped = skipped
	}
	if !ok {
		var total int64
		for _, n := range counts {
			total += n
		}
		m.split = false
		m.whole = "the counting pass found a quoted line end past the start of a byte range"
		m.bounds = []int64{0, fr.Size}
		fr.Units = []formats.Unit{{Rows: -1, Bytes: fr.Size}}
		if m.unitSkipped != nil {
			var bad int64
			for _, n := range m.unitSkipped {
				bad += n
			}
			m.unitSkipped = []int64{bad}
		}
		return []int64{total}, nil
	}
	return counts, nil
}

// scanWhole counts the rows of r, telling onRow where each starts, and
// reports whether no record holds a line end past one of cuts.
func (f *Format) scanWhole(ctx context.Context, fr *formats.Fragment, fe formats.Buffer, r *formats.Read, boundariesOnly bool, onRow, onBad func(int64), cuts []int64) (bool, error) {
	ok := true
	_, err := f.scanWith(ctx, fr, fe, r, boundariesOnly, nil, func(s *scanner) {
		s.onRow, s.onBad, s.cuts, s.cutsOK = onRow, onBad, cuts, true
	}, func(s *scanner) { ok = s.cutsOK })
	return ok, err
}

// keyless gives a file whose sample found no column (no bytes, a JSON
// array with no object, objects with no key) the columns of the first file
// that has some: as it has no value of them, it reads them as nulls.
// Without this an empty file first in a dataset made the dataset's columns
// none (its rows read as rows of no values), and one later in it was
// refused as lacking them, where an empty file should add nothing.
func keyless(frags []*formats.Fragment) {
	var like *formats.Fragment
	for _, fr := range frags {
		if len(fr.Meta.(*meta).names) > 0 {
			like = fr
			break
		}
	}
	if like == nil {
		return
	}
	for _, fr := range frags {
		if m := fr.Meta.(*meta); len(m.names) == 0 {
			m.names = slices.Clone(like.Meta.(*meta).names)
			fr.Schema = like.Schema
		}
	}
}
