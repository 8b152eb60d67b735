package split

import (
	"fmt"
	"math/bits"

	"github.com/sluicedata/sluice/permutation"
)

// Unit is a piece of a file that can be read on its own: a Parquet row
// group, an ORC stripe, a byte range of a text file.
type Unit struct {
	// Rows is the exact row count, or -1 where it is not known before
	// reading (CSV, JSON, rows behind a filter or equality deletes).
	Rows int64
	// Bytes is the stored size of what reading the unit fetches.
	Bytes int64
	// Paged is set where a read of some of the unit's rows fetches only
	// the pages those rows lie in (formats.Unit.Paged): such a unit may be
	// cut into several chunks (ChunkOptions.CutRows).
	Paged bool
}

// File is what planning needs of one file: its units, in file order.
type File struct {
	Units []Unit
}

// Rows is the file's row count, or -1 if some unit's is unknown.
func (f File) Rows() int64 {
	var n int64
	for _, u := range f.Units {
		if u.Rows < 0 {
			return -1
		}
		n += u.Rows
	}
	return n
}

// Chunk is a run of whole units of one file, or a run of rows of one paged
// unit too large to be read whole (ChunkOptions.CutRows): what chunk-order
// shuffling moves around.
type Chunk struct {
	// Fragment indexes the files.
	Fragment int
	// Start and End are rows of the file, [Start, End), or both -1 where
	// the file's row counts are unknown.
	Start, End int64
	// FirstUnit and EndUnit are the chunk's units, [FirstUnit, EndUnit):
	// the units its rows lie in (one, for a chunk cut from a unit).
	FirstUnit, EndUnit int
	// Bytes is the stored size of the chunk's units (of its share of its
	// unit's, by rows, for a chunk cut from a unit).
	Bytes int64
	// Paged is set on the chunks of a paged unit larger than
	// ChunkOptions.CutRows (the unit whole, or cut): a read of some of its
	// rows fetches only their pages, so a window may take part of it
	// (NewEpoch).
	Paged bool
}

// Rows is the chunk's row count, or -1 if unknown.
func (c Chunk) Rows() int64 {
	if c.Start < 0 {
		return -1
	}
	return c.End - c.Start
}

// ChunkOptions configure Chunks.
type ChunkOptions struct {
	// TargetBytes packs consecutive units of a file into one chunk until
	// the chunk holds at least this many bytes. Default 1 MiB: small enough
	// that a shuffle window mixes many chunks, large enough that tiny units
	// do not become tiny requests.
	TargetBytes int64
	// MaxRows, if positive, stops packing before a chunk would exceed this
	// many rows (a single unit larger than MaxRows is still one chunk,
	// unless CutRows cuts it).
	MaxRows int64
	// CutRows, if positive, makes every paged unit (Unit.Paged) of more
	// than CutRows rows chunks of its own, Paged: it is cut into chunks of
	// rows (places) where it holds two chunks' worth or more, as many as
	// hold max(MaxRows, CutBytes's worth) rows each, equal within a row, so
	// that the chunk order moves its parts apart. A window never holds more
	// than its rows of a Paged chunk, whatever its size (NewEpoch cuts
	// pieces for it), so chunks need not be as small as the window. Other
	// units are never cut: reading part of one fetches it whole.
	CutRows int64
	// CutBytes is the stored bytes a chunk cut from a unit holds at least:
	// cutting fetches the pages at the cut twice where two windows read
	// its two sides, and decodes from the start of the page a read starts
	// in, a cost paid per cut that a chunk of many pages makes small.
	// Default 0: MaxRows alone sizes them.
	CutBytes int64
}

// Chunks cuts every file into chunks in storage order: runs of whole
// units, and runs of rows of the paged units CutRows cuts. Units without
// rows contribute nothing. A file whose counts are unknown is cut by bytes
// alone, its units whole.
func Chunks(files []File, o ChunkOptions) []Chunk {
	if o.TargetBytes <= 0 {
		o.TargetBytes = 1 << 20
	}
	var out []Chunk
	for fi, f := range files {
		known := f.Rows() >= 0
		var row int64
		cur := Chunk{Fragment: fi}
		empty := func() bool { return cur.EndUnit == cur.FirstUnit }
		for ui, u := range f.Units {
			if u.Rows == 0 {
				continue
			}
			if n := o.cuts(u); known && n > 0 {
				if !empty() {
					out = append(out, cur)
					cur = Chunk{Fragment: fi}
				}
				out = appendCut(out, fi, ui, row, u, n)
				row += u.Rows
				continue
			}
			full := cur.Bytes >= o.TargetBytes || (known && o.MaxRows > 0 && cur.End-cur.Start+u.Rows > o.MaxRows)
			if !empty() && full {
				out = append(out, cur)
				cur = Chunk{Fragment: fi}
			}
			if empty() {
				cur.FirstUnit, cur.Start, cur.End = ui, row, row
				if !known {
					// Every chunk of the file, not only its last, says
					// its rows are unknown.
					cur.Start, cur.End = -1, -1
				}
			}
			cur.EndUnit = ui + 1
			cur.Bytes += u.Bytes
			if known {
				row += u.Rows
				cur.End = row
			}
		}
		if !empty() {
			out = append(out, cur)
		}
	}
	return out
}

// cuts is the number of chunks paged unit u is cut into (one, where it
// holds fewer than two chunks' worth), or 0 where it is not paged or not
// larger than CutRows: it is then packed with its neighbours.
func (o ChunkOptions) cuts(u Unit) int64 {
	if o.CutRows <= 0 || !u.Paged || u.Rows <= o.CutRows {
		return 0
	}
	least := o.MaxRows
	switch {
	case o.CutBytes <= 0:
	case o.CutBytes >= u.Bytes:
		least = u.Rows
	default:
		least = max(least, mulDiv(u.Rows, o.CutBytes, u.Bytes)) // the rows holding CutBytes
	}
	return max(u.Rows/max(least, 1), 1) // as many as hold least rows each
}

// appendCut appends the n chunks unit ui of file fi (starting at file row
// row) is cut into: equal rows within one, the first ones the larger, and
// the unit's bytes shared by rows so that they add up to its own.
func appendCut(out []Chunk, fi, ui int, row int64, u Unit, n int64) []Chunk {
	at := row
	var bytes int64
	for k := range n {
		rows := u.Rows / n
		if k < u.Rows%n {
			rows++
		}
		c := Chunk{Fragment: fi, Start: at, End: at + rows, FirstUnit: ui, EndUnit: ui + 1, Paged: true}
		at += rows
		// The share of the unit's bytes up to the chunk's end, less what
		// the chunks before took.
		upTo := mulDiv(u.Bytes, at-row, u.Rows)
		c.Bytes = upTo - bytes
		bytes = upTo
		out = append(out, c)
	}
	return out
}

// mulDiv is a*b/c, rounded down, without overflow, for a, b >= 0, c > 0
// and b <= c.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c)) // hi < c, as a*b <= a*c
	return int64(q)
}

// Piece is the part of a chunk that falls in one split.
type Piece struct {
	// Chunk indexes the chunk list.
	Chunk    int
	Fragment int
	// Start and End are rows of the file, or -1 where unknown.
	Start, End int64
	// FirstUnit and EndUnit are the units of the piece's chunk: the piece's
	// rows lie within them (where counts are unknown, the piece is the
	// whole chunk and reads them all).
	FirstUnit, EndUnit int
	// Pass is the rows of [Start, End) the piece keeps, where the epoch
	// reads its chunks in several passes: the piece reads every row of the
	// range and keeps the pass's. The zero Pass keeps every row.
	Pass Pass
}

// Rows is the piece's row count (the rows its pass keeps), or -1 if
// unknown.
func (p Piece) Rows() int64 {
	if p.Start < 0 {
		return -1
	}
	return p.Pass.Count(p.Start, p.End)
}

// Span is the file rows the piece reads, [Start, End): its Rows and, with
// passes, the rows of other passes between them. -1 if unknown.
func (p Piece) Span() int64 {
	if p.Start < 0 {
		return -1
	}
	return p.End - p.Start
}

// FileRow is the file row of the piece's k-th row (from 0, k < Rows).
func (p Piece) FileRow(k int64) int64 {
	return p.Pass.After(p.Start, k+1) - 1
}

// Follows reports whether p begins where prev ends in the same file: the
// two can be fetched in one request.
func (p Piece) Follows(prev Piece) bool {
	if p.Fragment != prev.Fragment {
		return false
	}
	if p.Start >= 0 && prev.Start >= 0 {
		return p.Start == prev.End
	}
	return p.Start < 0 && prev.Start < 0 && p.FirstUnit == prev.EndUnit
}

// Split is one of NumSplits disjoint parts of an epoch.
type Split struct {
	Pieces []Piece
	// Rows is the split's row count, or -1 if unknown.
	Rows int64
}

// ErrUnknownRows is returned when DropRemainder is asked of chunks whose row
// counts are not known before reading.
var ErrUnknownRows = permutation.ErrUnknownRows

// Balance deals the chunks, taken in the given order, into numSplits
// contiguous runs. With known counts the runs are balanced by rows: their row
// counts differ by at most one (are equal with dropRemainder, which drops the
// last rows%numSplits rows of the order), and a split may start or end
// inside a chunk. Where some count is unknown, whole chunks are dealt
// balanced by bytes.
func Balance(chunks []Chunk, order []int, numSplits int, dropRemainder bool) ([]Split, error) {
	return balance(chunks, places(chunks, 1, 1), order, numSplits, dropRemainder)
}

// balance is Balance over places (one per chunk where an epoch reads each
// chunk once), taken in the given order of places.
func balance(chunks []Chunk, pls []place, order []int, numSplits int, dropRemainder bool) ([]Split, error) {
	if numSplits < 1 {
		return nil, fmt.Errorf("split: NumSplits %d must be at least 1", numSplits)
	}
	if len(order) != len(pls) {
		return nil, fmt.Errorf("split: order has %d entries for %d chunks", len(order), len(pls))
	}
	known := true
	var total int64
	for _, pl := range pls {
		n := pl.rows(chunks)
		if n < 0 {
			known = false
		}
		total += max(n, 0)
	}
	if !known {
		if dropRemainder {
			return nil, fmt.Errorf("%w: DropRemainder needs exact counts", ErrUnknownRows)
		}
		if len(pls) != len(chunks) {
			return nil, fmt.Errorf("%w: reading chunks in several passes needs exact counts", ErrUnknownRows)
		}
		return byBytes(chunks, order, numSplits), nil
	}
	n := int64(numSplits)
	per, extra := total/n, total%n
	if dropRemainder {
		extra = 0
	}
	splits := make([]Split, numSplits)
	si := 0
	want := func(i int) int64 {
		if int64(i) < extra {
			return per + 1
		}
		return per
	}
	for si < len(splits) && want(si) == 0 {
		si++
	}
	for _, pi := range order {
		pl := pls[pi]
		c := chunks[pl.chunk]
		at := c.Start
		left := pl.rows(chunks)
		for left > 0 && si < len(splits) {
			take := min(left, want(si)-splits[si].Rows)
			end := pl.pass.After(at, take)
			if left -= take; left == 0 {
				// The place's last piece reads to the chunk's end, so that
				// its pieces tile the chunk's rows as they do in one pass.
				end = c.End
			}
			splits[si].Pieces = append(splits[si].Pieces, Piece{Chunk: pl.chunk, Fragment: c.Fragment, Start: at, End: end, FirstUnit: c.FirstUnit, EndUnit: c.EndUnit, Pass: pl.pass})
			splits[si].Rows += take
			at = end
			for si < len(splits) && splits[si].Rows == want(si) {
				si++
			}
		}
	}
	return splits, nil
}

// byBytes deals whole chunks into contiguous runs whose bytes are close to
// total/n each.
func byBytes(chunks []Chunk, order []int, n int) []Split {
	var total int64
	for _, c := range chunks {
		total += c.Bytes
	}
	splits := make([]Split, n)
	var acc int64
	for _, ci := range order {
		c := chunks[ci]
		si := 0
		if total > 0 {
			si = int((acc*int64(n) + c.Bytes*int64(n)/2) / total) // by the chunk's midpoint
		}
		si = min(si, n-1)
		p := Piece{Chunk: ci, Fragment: c.Fragment, Start: c.Start, End: c.End, FirstUnit: c.FirstUnit, EndUnit: c.EndUnit}
		splits[si].Pieces = append(splits[si].Pieces, p)
		acc += c.Bytes
	}
	for i := range splits {
		for _, p := range splits[i].Pieces {
			if p.Rows() < 0 || splits[i].Rows < 0 {
				splits[i].Rows = -1
				continue
			}
			splits[i].Rows += p.Rows()
		}
	}
	return splits
}
