package text

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
)

// ErrBadRow is wrapped (with formats.ErrCorrupt) when a record does not fit
// the schema or cannot be parsed, and BadRows is BadRowsError.
var ErrBadRow = errors.New("bad row")

// errStop ends a scan whose consumer stopped.
var errStop = errors.New("stopped")

// Decode delivers the rows of r's units (or, where counts are known, of
// its rows).
func (f *Format) Decode(ctx context.Context, fr *formats.Fragment, fetched formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		_, err := f.scan(ctx, fr, fetched, r, false, func(b arrow.RecordBatch) bool { return yield(b, nil) })
		if err != nil && !errors.Is(err, errStop) {
			yield(nil, err)
		}
	}
}

// where names a record for an error: its line where the reader knows it,
// its byte offset always (in the decompressed stream for a compressed
// file).
func where(comp compression, line, rec, off int64) string {
	s := ""
	if line > 0 {
		s = fmt.Sprintf("line %d, ", line)
	} else {
		s = fmt.Sprintf("record %d of the range, ", rec)
	}
	if comp != plain {
		return s + fmt.Sprintf("byte %d of the decompressed data", off)
	}
	return s + fmt.Sprintf("byte %d", off)
}

// scan reads r's records. With emit it builds batches and hands them on;
// without, it only counts rows: by record boundaries if boundariesOnly,
// else by parsing every record as a read would (bad rows skipped or
// failing as a read's would).
func (f *Format) scan(ctx context.Context, fr *formats.Fragment, buf formats.Buffer, r *formats.Read, boundariesOnly bool, emit func(arrow.RecordBatch) bool) (int64, error) {
	return f.scanWith(ctx, fr, buf, r, boundariesOnly, emit, nil, nil)
}

// scanWith is scan with hooks on the scanner before and after.
func (f *Format) scanWith(ctx context.Context, fr *formats.Fragment, buf formats.Buffer, r *formats.Read, boundariesOnly bool, emit func(arrow.RecordBatch) bool, before, after func(*scanner)) (int64, error) {
	m, err := metaOf(fr)
	if err != nil {
		return 0, err
	}
	first, end := r.Range.FirstUnit, r.Range.EndUnit
	if first < 0 || end > len(m.bounds)-1 || first > end {
		return 0, fmt.Errorf("text: %s: units [%d, %d) outside the file's %d", fr.URL, first, end, len(m.bounds)-1)
	}
	if first == end {
		return 0, nil
	}
	fe, ok := buf.(*fetched)
	if !ok || fe == nil {
		fb, err := f.Fetch(ctx, fr, r)
		if err != nil {
			return 0, err
		}
		fe = fb.(*fetched)
	}
	// Rows to skip and to deliver, where counts are known.
	skip, limit := int64(0), int64(-1)
	if r.Range.Known() && m.rowStarts != nil {
		skip = r.Range.Start - m.rowStarts[first]
		limit = r.Range.End - r.Range.Start
		if skip < 0 || limit < 0 {
			return 0, fmt.Errorf("text: %s: %v is not within units [%d, %d)", fr.URL, r.Range, first, end)
		}
	}
	mem := r.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	batchRows := max(r.BatchRows, 1)
	if r.BatchRows <= 0 {
		batchRows = 8192
	}
	sc := &scanner{f: f, fr: fr, m: m, r: r, mem: mem, nulls: f.nulls(), batchRows: batchRows, skip: skip, limit: limit, emit: emit, countOnly: emit == nil, boundariesOnly: boundariesOnly, ctx: ctx}
	defer sc.release()
	if before != nil {
		before(sc)
	}
	if f.kind == JSON {
		err = sc.json(fe)
	} else {
		err = sc.records(fe, first, end)
	}
	if after != nil {
		after(sc)
	}
	if err == nil && r.Skipped != nil && limit >= 0 {
		if n := m.ownedSkips(r.Range); n > 0 {
			r.Skipped(n)
		}
	}
	return sc.rows, err
}

// scanner is one scan's state.
type scanner struct {
	ctx       context.Context
	f         *Format
	fr        *formats.Fragment
	m         *meta
	r         *formats.Read
	mem       memory.Allocator
	batchRows int
	// skip rows are parsed and dropped, then limit delivered (-1: all).
	skip, limit    int64
	emit           func(arrow.RecordBatch) bool
	countOnly      bool
	boundariesOnly bool

	// onRow, if set, is told where each row counted starts (at); cuts,
	// if set, are unit bounds a record must not hold a line end past
	// (else cutsOK is cleared): the counting pass scans a file whole.
	onRow  func(at int64)
	onBad  func(at int64) // told where each skipped bad record starts
	at     int64
	cuts   []int64
	cutsOK bool

	nulls   [][]byte // Options.NullStrings
	rows    int64    // rows delivered (or counted)
	pending int      // rows in the builders
	cols    []*column
	flat    *flatJSON
	rb      *array.RecordBuilder
}

// flatRecord decodes a JSON record of scalar columns.
func (s *scanner) flatRecord(rec []byte, at func() string) error {
	rec, err := validUTF8(rec, s.f.opts.ReplaceInvalidUTF8)
	if err != nil {
		return s.bad(at(), err)
	}
	if err := s.flat.parse(rec); err != nil {
		return s.bad(at(), err)
	}
	if s.good() {
		s.flat.commit()
		s.pending++
	}
	return nil
}

func (s *scanner) release() {
	for _, c := range s.cols {
		c.b.Release()
	}
	if s.rb != nil {
		s.rb.Release()
	}
}

// done reports whether the limit is reached.
func (s *scanner) done() bool { return s.limit >= 0 && s.rows >= s.limit }

// bad handles a record that does not fit: skipped and counted, or an
// error.
func (s *scanner) bad(at string, err error) error {
	if s.f.opts.BadRows == BadRowsSkip {
		s.f.skipped.Add(1)
		if s.onBad != nil {
			s.onBad(s.at)
		}
		if s.r.Skipped != nil && s.limit < 0 {
			// A read of whole units reports its own bad rows; one in rows
			// reports its units' from the counting pass (ownedSkips).
			s.r.Skipped(1)
		}
		return nil
	}
	return fmt.Errorf("%w: %w: %s: %s: %w", ErrBadRow, formats.ErrCorrupt, s.fr.URL, at, err)
}

// good counts a row that fit; it reports whether it is delivered (not
// among the rows skipped to reach a known range's start).
func (s *scanner) good() bool {
	if s.skip > 0 {
		s.skip--
		return false
	}
	s.rows++
	if s.onRow != nil {
		s.onRow(s.at)
	}
	return true
}

// flush hands on the rows built so far.
func (s *scanner) flush() error {
	if s.pending == 0 {
		return nil
	}
	n := s.pending
	s.pending = 0
	var b arrow.RecordBatch
	if s.rb != nil {
		b = s.rb.NewRecordBatch()
	} else {
		arrs := make([]arrow.Array, len(s.cols))
		for i, c := range s.cols {
			arrs[i] = c.b.NewArray()
		}
		b = array.NewRecordBatch(s.r.Schema, arrs, int64(n))
		for _, a := range arrs {
			a.Release()
		}
	}
	if s.countOnly {
		b.Release()
		return nil
	}
	if !s.emit(b) {
		return errStop
	}
	return nil
}

// records scans CSV or JSON Lines records of units [first, end).
func (s *scanner) records(fe *fetched, first, end int) error {
	m := s.m
	src := &source{buf: fe.data, base: fe.at, step: 512} // the straddling record's rest
	closeSrc := func() {}
	if m.split {
		// Past the fetched bytes only to finish the straddling record.
		src.r = io.NewSectionReader(s.fr.Source.ReaderAt(s.ctx), fe.at+int64(len(fe.data)), s.fr.Size-fe.at-int64(len(fe.data)))
	} else {
		var err error
		src, closeSrc, err = m.open(bytes.NewReader(fe.data))
		if err != nil {
			return fmt.Errorf("%s: %w", s.fr.URL, err)
		}
	}
	defer closeSrc()
	t := &tokenizer{src: src, d: m.d}
	limitAt := int64(-1) // records starting at or after it belong to the next range
	lineBase := int64(0) // added to the tokenizer's lines; 0: lines unknown
	if m.split {
		limitAt = m.bounds[end]
		start := m.bounds[first]
		if first == 0 {
			t.pos = int(start - fe.at)
			lineBase = m.dataLine - 1
		} else {
			// The first record starts at the first line start at or after
			// the range's start; if there is none before its end, a
			// record longer than the range straddles it and the range
			// owns nothing. The fetched bytes end there, so a range never
			// reads on to find out.
			x := lineStart(src.buf, int(start-src.base), true)
			if x >= len(src.buf) {
				return nil
			}
			t.pos = x
			if src.base+int64(t.pos) >= limitAt {
				return nil // a record longer than the range straddles it
			}
		}
	} else if m.dataStart > 0 {
		// Past the header, or the lines skipped before the first record.
		if err := t.seek(m.dataStart); err != nil {
			return fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, s.fr.URL, err)
		}
		lineBase = m.dataLine - 1
	}
	linesKnown := !m.split || first == 0
	if !s.countOnly || !s.boundariesOnly {
		if err := s.setup(); err != nil {
			return err
		}
	}
	var recNo int64
	for !s.done() {
		if recNo&1023 == 0 {
			if err := s.ctx.Err(); err != nil {
				return err
			}
		}
		ok, err := t.next()
		if err != nil {
			var se *syntaxError
			if errors.As(err, &se) {
				// The tokenizer cannot go on past a broken quote: the rest
				// of the range is one bad record.
				line := int64(0)
				if linesKnown {
					line = lineBase + t.consumed + 1
				}
				s.at = src.base + int64(t.pos)
				if berr := s.bad(where(m.comp, line, recNo, se.off), err); berr != nil {
					return berr
				}
				break
			}
			if errors.Is(err, formats.ErrChanged) {
				// The read under the tokenizer found the file rewritten:
				// its bytes are not wrong, they are another file's.
				return fmt.Errorf("%s: %w", s.fr.URL, err)
			}
			return fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, s.fr.URL, err)
		}
		if !ok {
			break
		}
		if limitAt >= 0 && t.start >= limitAt {
			break
		}
		if limitAt >= 0 && t.end > limitAt && t.start < limitAt {
			// The straddling record: the next range starts at the first
			// line start at or after limitAt, which must be this record's
			// end, or a quoted line end has fooled the cut.
			from := int(max(limitAt, t.start+1) - src.base)
			endIdx := int(t.end - src.base)
			if x := lineStart(src.buf[:endIdx], from, true); x != endIdx {
				return fmt.Errorf("%w: %s: the record at byte %d holds a quoted line end past byte %d, where a range of the file starts: read this file whole (a larger UnitBytes) or drop quoted line ends", formats.ErrCorrupt, s.fr.URL, t.start, limitAt)
			}
		}
		s.at = t.start
		if len(s.cuts) > 0 {
			s.checkCuts(t)
		}
		recNo++
		line := int64(0)
		if linesKnown {
			line = lineBase + t.line
		}
		if s.countOnly && s.boundariesOnly {
			s.good()
			continue
		}
		if err := s.record(t, line, recNo-1); err != nil {
			return err
		}
		if s.pending >= s.batchRows {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	return s.flush()
}

// checkCuts clears cutsOK if the tokenizer's record holds a line end past
// a cut inside it other than its own last: a range starting at that cut
// would take the line after it for a record start.
func (s *scanner) checkCuts(t *tokenizer) {
	for len(s.cuts) > 0 && s.cuts[0] <= t.start {
		s.cuts = s.cuts[1:]
	}
	endIdx := int(t.end - t.src.base)
	for len(s.cuts) > 0 && s.cuts[0] < t.end {
		from := int(max(s.cuts[0], t.start+1) - t.src.base)
		if lineStart(t.src.buf[:endIdx], from, true) != endIdx {
			s.cutsOK = false
		}
		s.cuts = s.cuts[1:]
	}
}

// setup makes the builders for the read's schema.
func (s *scanner) setup() error {
	if s.f.kind == JSON || s.f.kind == JSONLines {
		if fj, ok := newFlatJSON(s.mem, s.r.Schema); ok {
			s.flat, s.cols = fj, fj.cols
			return nil
		}
		s.rb = array.NewRecordBuilder(s.mem, s.r.Schema)
		return nil
	}
	nulls := s.f.nulls()
	for _, fl := range s.r.Schema.Fields() {
		idx := -1
		for i, n := range s.m.names {
			if n == fl.Name {
				idx = i
				break
			}
		}
		if idx < 0 {
			return fmt.Errorf("%w: %s has no column %q", formats.ErrSchema, s.fr.URL, fl.Name)
		}
		if !supported(fl.Type) {
			return fmt.Errorf("%w: column %q: type %s is not supported in CSV files", formats.ErrSchema, fl.Name, fl.Type)
		}
		c := newColumn(s.mem, idx, fl.Type, nulls)
		c.replace = s.f.opts.ReplaceInvalidUTF8
		c.dateForm, c.tsForm = s.m.forms(idx)
		c.inferred = s.f.opts.Schema == nil
		s.cols = append(s.cols, c)
	}
	return nil
}

// record parses the tokenizer's record into the builders.
func (s *scanner) record(t *tokenizer, line, recNo int64) error {
	at := func() string { return where(s.m.comp, line, recNo, t.start) }
	if s.flat != nil {
		return s.flatRecord(t.fields[0], at)
	}
	if s.rb != nil {
		rec, err := validUTF8(t.fields[0], s.f.opts.ReplaceInvalidUTF8)
		if err != nil {
			return s.bad(at(), err)
		}
		if err := oneObject(rec); err != nil {
			return s.bad(at(), err)
		}
		if err := unmarshal(s.rb, rec); err != nil {
			if errors.Is(err, errDecoderPanic) {
				return fmt.Errorf("%w: %s: %s: %w", formats.ErrCorrupt, s.fr.URL, at(), err)
			}
			return s.bad(at(), err)
		}
		if s.good() {
			s.pending++
		} else {
			s.dropLast()
		}
		return nil
	}
	if n := len(t.fields); n != len(s.m.names) {
		switch {
		case n == len(s.m.names)+1 && isNullValue(t.fields[n-1], t.quoted[n-1], s.nulls):
			// One more field, null: a delimiter that ends the row, which
			// DuckDB reads past (its header may lack it).
		case n > len(s.m.names):
			// A long row stays an error even with NullPadding: which of its
			// values belong to which column is unknown.
			return s.bad(at(), fmt.Errorf("%d fields, the header has %d (a row longer than the header is always an error)", n, len(s.m.names)))
		case !s.f.opts.NullPadding:
			return s.bad(at(), fmt.Errorf("%d fields, the header has %d (text.Options.NullPadding, --null-padding, reads a short row's missing values as null)", n, len(s.m.names)))
		}
	}
	for _, c := range s.cols {
		if c.field >= len(t.fields) {
			c.null = true // NullPadding: a value the short row lacks
			continue
		}
		if err := c.parse(t.fields[c.field], t.quoted[c.field]); err != nil {
			return s.bad(at(), fmt.Errorf("column %q: %w", s.m.names[c.field], err))
		}
	}
	if !s.good() {
		return nil
	}
	for _, c := range s.cols {
		c.commit()
	}
	s.pending++
	return nil
}

// dropLast drops the row just built into the JSON builder: a row before a
// known range's start. Such rows come before any row of the range is
// built, so the builder holds that row only.
func (s *scanner) dropLast() {
	s.rb.NewRecordBatch().Release()
}

// json scans a .json file's records.
func (s *scanner) json(fe *fetched) error {
	src, closeSrc, err := s.m.open(bytes.NewReader(fe.data))
	if err != nil {
		return fmt.Errorf("%s: %w", s.fr.URL, err)
	}
	defer closeSrc()
	data, err := drain(src)
	if err != nil {
		return fmt.Errorf("%s: %w", s.fr.URL, err)
	}
	if err := s.setup(); err != nil {
		return err
	}
	var n int64
	err = jsonRecords(data, func(rec []byte, off int64) (bool, error) {
		if n&1023 == 0 {
			if err := s.ctx.Err(); err != nil {
				return false, err
			}
		}
		at := where(s.m.comp, 0, n, off)
		n++
		if s.flat != nil {
			if err := s.flatRecord(rec, func() string { return at }); err != nil {
				return false, err
			}
			if s.pending >= s.batchRows {
				if err := s.flush(); err != nil {
					return false, err
				}
			}
			return !s.done(), nil
		}
		rec, err := validUTF8(rec, s.f.opts.ReplaceInvalidUTF8)
		if err != nil {
			return true, s.bad(at, err)
		}
		if err := unmarshal(s.rb, rec); err != nil {
			if errors.Is(err, errDecoderPanic) {
				return false, fmt.Errorf("%w: %s: %s: %w", formats.ErrCorrupt, s.fr.URL, at, err)
			}
			return true, s.bad(at, err)
		}
		if s.good() {
			s.pending++
		} else {
			s.dropLast()
		}
		if s.pending >= s.batchRows {
			if err := s.flush(); err != nil {
				return false, err
			}
		}
		return !s.done(), nil
	})
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			if berr := s.bad(where(s.m.comp, 0, n, se.off), err); berr != nil {
				return berr
			}
		} else {
			return err
		}
	}
	return s.flush()
}

// oneObject checks that a JSON Lines record holds one object and nothing
// after it, and that the object's structure is sound: every key a string
// followed by a colon, every value followed by a comma or the end of its
// container. arrow-go's decoder reads the first value of a line and ignores
// the rest, which would drop the rows of a line holding several objects,
// and it takes whatever token comes where a key belongs for a string: a
// panic on a malformed line, which then could only end the read. The values
// themselves are the decoder's to check.
func oneObject(line []byte) error {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errors.New("the line is not a JSON object")
	}
	const (
		wantValue = iota
		wantKey
		wantColon
		wantNext // a comma or the end of the container
	)
	var held [16]byte
	open := held[:0]           // the containers open, '{' or '['
	end := func(i int) error { // the object closes at line[i]
		if !blank(line[i+1:]) {
			return fmt.Errorf("data after the object at byte %d of the line", i+1)
		}
		return nil
	}
	state, empty := wantValue, false
	for ; i < len(line); i++ {
		c := line[i]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			continue
		}
		first := empty
		empty = false
		switch state {
		case wantKey:
			if c == '}' && first {
				if open = open[:len(open)-1]; len(open) == 0 {
					return end(i)
				}
				state = wantNext
				break
			}
			if c != '"' {
				return fmt.Errorf("%q at byte %d of the line, where an object key belongs", c, i)
			}
			i = stringEnd(line, i)
			state = wantColon
		case wantColon:
			if c != ':' {
				return fmt.Errorf("%q at byte %d of the line, where the colon after a key belongs", c, i)
			}
			state = wantValue
		case wantValue:
			switch c {
			case '{', '[':
				open = append(open, c)
				state, empty = wantKey, true
				if c == '[' {
					state = wantValue
				}
				continue
			case ']':
				if first && open[len(open)-1] == '[' {
					open = open[:len(open)-1]
					state = wantNext
					break
				}
				fallthrough
			case ',', ':', '}':
				return fmt.Errorf("%q at byte %d of the line, where a value belongs", c, i)
			case '"':
				i = stringEnd(line, i)
			default: // a number, true, false or null: the decoder reads it
				for i+1 < len(line) && !jsonDelim(line[i+1]) {
					i++
				}
			}
			state = wantNext
		case wantNext:
			top := open[len(open)-1]
			switch {
			case c == ',':
				state = wantValue
				if top == '{' {
					state = wantKey
				}
			case c == '}' && top == '{', c == ']' && top == '[':
				if open = open[:len(open)-1]; len(open) == 0 {
					return end(i)
				}
			default:
				return fmt.Errorf("%q at byte %d of the line, where a comma or the end of the %s belongs", c, i, map[byte]string{'{': "object", '[': "array"}[top])
			}
		}
	}
	return errors.New("the object is not closed on its line")
}

func jsonDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// stringEnd returns the index of the quote that ends the string starting at
// b[i], or len(b) if it does not end.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i
}

// errDecoderPanic is wrapped when arrow-go's JSON decoder panicked on a
// record (oneObject turns away the malformed lines it is known to panic
// on): its builders may then hold part of the row, so the read cannot go
// on, even skipping bad rows.
var errDecoderPanic = errors.New("a record the JSON decoder cannot read")

func unmarshal(rb *array.RecordBuilder, rec []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %w", errDecoderPanic, panics.New(r))
		}
	}()
	return rb.UnmarshalJSON(rec)
}
