package text

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/formats"
)

// A byte range of a split file finds its first record at the first line
// start at or after its start. That holds only if no quoted field holds a
// line end across the cut, and the sample rules that out only for its own
// records: a quoted line end further on would have the range after the cut
// take the lines inside the field for records, and deliver them before the
// range before the cut could fail. Nothing in a range's own bytes tells a
// line inside a quoted field from a record, so a split CSV file whose
// dialect quotes has its cuts found at plan time by a quote-aware scan of
// the whole file from its first record (one sequential read, no value
// parsing, kept in the plan cache): each cut moves to the start of the
// first record at or after it, so that every range starts on a record and
// no record straddles a cut. JSON Lines needs no scan (a JSON string holds
// no raw line end), nor CSV without quoting; the counting pass scans the
// file anyway and finds the same.

// settleCuts moves the cuts of a split CSV file to record starts: from the
// plan cache if it has them, else by scanning the file. A file the scan
// cannot cut (a quote left open, a record over the size limit) is read
// whole, which reports the problem the way a read of the whole file does.
func (f *Format) settleCuts(ctx context.Context, fr *formats.Fragment, m *meta) error {
	if !m.split || f.kind == JSONLines || f.kind == JSON || m.d.quote == 0 {
		return nil
	}
	key := fr.CacheKey("text-cuts/" + f.cutsFingerprint(m))
	if c := fr.Cache(); c != nil {
		var cached []int64
		if v, err := c.Get(ctx, key); err == nil && json.Unmarshal(v, &cached) == nil && validCuts(cached, m.bounds) {
			m.bounds = cached
			return nil
		}
	}
	bounds, err := f.scanCuts(ctx, fr, m.d, m.bounds)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var se *syntaxError
		if !errors.As(err, &se) && !errors.Is(err, errRecordTooLarge) {
			return fmt.Errorf("finding record boundaries: %w", err)
		}
		m.split = false
		m.whole = fmt.Sprintf("the scan for record boundaries stopped: %v", err)
		m.bounds = []int64{0, fr.Size}
		return nil
	}
	m.bounds = bounds
	if c := fr.Cache(); c != nil {
		if v, err := json.Marshal(bounds); err == nil {
			_ = c.Set(ctx, key, v) // a cache that fails costs a rescan, no more
		}
	}
	return nil
}

// cutsFingerprint names what a file's cuts depend on besides its bytes.
func (f *Format) cutsFingerprint(m *meta) string {
	return fmt.Sprintf("%s|%q|%q|%q|%t|%d", f.kind, m.d.quote, m.d.esc, m.d.comment, m.header, f.opts.UnitBytes)
}

// validCuts reports whether cached bounds fit a file planned as planned:
// the same first and last bound and count, ascending, each at or after its
// planned cut.
func validCuts(cached, planned []int64) bool {
	if len(cached) != len(planned) || cached[0] != planned[0] || cached[len(cached)-1] != planned[len(planned)-1] {
		return false
	}
	for i := 1; i < len(cached); i++ {
		if cached[i] < cached[i-1] || cached[i] < planned[i] {
			return false
		}
	}
	return true
}

// scanCuts reads the file from its first record with the tokenizer a read
// uses and returns bounds with each cut moved to the first record start at
// or after it (the file's end if none): ranges then own exactly the
// records that start in them, as in a read of the whole file.
func (f *Format) scanCuts(ctx context.Context, fr *formats.Fragment, d dialect, bounds []int64) ([]int64, error) {
	out := make([]int64, len(bounds))
	copy(out, bounds)
	start, cut, err := f.quoteFree(ctx, fr, d.quote, bounds, out)
	if err != nil || cut >= len(bounds)-1 {
		return out, err
	}
	return f.tokenCuts(ctx, fr, d, bounds, out, start, cut)
}

// tokenCuts settles the cuts from cut on with the tokenizer, reading from
// start, a record boundary.
func (f *Format) tokenCuts(ctx context.Context, fr *formats.Fragment, d dialect, bounds, out []int64, start int64, cut int) ([]int64, error) {
	size := fr.Size
	src := &source{r: io.NewSectionReader(fr.Source.ReaderAt(ctx), start, size-start), base: start, step: 1 << 20}
	t := &tokenizer{src: src, d: d}
	for n := 0; cut < len(bounds)-1; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		for cut < len(bounds)-1 && bounds[cut] <= t.start {
			out[cut] = t.start
			cut++
		}
	}
	for ; cut < len(bounds)-1; cut++ {
		out[cut] = size // no record starts at or after it
	}
	return out, nil
}

// quoteFreeBlock is the bytes quoteFree reads at a time (a variable so
// that tests can make blocks end everywhere).
var quoteFreeBlock = 1 << 20

// quoteFree settles the cuts that lie in the stretch of the file from its
// first record that holds no quote byte, block by block: there every line
// start is a record start (or a blank or comment line's, which a range
// skips as a read of the whole file does), so a cut moves to the first line
// start at or after it with no tokenizing. It returns the line start at
// which the tokenizer must take over (a record boundary: the last line
// start before the first block holding a quote) and the next cut to settle.
func (f *Format) quoteFree(ctx context.Context, fr *formats.Fragment, quote byte, bounds, out []int64) (int64, int, error) {
	block := quoteFreeBlock
	ra := fr.Source.ReaderAt(ctx)
	at, cut, last := bounds[0], 1, len(bounds)-1
	buf := make([]byte, block)
	for cut < last && at < fr.Size {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		n, err := ra.ReadAt(buf[:min(int64(block), fr.Size-at)], at)
		if n < int(min(int64(block), fr.Size-at)) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, fmt.Errorf("read bytes [%d, %d): %w", at, at+int64(len(buf)), err)
		}
		b := buf[:n]
		if bytes.IndexByte(b, quote) >= 0 {
			return at, cut, nil
		}
		eof := at+int64(n) >= fr.Size
		// next is where the following block starts: after the last line
		// end in this one, whose bytes are all known.
		next := int64(-1)
		if eof {
			next = fr.Size
		} else if i := bytes.LastIndexAny(b[:n-1], "\n\r"); i >= 0 {
			next = at + int64(i) + 1
			if b[i] == '\r' && b[i+1] == '\n' { // i < n-1: the byte after is in the block
				next++
			}
		}
		// Every cut up to next is settled here: next, a line start, is at
		// or after its first line start. A cut past next may be too,
		// where its line start is known.
		for cut < last && (bounds[cut] < at+int64(n) || bounds[cut] <= next) {
			if bounds[cut] <= at {
				// at is a line start and every cut before it is settled.
				out[cut] = at
				cut++
				continue
			}
			x := lineStart(b, int(bounds[cut]-at), eof)
			if x < 0 || (next >= 0 && at+int64(x) > next) {
				break // its line start lies past what this block knows
			}
			out[cut] = at + int64(x)
			cut++
		}
		if next < 0 || next <= at {
			return at, cut, nil // a line longer than a block: the tokenizer reads on
		}
		at = next
	}
	for ; cut < last && at >= fr.Size; cut++ {
		out[cut] = fr.Size
	}
	return at, cut, nil
}
