// Package split cuts a planned dataset into chunks and chunks into balanced
// splits. Pure functions: no I/O, no goroutines, the same output for the same
// input on any machine.
package split

import (
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/formats"
)

// Chunk is a row range of one fragment made of whole units (row groups), the
// unit that chunk-order shuffling moves around.
type Chunk struct {
	// Fragment indexes the dataset's fragments.
	Fragment int
	// Start and End are rows of the fragment, [Start, End). Where the
	// fragment's row count is unknown the chunk is the whole fragment and
	// both are -1.
	Start, End int64
	// Bytes is the stored size of the chunk's selected columns.
	Bytes int64
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
	// TargetBytes packs consecutive row groups of a file into one chunk
	// until the chunk holds at least this many bytes of the selected columns.
	// Default 1 MiB: small enough that a shuffle window mixes many chunks,
	// large enough that tiny row groups do not become tiny requests.
	TargetBytes int64
	// MaxRows, if positive, stops packing before a chunk would exceed this
	// many rows (a single row group larger than MaxRows is still one chunk:
	// row groups are never cut, so their bytes are fetched once).
	MaxRows int64
}

// Chunks cuts every fragment into chunks of whole units, in storage order.
// Fragments and units without rows contribute nothing.
func Chunks(frags []*formats.Fragment, o ChunkOptions) []Chunk {
	if o.TargetBytes <= 0 {
		o.TargetBytes = 1 << 20
	}
	var out []Chunk
	for fi, f := range frags {
		if f.Rows < 0 {
			var b int64
			for _, u := range f.Units {
				b += u.Bytes
			}
			out = append(out, Chunk{Fragment: fi, Start: -1, End: -1, Bytes: b})
			continue
		}
		var row int64
		cur := Chunk{Fragment: fi, Start: 0}
		for _, u := range f.Units {
			if u.Rows == 0 {
				continue
			}
			if cur.End > cur.Start && (cur.Bytes >= o.TargetBytes || (o.MaxRows > 0 && cur.End-cur.Start+u.Rows > o.MaxRows)) {
				out = append(out, cur)
				cur = Chunk{Fragment: fi, Start: row}
			}
			if cur.End == cur.Start {
				cur.Start = row
			}
			row += u.Rows
			cur.End = row
			cur.Bytes += u.Bytes
		}
		if cur.End > cur.Start {
			out = append(out, cur)
		}
	}
	return out
}

// Piece is the part of a chunk that falls in one split.
type Piece struct {
	// Chunk indexes the chunk list.
	Chunk    int
	Fragment int
	// Start and End are rows of the fragment, or -1 where unknown.
	Start, End int64
}

// Rows is the piece's row count, or -1 if unknown.
func (p Piece) Rows() int64 {
	if p.Start < 0 {
		return -1
	}
	return p.End - p.Start
}

// Split is one of NumSplits disjoint parts of an epoch.
type Split struct {
	Pieces []Piece
	// Rows is the split's row count, or -1 if unknown.
	Rows int64
}

// Options configure Balance.
type Options struct {
	// NumSplits is the number of splits; at least 1.
	NumSplits int
	// DropRemainder makes every split hold exactly floor(rows/NumSplits)
	// rows by dropping the last rows%NumSplits rows of the ordered sequence
	// (fewer than NumSplits rows, the same ones for the same order), so that
	// every rank yields the same number of batches. It needs known counts.
	DropRemainder bool
}

// ErrUnknownRows is returned when DropRemainder is asked of chunks whose row
// counts are not known before reading.
var ErrUnknownRows = errors.New("split: row counts are unknown")

// Balance deals the chunks, taken in the given order, into NumSplits
// contiguous runs. With known counts the runs are balanced by rows: their row
// counts differ by at most one, and a split may start or end inside a chunk.
// Where some count is unknown, whole chunks are dealt balanced by bytes.
func Balance(chunks []Chunk, order []int, o Options) ([]Split, error) {
	if o.NumSplits < 1 {
		return nil, fmt.Errorf("split: NumSplits %d must be at least 1", o.NumSplits)
	}
	if len(order) != len(chunks) {
		return nil, fmt.Errorf("split: order has %d entries for %d chunks", len(order), len(chunks))
	}
	known := true
	var total int64
	for _, c := range chunks {
		if c.Rows() < 0 {
			known = false
		}
		total += max(c.Rows(), 0)
	}
	if !known {
		if o.DropRemainder {
			return nil, fmt.Errorf("%w: DropRemainder needs exact counts", ErrUnknownRows)
		}
		return byBytes(chunks, order, o.NumSplits), nil
	}
	n := int64(o.NumSplits)
	per, extra := total/n, total%n
	if o.DropRemainder {
		extra = 0
	}
	splits := make([]Split, o.NumSplits)
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
	for _, ci := range order {
		c := chunks[ci]
		at := c.Start
		for at < c.End && si < len(splits) {
			take := min(c.End-at, want(si)-splits[si].Rows)
			splits[si].Pieces = append(splits[si].Pieces, Piece{Chunk: ci, Fragment: c.Fragment, Start: at, End: at + take})
			splits[si].Rows += take
			at += take
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
		splits[si].Pieces = append(splits[si].Pieces, Piece{Chunk: ci, Fragment: c.Fragment, Start: -1, End: -1})
		splits[si].Rows = -1
		acc += c.Bytes
	}
	return splits
}
