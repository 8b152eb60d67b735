package text

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// source is a window of a byte stream (a file's bytes, or what a
// decompressor yields) that grows on demand: the tokenizer asks for more
// when a record runs past the end, and bytes before the record it is on
// are dropped, so a file of any size is read in bounded memory (a record
// must fit).
type source struct {
	buf  []byte
	base int64     // stream offset of buf[0]
	r    io.Reader // the rest of the stream; nil once it ended
	step int       // bytes asked of r at a time
	// limit bounds the memory one record may take.
	limit int
	// owned is set once buf is the source's own: the first one may be a
	// fetched buffer that other ranges decode too, never written to.
	owned bool
}

// maxRecord bounds a record's size: a file with no line end (or an open
// quote) would otherwise be read whole into memory.
const maxRecord = 1 << 30

// errRecordTooLarge is wrapped when a record exceeds the limit.
var errRecordTooLarge = errors.New("record larger than the limit")

// more appends bytes, dropping those before keep (an index into buf); it
// reports false once the stream has ended.
func (s *source) more(keep int) (bool, error) {
	if s.r == nil {
		return false, nil
	}
	kept := len(s.buf) - keep
	limit := s.limit
	if limit <= 0 {
		limit = maxRecord
	}
	if kept >= limit {
		return false, fmt.Errorf("%w (%d bytes from byte %d)", errRecordTooLarge, kept, s.base+int64(keep))
	}
	step := s.step
	if step <= 0 {
		step = 64 << 10
	}
	// Each call asks for more than the last (up to 1 MiB), and a record
	// longer than that grows the buffer geometrically: a straddling record
	// costs a few small reads, a long one a logarithmic number.
	s.step = min(step*2, max(step, 1<<20))
	if kept > step {
		step = kept
	}
	var nb []byte
	if s.owned && keep > 0 && cap(s.buf)-kept >= kept+step && keep >= kept {
		nb = s.buf[:kept]
		copy(nb, s.buf[keep:])
	} else {
		nb = make([]byte, kept, kept+step)
		copy(nb, s.buf[keep:])
		s.owned = true
	}
	s.base += int64(keep)
	// Not io.ReadFull: it turns a decompressor's io.ErrUnexpectedEOF (a
	// truncated stream) into a short read.
	n := 0
	var err error
	for n < step && err == nil {
		var k int
		k, err = s.r.Read(nb[kept+n : kept+step])
		n += k
	}
	s.buf = nb[:kept+n]
	if err == io.EOF {
		s.r = nil
		return n > 0, nil
	}
	if err != nil {
		s.r = nil
		return false, err
	}
	return true, nil
}

// dialect is how the tokenizer cuts records and fields, as DuckDB's CSV
// state machine does (strict mode): a quote opens a quoted field only at
// the field's start, or after one space there; spaces may follow the
// closing quote; the comment prefix, outside quotes, ends the record (a
// line it starts, or that holds only spaces before it, is no record).
type dialect struct {
	delim, quote, esc, comment byte
	// lines makes every line one field (JSON Lines): no delimiter, no
	// quotes.
	lines bool
	// blankRows makes a blank line a record of one empty field, as a
	// blank line is a row of null in DuckDB's reading of a one-column
	// file (and skipped in a file of more).
	blankRows bool
}

// spaceFree reports whether a space is none of the dialect's own bytes:
// then it may stand between a closing quote and what ends the field.
func (d dialect) spaceFree() bool {
	return d.delim != ' ' && d.quote != ' ' && d.esc != ' ' && d.comment != ' '
}

// tokenizer cuts a source into records and, for CSV, fields. Field slices
// point into the source's buffer or the tokenizer's scratch and hold until
// the next call to next.
type tokenizer struct {
	src *source
	d   dialect
	pos int // index into src.buf of the next byte to read

	fields  [][]byte
	quoted  []bool
	scratch []byte
	// multiline is set when the last record held a line end in a quoted
	// field; blank when it was a blank line (blankRows).
	multiline, blank bool
	// start and end are the stream offsets of the last record.
	start, end int64
	// line is the last record's line number, counting from the source's
	// start as line 1; consumed counts the line ends before pos.
	line, consumed int64
}

// errNeedMore is internal: the record runs past the buffer.
var errNeedMore = errors.New("need more bytes")

// errUnclosed is the syntax error of a quote open at the end of the bytes.
const errUnclosed = "quoted field not closed before the end of the file"

// syntaxError is a record the tokenizer cannot cut.
type syntaxError struct {
	off int64
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("byte %d: %s", e.off, e.msg) }

// next cuts the next record, skipping comment lines and blank lines (but
// where the dialect's blankRows makes them records). It reports false at
// the end of the stream.
func (t *tokenizer) next() (bool, error) {
	for {
		atEOF := t.src.r == nil
		var ok bool
		var err error
		if t.d.lines {
			ok, err = t.cutLine(atEOF)
		} else {
			ok, err = t.cut(atEOF)
		}
		if err == errNeedMore {
			if atEOF {
				return false, fmt.Errorf("tokenizer asked for more at the end of the stream") // cannot happen: cut handles the end
			}
			keep := t.pos
			if _, err := t.src.more(keep); err != nil {
				return false, err
			}
			t.pos -= keep
			continue
		}
		return ok, err
	}
}

// seek moves the tokenizer to stream offset off, a record's start, reading
// on to it (a decompressed stream cannot skip).
func (t *tokenizer) seek(off int64) error {
	for t.src.base+int64(len(t.src.buf)) < off {
		ok, err := t.src.more(len(t.src.buf))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the records start at byte %d, past the end of the data", off)
		}
	}
	t.pos = int(off - t.src.base)
	return nil
}

// fieldThenComment ends a record at the comment prefix at j, the unquoted
// field buf[i:j] its last; spaces alone before the prefix, with no field
// before them, are a comment line and no record. Out of cut's loop: comments
// are rare, and cut stays one screen of the hot path.
func (t *tokenizer) fieldThenComment(buf []byte, i, j int, nl int64, atEOF bool) (bool, error) {
	if len(t.fields) == 0 && len(bytes.Trim(buf[i:j], " ")) == 0 {
		return t.commentLine(j, atEOF)
	}
	t.fields = append(t.fields, buf[i:j])
	t.quoted = append(t.quoted, false)
	return t.commentEnd(j, nl, atEOF)
}

// cut is one attempt at next over the bytes there are, for a dialect of
// fields (cutLine is the lines dialect's). The quoted and the unquoted scans
// stay inline, in one loop over the record's fields: they are the loops most
// bytes of most files go through, and a call in that loop (the quoted scan
// as a function) cost plain CSV about 2%.
func (t *tokenizer) cut(atEOF bool) (bool, error) {
	buf := t.src.buf
	if t.betweenRecords(buf) {
		if ok, err := t.skipLines(buf, atEOF); !ok {
			return false, err
		}
		if c := buf[t.pos]; c == '\n' || c == '\r' {
			return t.blankLine(atEOF) // skipLines stops at one only for blankRows
		}
	}
	t.startRecord()
	i := t.pos
	nl := int64(0)
	// cm ends an unquoted field as the delimiter does: the comment prefix,
	// or the delimiter again where there is none.
	cm := t.d.comment
	if cm == 0 {
		cm = t.d.delim
	}
	for {
		// One field from i. One space may stand before its opening quote.
		if t.d.quote != 0 && i < len(buf) && buf[i] == ' ' && t.d.delim != ' ' {
			if i+1 >= len(buf) && !atEOF {
				return false, errNeedMore
			}
			if i+1 < len(buf) && buf[i+1] == t.d.quote {
				i++
			}
		}
		if t.d.quote != 0 && i < len(buf) && buf[i] == t.d.quote {
			j := i + 1
			from := j // start of the pending literal run
			escaped := false
			fieldStart := len(t.scratch)
			for {
				if j >= len(buf) {
					if atEOF {
						return false, &syntaxError{t.src.base + int64(t.pos), errUnclosed}
					}
					return false, errNeedMore
				}
				c := buf[j]
				if t.d.esc != 0 && t.d.esc != t.d.quote && c == t.d.esc {
					if j+1 >= len(buf) {
						if atEOF {
							return false, &syntaxError{t.src.base + int64(j), "escape at the end of the file"}
						}
						return false, errNeedMore
					}
					escaped = true
					t.scratch = append(t.scratch, buf[from:j]...)
					t.scratch = append(t.scratch, buf[j+1])
					j += 2
					from = j
					continue
				}
				if c == t.d.quote {
					if j+1 >= len(buf) && !atEOF {
						return false, errNeedMore
					}
					if j+1 < len(buf) && buf[j+1] == t.d.quote && (t.d.esc == 0 || t.d.esc == t.d.quote) {
						escaped = true
						t.scratch = append(t.scratch, buf[from:j+1]...)
						j += 2
						from = j
						continue
					}
					break
				}
				if c == '\n' {
					nl++
					t.multiline = true
				} else if c == '\r' {
					t.multiline = true
				}
				j++
			}
			if escaped {
				t.scratch = append(t.scratch, buf[from:j]...)
				t.fields = append(t.fields, t.scratch[fieldStart:len(t.scratch):len(t.scratch)])
			} else {
				t.fields = append(t.fields, buf[i+1:j])
			}
			t.quoted = append(t.quoted, true)
			j++ // the closing quote
			for j < len(buf) && buf[j] == ' ' && t.d.spaceFree() {
				j++
			}
			if j >= len(buf) {
				if !atEOF {
					return false, errNeedMore
				}
				t.finish(t.pos, j, nl)
				return true, nil
			}
			switch c := buf[j]; {
			case c == t.d.delim:
				i = j + 1
				continue
			case c == '\n':
				t.finish(t.pos, j+1, nl+1)
				return true, nil
			case c == '\r':
				return t.lineEnd(j, nl, atEOF)
			case c == t.d.comment && c != 0:
				return t.commentEnd(j, nl, atEOF)
			default:
				return false, &syntaxError{t.src.base + int64(j), fmt.Sprintf("unexpected %q after a closing quote (text.Options.NoQuote, --quote none, reads quotes as data)", c)}
			}
		}
		// Unquoted: up to the delimiter, the line end or a comment.
		j := i
		for j < len(buf) {
			c := buf[j]
			if c == t.d.delim || c == '\n' || c == '\r' || c == cm {
				break
			}
			j++
		}
		if j >= len(buf) {
			if !atEOF {
				return false, errNeedMore
			}
			t.fields = append(t.fields, buf[i:j])
			t.quoted = append(t.quoted, false)
			t.finish(t.pos, j, nl)
			return true, nil
		}
		if buf[j] == t.d.comment && t.d.comment != 0 {
			return t.fieldThenComment(buf, i, j, nl, atEOF)
		}
		t.fields = append(t.fields, buf[i:j])
		t.quoted = append(t.quoted, false)
		switch buf[j] {
		case '\n':
			t.finish(t.pos, j+1, nl+1)
			return true, nil
		case '\r':
			return t.lineEnd(j, nl, atEOF)
		}
		i = j + 1 // the delimiter
		if i >= len(buf) && atEOF {
			// A delimiter at the very end: one more, empty field.
			t.fields = append(t.fields, buf[i:i])
			t.quoted = append(t.quoted, false)
			t.finish(t.pos, i, nl)
			return true, nil
		}
	}
}

// betweenRecords reports whether pos is not at a record's first byte: at
// a blank or comment line, or past the bytes there are. It is small enough
// to inline, so that a record that follows a record costs no call.
func (t *tokenizer) betweenRecords(buf []byte) bool {
	if t.pos >= len(buf) {
		return true
	}
	c := buf[t.pos]
	return c == '\n' || c == '\r' || (c == t.d.comment && t.d.comment != 0)
}

// skipLines moves pos past blank and comment lines, to where the next
// record starts. It reports false at the end of the stream.
func (t *tokenizer) skipLines(buf []byte, atEOF bool) (bool, error) {
	for {
		if t.pos >= len(buf) {
			if atEOF {
				return false, nil
			}
			return false, errNeedMore
		}
		c := buf[t.pos]
		switch {
		case (c == '\n' || c == '\r') && t.d.blankRows:
			return true, nil // a record: cut makes it
		case c == '\n':
			t.pos++
			t.consumed++
			continue
		case c == '\r':
			t.pos++
			if t.pos < len(buf) && buf[t.pos] == '\n' {
				t.pos++
			} else if t.pos >= len(buf) && !atEOF {
				t.pos--
				return false, errNeedMore
			}
			t.consumed++
			continue
		case t.d.comment != 0 && c == t.d.comment:
			// A comment ends at a line end, a lone carriage return
			// included, as a record does.
			j := bytes.IndexAny(buf[t.pos:], "\r\n")
			if j < 0 {
				if !atEOF {
					return false, errNeedMore
				}
				t.pos = len(buf)
				continue
			}
			if buf[t.pos+j] == '\r' {
				if t.pos+j+1 >= len(buf) && !atEOF {
					return false, errNeedMore
				}
				if t.pos+j+1 < len(buf) && buf[t.pos+j+1] == '\n' {
					j++
				}
			}
			t.pos += j + 1
			t.consumed++
			continue
		}
		return true, nil
	}
}

// cutLine is cut for the lines dialect: the line from pos is one field. A
// line of spaces only is skipped, as an empty one is.
func (t *tokenizer) cutLine(atEOF bool) (bool, error) {
	buf := t.src.buf
	if t.betweenRecords(buf) {
		if ok, err := t.skipLines(buf, atEOF); !ok {
			return false, err
		}
	}
	t.startRecord()
	i := t.pos
	for {
		if i >= len(buf) {
			if atEOF {
				return false, nil
			}
			return false, errNeedMore
		}
		j := bytes.IndexByte(buf[i:], '\n')
		end, next := 0, 0
		switch {
		case j >= 0:
			end, next = i+j, i+j+1
		case atEOF:
			end, next = len(buf), len(buf)
		default:
			return false, errNeedMore
		}
		// A lone carriage return ends a line too.
		if k := bytes.IndexByte(buf[i:end], '\r'); k >= 0 && i+k+1 < end {
			end, next, j = i+k, i+k+1, k
		} else if k >= 0 && j < 0 && i+k+1 == end {
			j = k // a carriage return as the last byte of the file
		}
		nl := int64(min(j+1, 1))
		if blank(buf[i:end]) {
			t.pos, i = next, next
			t.consumed += nl
			continue
		}
		if end > i && buf[end-1] == '\r' {
			end--
		}
		t.fields = append(t.fields, buf[i:end])
		t.quoted = append(t.quoted, false)
		t.finish(i, next, nl)
		return true, nil
	}
}

// startRecord empties what the last record left.
func (t *tokenizer) startRecord() {
	t.fields = t.fields[:0]
	t.quoted = t.quoted[:0]
	t.scratch = t.scratch[:0]
	t.multiline = false
	t.blank = false
}

// blankLine cuts the blank line at pos as a record of one empty field.
func (t *tokenizer) blankLine(atEOF bool) (bool, error) {
	t.startRecord()
	t.blank = true
	t.fields = append(t.fields, t.src.buf[t.pos:t.pos])
	t.quoted = append(t.quoted, false)
	if t.src.buf[t.pos] == '\n' {
		t.finish(t.pos, t.pos+1, 1)
		return true, nil
	}
	return t.lineEnd(t.pos, 0, atEOF)
}

// commentEnd ends the record at the comment prefix at j: it runs to the
// line's end, which ends the record.
func (t *tokenizer) commentEnd(j int, nl int64, atEOF bool) (bool, error) {
	buf := t.src.buf
	k := bytes.IndexAny(buf[j:], "\r\n")
	if k < 0 {
		if !atEOF {
			return false, errNeedMore
		}
		t.finish(t.pos, len(buf), nl)
		return true, nil
	}
	if buf[j+k] == '\n' {
		t.finish(t.pos, j+k+1, nl+1)
		return true, nil
	}
	return t.lineEnd(j+k, nl, atEOF)
}

// commentLine moves pos past the comment line whose prefix is at j (only
// spaces before it) and cuts the record after it.
func (t *tokenizer) commentLine(j int, atEOF bool) (bool, error) {
	buf := t.src.buf
	k := bytes.IndexAny(buf[j:], "\r\n")
	switch {
	case k < 0 && !atEOF:
		return false, errNeedMore
	case k < 0:
		t.pos = len(buf)
		return false, nil
	}
	end := j + k + 1
	if buf[j+k] == '\r' {
		if end >= len(buf) && !atEOF {
			return false, errNeedMore
		}
		if end < len(buf) && buf[end] == '\n' {
			end++
		}
	}
	t.pos = end
	t.consumed++
	return t.cut(atEOF)
}

// lineEnd ends a record at a '\r' at j, with its '\n' if one follows.
func (t *tokenizer) lineEnd(j int, nl int64, atEOF bool) (bool, error) {
	buf := t.src.buf
	if j+1 >= len(buf) && !atEOF {
		return false, errNeedMore
	}
	if j+1 < len(buf) && buf[j+1] == '\n' {
		j++
	}
	t.finish(t.pos, j+1, nl+1)
	return true, nil
}

// finish records a record cut from buf[from:to], holding nl line ends.
func (t *tokenizer) finish(from, to int, nl int64) {
	t.start = t.src.base + int64(from)
	t.end = t.src.base + int64(to)
	t.line = t.consumed + 1
	t.consumed += nl
	t.pos = to
}

// blank reports whether b holds only spaces, tabs and carriage returns.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// lineStart returns the first index x >= i of buf at which a line starts
// (buf[x-1] ends a line: '\n', or '\r' not followed by '\n'), or -1 if
// the bytes there do not tell. i must be >= 1.
func lineStart(buf []byte, i int, atEOF bool) int {
	for j := i - 1; j < len(buf); j++ {
		switch buf[j] {
		case '\n':
			return j + 1
		case '\r':
			if j+1 >= len(buf) {
				if atEOF {
					return j + 1
				}
				return -1
			}
			if buf[j+1] != '\n' {
				return j + 1
			}
		}
	}
	if atEOF {
		return len(buf)
	}
	return -1
}
