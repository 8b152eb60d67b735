package text

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
)

// Dialect and header detection, as DuckDB's CSV sniffer does it, so that a
// file reads with the delimiter, quote, escape, comment prefix and header
// DuckDB's read_csv finds in it.
//
// Every candidate dialect (comment prefix none or '#'; quote and escape
// none, '"' with none, '"', '\'' or '\\', '\'' with none, '\'', '"' or '\\';
// delimiter ',', '|', ';' or tab; in that order, as DuckDB tries them) cuts
// the head of the file into rows with a scan that knows only where fields
// and rows end (sniffScan), and the rows' field counts decide, by DuckDB's
// rules (sniffer.analyze): the candidate under which the rows agree, with
// the most fields, wins; rows before the first row of that many fields
// (a preamble) are skipped, and so are blank lines and comment lines there;
// a quote that never closes, or a byte other than a delimiter, a space or a
// line end after a closing quote, rules a candidate out, so that a file
// whose values hold stray quotes reads with no quote at all. Candidates
// that still agree are checked against the next chunks of the head, and of
// those left, one that met a quote, better one that met an escape, and one
// whose escape is its quote, is preferred. Where a small file leaves
// several, the one whose columns read as text the least wins, as DuckDB's
// type detection picks. A ragged file, which no candidate of several
// fields cuts alike, reads as one column of lines, as it does in DuckDB.
//
// It runs once per file, at Inspect, over the first sniffBytes bytes; the
// tokenizer that reads the file is the same for every dialect.

// sniffBytes bounds the head of a file the dialect is detected from.
const sniffBytes = 1 << 20

// DuckDB's sniffer reads 2048 rows a chunk, the first to choose candidates
// and up to 9 more to check them.
const (
	sniffChunkRows = 2048
	sniffChunks    = 10
)

var (
	sniffDelims   = []byte{',', '|', ';', '\t'}
	sniffComments = []byte{0, '#'}
	// sniffQuoteEscapes are DuckDB's quote and escape pairs, in its order;
	// an escape of 0 is none (a quote inside a quoted field is then an
	// error in DuckDB; sluice's tokenizer still reads a doubled one).
	sniffQuoteEscapes = [][2]byte{{0, 0}, {'"', 0}, {'"', '"'}, {'"', '\''}, {'"', '\\'},
		{'\'', 0}, {'\'', '\''}, {'\'', '"'}, {'\'', '\\'}}
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
	if d.quote == 0 {
		esc = "none"
	} else if d.esc == 0 || d.esc == d.quote {
		esc = "doubled quote"
	}
	return fmt.Sprintf("delimiter %s, quote %s, escape %s, comment %s", show(d.delim), show(d.quote), esc, show(d.comment))
}

// sniffed is what dialect detection found in a file.
type sniffed struct {
	d dialect
	// skip is the lines before the header (or the first row): a preamble,
	// blank lines, counted as DuckDB's skip option counts them (comment
	// lines not).
	skip int
	// cols is the rows' field count; 0 where no candidate read the head
	// alike (the dialect is then the one the first row suggests, or the
	// options').
	cols int
}

// sniffDialect picks the dialect of a CSV or TSV file from head, its first
// bytes (all of them if atEOF). What the options give is kept as given.
func (f *Format) sniffDialect(head []byte, atEOF bool) sniffed {
	g := f.given
	base := f.dialect()
	if !atEOF {
		// The last line may be cut short; the rows it starts are left out.
		if i := bytes.LastIndexAny(head, "\n\r"); i >= 0 {
			head = head[:i+1]
		}
	}
	head = bytes.TrimPrefix(head, bom)
	delims := []byte{base.delim}
	if g.Delimiter == 0 && f.kind == CSV {
		delims = sniffDelims
	}
	comments := []byte{base.comment}
	if g.Comment == 0 && !g.NoComment {
		comments = sniffComments
	}
	var qes [][2]byte
	switch {
	case g.NoQuote:
		qes = [][2]byte{{0, 0}}
	case g.Quote != 0 && g.Escape != 0:
		qes = [][2]byte{{g.Quote, g.Escape}}
	case g.Quote != 0:
		for _, qe := range sniffQuoteEscapes {
			if qe[0] == g.Quote {
				qes = append(qes, qe)
			}
		}
		if qes == nil { // a quote DuckDB does not try: every escape
			qes = [][2]byte{{g.Quote, g.Quote}, {g.Quote, 0}, {g.Quote, '\\'}, {g.Quote, '"'}, {g.Quote, '\''}}
		}
	case g.Escape != 0:
		for _, qe := range sniffQuoteEscapes {
			if qe[1] == g.Escape {
				qes = append(qes, qe)
			}
		}
		if qes == nil {
			qes = [][2]byte{{g.Escape, g.Escape}, {'"', g.Escape}, {'\'', g.Escape}}
		}
	default:
		qes = sniffQuoteEscapes
	}
	s := &sniffer{pad: f.opts.NullPadding, commentGiven: g.Comment != 0}
	if f.opts.Schema != nil {
		s.setCols = f.opts.Schema.NumFields()
	}
	absent := func(c, given byte) bool { return c != 0 && given == 0 && bytes.IndexByte(head, c) < 0 }
	for _, comment := range comments {
		for _, qe := range qes {
			// A candidate whose quote, escape or comment prefix the head
			// lacks cuts it as one without, and loses to that one: left
			// out, it costs no scan.
			if absent(comment, g.Comment) || absent(qe[0], g.Quote) || (qe[1] != qe[0] && absent(qe[1], g.Escape)) {
				continue
			}
			for _, delim := range delims {
				d := dialect{delim: delim, quote: qe[0], esc: qe[1], comment: comment}
				s.analyze(newSniffScan(d, head, atEOF))
			}
		}
	}
	s.refine()
	var best *sniffScan
	switch {
	case len(s.cands) == 1:
		best = s.cands[0]
	case len(s.cands) > 1:
		best = f.leastText(s.cands, head)
	}
	// Where DuckDB would read a file whose first row has several fields
	// as one column of lines (no dialect cuts its rows alike), or find no
	// dialect, the file is ragged: it reads with the dialect its first row
	// suggests, and the row that does not fit fails the read, naming
	// NullPadding, rather than a column of lines the caller did not ask
	// for.
	if best == nil || (best.numCols == 1 && !best.everQuoted && !s.wideKept) {
		var wide *sniffScan
		for _, c := range s.all {
			if c.firstCols > 1 && (wide == nil || c.firstCols > wide.firstCols) {
				wide = c
			}
		}
		if wide != nil {
			return sniffed{d: f.plainer(wide.d, head)}
		}
	}
	if best == nil {
		return sniffed{d: base}
	}
	out := sniffed{d: f.plainer(best.d, head), skip: best.skip, cols: best.numCols}
	if out.skip > 0 && best.preambleWide && !g.Header {
		// DuckDB takes the rows before the first row of the most fields
		// for a preamble, and skips them. Where one of them has several
		// fields and the row after them is data, not a header, they are
		// data too, the wide row the odd one out (a long last row): the
		// file reads from its first line, and the long row fails the read
		// rather than the rows before it being dropped.
		if hs := f.sampleHead(best, head); hs.first == nil || g.NoHeader || !hs.header() {
			out.skip = 0
		}
	}
	return out
}

// plainer is d as it reads the head alike: an escape that is the quote is
// the tokenizer's doubled quote (0), and a head without a '"' (where
// DuckDB finds no quote) reads with '"' where the options leave the quote
// open: a quoted field past the head then reads as one, and the files of a
// dataset alike, quoted or not.
func (f *Format) plainer(d dialect, head []byte) dialect {
	if d.esc == d.quote {
		d.esc = 0
	}
	if d.quote == 0 && f.given.Quote == 0 && !f.given.NoQuote && bytes.IndexByte(head, '"') < 0 {
		d.quote, d.esc = '"', 0
	}
	return d
}

// sniffState is a state of DuckDB's CSV state machine, strict mode.
type sniffState uint8

const (
	stNotSet sniffState = iota
	stStandard
	stDelimiter
	stRecord // a line feed ended a row (or a blank line)
	stReturn // a carriage return did
	stQuoted
	stUnquoted // after a closing quote
	stEscape
	stSpace // one space at a field's start, before which a quote may open
	stComment
	stQuotedNewline
	stInvalid
)

// rowShape is what the scan knows of a row.
type rowShape struct {
	cols int
	// lastEmpty is whether this row and every row after it in the chunk
	// end in a delimiter (an empty last field): such a file has one field
	// more in its rows than in its header.
	lastEmpty bool
	// comment: the row started with the comment prefix; midComment: a
	// comment followed its fields.
	comment, midComment bool
	// emptyBefore is the blank lines before it since the file's start.
	emptyBefore int
}

// sniffScan cuts the head into rows under one candidate dialect, as
// DuckDB's column count scanner does: a field count a row and little else.
type sniffScan struct {
	d          dialect
	buf        []byte
	pos        int
	atEOF      bool
	prev, cur  sniffState
	delims     int // delimiters in the current row
	emptyLines int
	// inComment is set in a comment; lineComment when it began the row.
	inComment, lineComment  bool
	everQuoted, everEscaped bool
	failed, finished        bool
	// shapes are the chunk's rows. As in DuckDB the slots are reused
	// from chunk to chunk and a comment flag, once set, stays.
	shapes   []rowShape
	n        int
	rowStart int // where the current row started

	// Set by the sniffer where it keeps the candidate: the lines to skip
	// before the header and its field count; the rows that skip leaves
	// out (preamble) and the rows that agree after the header (after).
	skip, numCols int
	preambleWide  bool // a row the skip leaves out has several fields
	firstCols     int  // the first row's fields
}

func newSniffScan(d dialect, head []byte, atEOF bool) *sniffScan {
	return &sniffScan{d: d, buf: head, atEOF: atEOF}
}

// next is the state after byte c.
func (s *sniffScan) next(c byte) sniffState {
	d := s.d
	switch s.cur {
	case stQuoted, stQuotedNewline:
		switch {
		case c == d.quote:
			return stUnquoted
		case d.esc != 0 && d.esc != d.quote && c == d.esc:
			return stEscape
		case c == '\n' || c == '\r':
			return stQuotedNewline
		}
		return stQuoted
	case stEscape:
		return stQuoted
	case stComment:
		switch c {
		case '\n':
			return stRecord
		case '\r':
			return stReturn
		}
		return stComment
	}
	// Outside quotes a delimiter, a line end or the comment prefix ends
	// what came before (DuckDB sets them last, over a quote or a space).
	switch {
	case c == d.delim:
		return stDelimiter
	case c == '\n':
		return stRecord
	case c == '\r':
		return stReturn
	case d.comment != 0 && c == d.comment:
		return stComment
	}
	switch s.cur {
	case stUnquoted:
		switch {
		case c == d.quote && d.quote == d.esc:
			return stQuoted // a doubled quote
		case c == ' ' && d.spaceFree():
			return stUnquoted
		}
		return stInvalid
	case stStandard:
		return stStandard
	}
	// At a field's start: after a delimiter, a line end, the start, or
	// the one space before a quote.
	switch {
	case d.quote != 0 && c == d.quote:
		return stQuoted
	case c == ' ' && d.delim != ' ' && s.cur != stSpace:
		return stSpace
	}
	return stStandard
}

// chunk cuts up to sniffChunkRows rows from where the last chunk ended.
func (s *sniffScan) chunk() {
	s.n = 0
	if s.failed || s.finished {
		return
	}
	for s.pos < len(s.buf) {
		c := s.buf[s.pos]
		s.pos++
		s.prev, s.cur = s.cur, s.next(c)
		switch s.cur {
		case stInvalid:
			s.failed, s.n = true, 0
			return
		case stRecord, stReturn:
			switch {
			case s.prev == stRecord || s.prev == stNotSet || (s.prev == stReturn && c == '\r'):
				s.emptyLines++ // a blank line
			case s.prev != stReturn:
				s.endRow()
				if s.n == sniffChunkRows {
					return
				}
			}
		case stDelimiter:
			s.delims++
		case stQuoted:
			if s.prev == stUnquoted && s.d.esc != 0 {
				s.everEscaped = true // a doubled quote
			}
			if s.prev == stEscape && c == s.d.quote {
				s.everEscaped = true
			}
			s.everQuoted = true
		case stComment:
			// The row began with the comment unless a field came first.
			// As in DuckDB, whose scan meets the last byte of its buffer
			// alone, a comment that runs to the file's end without a line
			// end counts as one that began the row.
			if s.prev != stComment || (s.atEOF && s.pos == len(s.buf)) {
				s.lineComment = s.prev != stStandard && s.prev != stDelimiter
			}
			s.inComment = true
		}
	}
	s.finished = true
	if (s.cur == stQuoted || s.cur == stQuotedNewline) && s.prev != stUnquoted {
		// A quote open at the end: DuckDB's sniffer rules the candidate
		// out. At the end of a head cut short the field may close later
		// and the row is left out, unless it is already longer than half
		// the head: DuckDB, which reads on, fails a row that long (2 MB),
		// or that is a stray quote.
		s.failed = s.atEOF || len(s.buf)-s.rowStart > sniffBytes/2
		if s.failed {
			s.n = 0
		}
		return
	}
	switch s.cur {
	case stRecord, stReturn, stNotSet:
		return
	}
	if s.atEOF {
		s.endRow() // the last line, without a line end
	}
}

// endRow records the row that ended.
func (s *sniffScan) endRow() {
	if s.n == len(s.shapes) {
		s.shapes = append(s.shapes, rowShape{lastEmpty: true})
	}
	sh := &s.shapes[s.n]
	sh.cols, sh.emptyBefore = s.delims+1, s.emptyLines
	// The last field is empty where the row ends right after a delimiter
	// (DuckDB's EmptyLastValue, of the states as they are here).
	emptyLast := (s.prev == stDelimiter && (s.cur == stRecord || s.cur == stReturn || s.cur == stDelimiter)) ||
		(s.prev == stStandard && s.cur == stDelimiter)
	if !emptyLast {
		for i := s.n; i >= 0 && s.shapes[i].lastEmpty; i-- {
			s.shapes[i].lastEmpty = false
		}
	}
	if s.inComment {
		if s.lineComment {
			sh.comment = true
		} else {
			sh.midComment = true
		}
		s.inComment, s.lineComment = false, false
	}
	s.delims = 0
	s.n++
	s.rowStart = s.pos
}

// rows are the rows of the last chunk.
func (s *sniffScan) rows() []rowShape { return s.shapes[:s.n] }

// sniffer chooses among candidates as DuckDB's dialect detection does.
type sniffer struct {
	pad bool // NullPadding: a short row is padded, not inconsistent
	// all are the candidates that cut the first chunk without failing;
	// wideKept is set once one of several fields was kept.
	all      []*sniffScan
	wideKept bool
	// commentGiven: the options name the comment prefix, which then needs
	// no rows to show it.
	commentGiven bool
	// setCols is the columns Options.Schema gives (0: none): a candidate
	// that cuts the rows into another number is out.
	setCols int
	cands   []*sniffScan
	// What the best candidate so far had.
	maxCols, bestConsistent, prevPadding int
}

// commentsFit is DuckDB's test of a comment prefix: at least one row that
// starts with it and has another field count than the rest, and of the
// rows that hold it, three in five fit (a full-line comment whose count
// differs, a row with a comment after the right fields).
func (s *sniffer) commentsFit(sc *sniffScan, numCols int) bool {
	if s.commentGiven {
		return true
	}
	detected, valid := 0, 0
	fullLine := false
	for _, r := range sc.rows() {
		if !r.comment && !r.midComment {
			continue
		}
		detected++
		if r.cols != numCols && r.comment {
			fullLine = true
			valid++
		}
		if (r.cols == numCols || (r.cols <= numCols && s.pad)) && r.midComment {
			valid++
		}
	}
	if valid == 0 || !fullLine {
		return sc.d.comment == 0
	}
	return float64(valid)/float64(detected) >= 0.6
}

// unacceptable is DuckDB's test of a row's field count against columns
// the options fix (Options.Schema): the same, or one more where the last
// field is always empty, or more with null padding.
func (s *sniffer) unacceptable(cols int, lastEmpty bool) bool {
	switch {
	case s.setCols == 0, cols == s.setCols, lastEmpty && cols == s.setCols+1:
		return false
	}
	return !(s.pad && cols > s.setCols)
}

// analyze runs a candidate over the first chunk and keeps it if its rows
// agree at least as well as the best so far (DuckDB's
// AnalyzeDialectCandidate, with neither ignore_errors nor skip given).
func (s *sniffer) analyze(sc *sniffScan) {
	sc.chunk()
	if sc.failed {
		return
	}
	s.all = append(s.all, sc)
	rows := sc.rows()
	if len(rows) > 0 {
		sc.firstCols = rows[0].cols
	}
	numCols := 1
	if len(rows) > 0 {
		numCols = rows[0].cols
		if s.unacceptable(numCols, rows[0].lastEmpty) {
			return
		}
	}
	consistent, padding, commentRows := 0, 0, 0
	dirty, dirtyMinusComments, emptyLines := 0, 0, 0
	firstValid := false
	header := 0
	for i, r := range rows {
		if s.unacceptable(r.cols, r.lastEmpty) {
			return
		}
		switch {
		case r.comment:
			commentRows++
		case r.lastEmpty && r.cols == rows[header].cols+1:
			consistent++ // a trailing delimiter on every row from here
		case numCols < r.cols && (s.setCols == 0 || s.pad):
			// More fields than any row before: the rows before are a
			// preamble, and this one the header.
			firstValid = true
			padding = 0
			numCols = r.cols
			dirty = i + r.emptyBefore
			emptyLines = r.emptyBefore
			dirtyMinusComments = dirty - commentRows
			header = i
			consistent = 1
		case r.cols == numCols:
			if !firstValid {
				firstValid = true
				dirty = i + r.emptyBefore
				emptyLines = r.emptyBefore
				dirtyMinusComments = dirty - commentRows
			}
			consistent++
		default:
			padding++ // fewer fields: read only with null padding
		}
	}
	// Whether the preamble the skip leaves out holds a row of several
	// fields, for sniffDialect's check.
	for _, r := range rows[:min(header, len(rows))] {
		sc.preambleWide = sc.preambleWide || (!r.comment && r.cols > 1)
	}
	consistent += padding
	moreValues := consistent > s.bestConsistent && numCols >= s.maxCols
	moreColumns := consistent == s.bestConsistent && numCols > s.maxCols
	morePadding := padding > s.prevPadding
	lessPadding := padding < s.prevPadding
	singleColumnBefore := s.maxCols < 2 && numCols > s.maxCols*len(s.cands)
	rowsConsistent := consistent+dirtyMinusComments+commentRows-emptyLines == len(rows)
	startGood := len(s.cands) > 0 && dirty <= s.cands[0].skip
	badPadding := !s.pad && padding > 0
	commentsFit := s.commentsFit(sc, numCols)
	quoted := sc.everQuoted && sc.d.quote != 0
	columnsMatch := s.setCols == 0 || numCols == s.setCols || (len(rows) > 0 && numCols == s.setCols+1 && rows[0].lastEmpty)
	skip := func(n int) int {
		if s.pad {
			return 0 // DuckDB keeps every row with null_padding
		}
		return n
	}
	if columnsMatch && rowsConsistent && (singleColumnBefore || ((moreValues || moreColumns) && !morePadding) ||
		(numCols > 1 && lessPadding) || (quoted && commentRows == 0)) && !badPadding && commentsFit {
		if len(s.cands) > 0 && s.setCols > 0 && s.maxCols == s.setCols && consistent <= s.bestConsistent &&
			(s.cands[0].everQuoted || !sc.everQuoted) {
			return
		}
		if len(s.cands) > 0 && s.cands[0].everQuoted {
			// A candidate that met quotes is preferred to one that did
			// not, and one that met an escape to one that did not.
			if !sc.everQuoted || (!sc.everEscaped && s.cands[0].everEscaped) {
				return
			}
			if s.bestConsistent == consistent && numCols >= s.maxCols {
				sc.skip, sc.numCols = skip(dirty), numCols
				s.cands = append(s.cands, sc)
				s.maxCols = numCols
				return
			}
		}
		if s.maxCols > 1 && numCols > s.maxCols && consistent < s.bestConsistent/2 && s.pad {
			return
		}
		if quoted && numCols < s.maxCols {
			for _, c := range s.cands {
				if c.everQuoted && (!sc.everEscaped || c.everEscaped) {
					return
				}
			}
		}
		s.bestConsistent, s.maxCols, s.prevPadding = consistent, numCols, padding
		sc.skip, sc.numCols = skip(dirtyMinusComments), numCols
		s.cands = append(s.cands[:0], sc)
		s.wideKept = s.wideKept || numCols > 1
		return
	}
	if columnsMatch && consistent > 1 && numCols > 1 && startGood && rowsConsistent && !morePadding && !badPadding &&
		numCols == s.maxCols && commentsFit {
		sc.skip, sc.numCols = skip(dirty), numCols
		s.cands = append(s.cands, sc)
	}
}

// refine checks the kept candidates against the next chunks of the head
// (DuckDB's RefineCandidates): one whose rows change their field count, or
// that fails, is out. Of those left, one that met a quote (and, best, an
// escape) is preferred, then one whose escape is its quote.
func (s *sniffer) refine() {
	if len(s.cands) <= 1 || s.cands[0].finished {
		return // few rows: type detection chooses (leastText)
	}
	for i := 1; i <= sniffChunks; i++ {
		var kept []*sniffScan
		done := false
		for _, c := range s.cands {
			if c.finished || i == sniffChunks {
				if !c.failed {
					kept = append(kept, c)
				}
				done = true
				continue
			}
			if s.agrees(c) && !c.failed {
				kept = append(kept, c)
			}
		}
		s.cands = kept
		if done {
			break
		}
	}
	var quoted []*sniffScan
	for _, c := range s.cands {
		if c.everQuoted && c.everEscaped {
			s.cands = []*sniffScan{c}
			return
		}
		if c.everQuoted {
			quoted = append(quoted, c)
		}
	}
	if quoted != nil {
		s.cands = quoted
	}
	if len(s.cands) > 1 {
		for _, c := range s.cands {
			if c.d.quote == c.d.esc {
				s.cands = []*sniffScan{c}
				return
			}
		}
		s.cands = s.cands[:1]
	}
}

// agrees cuts the candidate's next chunk and reports whether its rows keep
// the field count.
func (s *sniffer) agrees(c *sniffScan) bool {
	c.chunk()
	for _, r := range c.rows() {
		if s.setCols > 0 {
			return !s.unacceptable(r.cols, r.lastEmpty) // as DuckDB: the first row decides
		}
		if r.cols != s.maxCols && !s.pad && !r.comment {
			return false
		}
	}
	return true
}

// leastText picks among candidates that read a small file alike the one
// whose columns read as text the least (the first of those), as DuckDB's
// type detection does: its sample is the rows after the first (the first
// itself in a one-row file).
func (f *Format) leastText(cands []*sniffScan, head []byte) *sniffScan {
	best, least := cands[0], -1
	for _, c := range cands {
		hs := f.sampleHead(c, head)
		if hs.bad {
			continue // DuckDB's read of the chunk fails: it has no say
		}
		guesses, seen := hs.guesses, hs.seen
		if hs.below == 0 {
			guesses, seen = observeRecord(nil, nil, hs.first, hs.firstQuoted, hs.isNull)
		}
		text := 0
		for i, g := range guesses {
			if g.csvType(seen[i]).ID() == arrow.STRING {
				text++
			}
		}
		if least < 0 || text < least {
			best, least = c, text
		}
	}
	return best
}

// headSample is what the sniffer's type detection reads of the head: the
// first record after the skipped lines, and the guesses of the records
// below it (at most a chunk's).
type headSample struct {
	first       [][]byte
	firstQuoted []bool
	guesses     []guess
	seen        []bool
	below       int
	isNull      func([]byte, bool) bool
	// bad is set where a record does not fit the first's fields (without
	// NullPadding) or cannot be cut: DuckDB's read of the chunk fails.
	bad bool
}

// sampleHead reads the head's records as candidate c reads them: from its
// skipped lines on, blank lines rows of null where it has one column.
func (f *Format) sampleHead(c *sniffScan, head []byte) headSample {
	nulls := f.nulls()
	hs := headSample{isNull: func(v []byte, q bool) bool { return isNullValue(v, q, nulls) }}
	t := &tokenizer{src: &source{buf: head}, d: c.d}
	skipLines(t, c.skip)
	for n := 0; n < sniffChunkRows; n++ {
		ok, err := t.next()
		if err != nil || !ok {
			hs.bad = hs.bad || err != nil
			break
		}
		if n > 0 && len(t.fields) != len(hs.first) {
			last := len(t.fields) - 1
			extraNull := len(t.fields) == len(hs.first)+1 && hs.isNull(t.fields[last], t.quoted[last])
			hs.bad = hs.bad || !(extraNull || (f.opts.NullPadding && len(t.fields) < len(hs.first)))
		}
		if n == 0 {
			for _, v := range t.fields {
				hs.first = append(hs.first, bytes.Clone(v))
			}
			hs.firstQuoted = append([]bool(nil), t.quoted...)
			t.d.blankRows = c.numCols == 1 && hs.isNull(nil, false)
			continue
		}
		hs.below++
		hs.guesses, hs.seen = observeRecord(hs.guesses, hs.seen, t.fields, t.quoted, hs.isNull)
	}
	return hs
}

// header reports whether the sample's first record is a header, as
// hasHeader decides.
func (hs headSample) header() bool {
	return hasHeader(hs.first, func(i int) bool { return hs.isNull(hs.first[i], hs.firstQuoted[i]) }, hs.guesses, hs.seen, hs.below)
}

// skipLines moves t past n lines as DuckDB's skip counts them: rows (a
// quoted line end inside one) and blank lines, not comment lines. Where
// there are fewer, it leaves t where it is, and reports false.
func skipLines(t *tokenizer, n int) bool {
	if n == 0 {
		return true
	}
	sc := &sniffScan{d: t.d, buf: t.src.buf, atEOF: true}
	sc.pos = t.pos
	count := 0
	for sc.pos < len(sc.buf) && count < n {
		c := sc.buf[sc.pos]
		sc.pos++
		sc.prev, sc.cur = sc.cur, sc.next(c)
		switch sc.cur {
		case stRecord, stReturn:
			switch {
			case sc.prev == stRecord || sc.prev == stNotSet || (sc.prev == stReturn && c == '\r'):
				count++
			case sc.prev == stComment && sc.lineComment:
				sc.lineComment = false
			case sc.prev != stReturn:
				count++
			}
		case stComment:
			if sc.prev != stComment || sc.pos == len(sc.buf) {
				sc.lineComment = sc.prev != stStandard
			}
		}
	}
	if count < n {
		return false // as DuckDB: a skip past the end reads from the start
	}
	if sc.pos < len(sc.buf) && sc.buf[sc.pos] == '\n' && sc.cur == stReturn {
		sc.pos++ // the line feed of a carriage return and line feed
	}
	t.consumed += lineEnds(sc.buf[t.pos:sc.pos])
	t.pos = sc.pos
	return true
}

// lineEnds counts the line ends in b: line feeds, and carriage returns
// that no line feed follows.
func lineEnds(b []byte) int64 {
	var n int64
	for i, c := range b {
		if c == '\n' || (c == '\r' && (i+1 >= len(b) || b[i+1] != '\n')) {
			n++
		}
	}
	return n
}

// hasHeader decides, as DuckDB does, whether a CSV file's first record is a
// header, from its values and the guesses of the records below it (of
// itself, in a one-record file): it is not one if each of its values fits
// the type of its column, unless every column is text (then nothing
// tells, and a header is the usual case) or every value of it is null. A
// column with no value below is of no type but null, which only a null
// fits.
func hasHeader(first [][]byte, isNull func(int) bool, guesses []guess, seen []bool, below int) bool {
	if below == 0 {
		guesses, seen = make([]guess, len(first)), make([]bool, len(first))
		for i, v := range first {
			guesses[i] = gAll
			if !isNull(i) {
				guesses[i], seen[i] = gAll.observe(v), true
			}
		}
	}
	if len(first) != len(guesses) {
		return true // the rows below are cut otherwise: leave it to the read
	}
	allText, allNull, fits := true, true, true
	for i, v := range first {
		null := isNull(i)
		allNull = allNull && null
		typ := guesses[i].csvType(seen[i])
		if typ.ID() == arrow.STRING {
			continue
		}
		allText = false
		if !null && !arrow.TypeEqual(guesses[i].observe(v).csvType(true), typ) {
			fits = false
		}
	}
	return allText || allNull || !fits
}

// describe says how a CSV file is read: its dialect and whether its first
// record is a header.
func (m *meta) describe() string {
	h := "no header"
	if m.header {
		h = "header"
	}
	s := m.d.String() + ", " + h
	if m.skip > 0 {
		s += fmt.Sprintf(", %d lines skipped before it", m.skip)
	}
	return s
}

// Dialect says how a CSV or TSV file is read, as detected or given: its
// delimiter, quote, escape, comment prefix, whether its first record is a
// header and the lines skipped before it; "" for other files. inspect
// shows it.
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
			return fmt.Errorf("%w: %s reads as %s, but %s as %s: every file of a dataset must read alike (set Options.Delimiter, Quote, Escape, Comment, Header or NoHeader; --delimiter, --quote, --escape, --comment, --header, --no-header)",
				formats.ErrSchema, ref.URL, r.describe(), fr.URL, m.describe())
		}
	}
	return nil
}
