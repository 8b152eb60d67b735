package split

import (
	"fmt"
	"sort"

	"github.com/sluicedata/sluice/permutation"
)

// Random access maps a position of an epoch's order back to the row that
// Batches delivers there, without walking the epoch: a position of the
// rank-interleaved order becomes a split and an offset of that split's order
// (Interleave), an offset of a split becomes a window and an offset of the
// window's emission order (Epoch.Seek), and an offset of a window's emission
// order becomes a piece and a file row (Epoch.Row). Only the last step needs
// the window's row order, which a caller computes once per window and keeps.

// ErrPosition is wrapped when a position lies outside the order it is
// looked up in.
var ErrPosition = permutation.ErrPosition

// Interleave is the order in which one consumer takes the rows of several
// splits: round-robin, batchSize rows of a split at a time (fewer for a
// split's last batch), a finished split skipped, as Schedule walks them from
// the start of an epoch. It needs every split's count.
type Interleave struct {
	rows  []int64
	batch int64
	total int64
}

// NewInterleave returns the interleaving of splits holding rows[i] rows each
// (in the order the consumer takes them round-robin) in batches of
// batchSize.
func NewInterleave(rows []int64, batchSize int) (*Interleave, error) {
	if batchSize < 1 {
		return nil, fmt.Errorf("split: batch size %d must be at least 1", batchSize)
	}
	iv := &Interleave{rows: append([]int64(nil), rows...), batch: int64(batchSize)}
	for i, n := range rows {
		if n < 0 {
			return nil, fmt.Errorf("%w: split %d's count is not known before reading (a counting pass would make it so)", ErrUnknownRows, i)
		}
		iv.total += n
	}
	return iv, nil
}

// Len is the rows of the interleaved order.
func (iv *Interleave) Len() int64 { return iv.total }

// before is the rows taken in rounds [0, k): each split gives min(rows,
// k*batch) of them.
func (iv *Interleave) before(k int64) int64 {
	var n int64
	for _, r := range iv.rows {
		n += min(r, k*iv.batch)
	}
	return n
}

// Locate returns the split (an index into the rows given) and the offset in
// that split's own order of position pos.
func (iv *Interleave) Locate(pos int64) (split int, offset int64, err error) {
	if pos < 0 || pos >= iv.total {
		return 0, 0, fmt.Errorf("%w: %d is not in [0, %d)", ErrPosition, pos, iv.total)
	}
	// The round pos falls in: the last k with before(k) <= pos.
	var most int64
	for _, r := range iv.rows {
		most = max(most, (r+iv.batch-1)/iv.batch)
	}
	k := int64(sort.Search(int(most), func(k int) bool { return iv.before(int64(k)+1) > pos }))
	off := pos - iv.before(k)
	at := k * iv.batch
	for s, r := range iv.rows {
		if r <= at {
			continue
		}
		take := min(iv.batch, r-at)
		if off < take {
			return s, at + off, nil
		}
		off -= take
	}
	return 0, 0, fmt.Errorf("split: internal error: position %d found in no split of round %d", pos, k)
}

// Seek returns the window of split s that emits the split's offset q, and
// the offset of q in that window's emission order. It needs the split's
// window counts.
func (e *Epoch) Seek(s int, q int64) (WindowRef, int64, error) {
	if s < 0 || s >= len(e.Splits) {
		return WindowRef{}, 0, fmt.Errorf("%w: split %d is not in [0, %d)", ErrPosition, s, len(e.Splits))
	}
	rows := e.Splits[s].Rows
	if rows < 0 {
		return WindowRef{}, 0, fmt.Errorf("%w: split %d's count is not known before reading (a counting pass would make it so)", ErrUnknownRows, s)
	}
	if q < 0 || q >= rows {
		return WindowRef{}, 0, fmt.Errorf("%w: %d is not in split %d's [0, %d)", ErrPosition, q, s, rows)
	}
	return SeekWindow(e.WindowStarts(s), s, q)
}

// WindowStarts is the first offset of each of split s's windows in the
// split's order, and the split's rows last (len(windows)+1 entries), for
// SeekWindow; -1 entries where counts are unknown.
func (e *Epoch) WindowStarts(s int) []int64 {
	ws := e.Windows[s]
	out := make([]int64, len(ws)+1)
	for i, w := range ws {
		if w.Rows < 0 || out[i] < 0 {
			out[i+1] = -1
			continue
		}
		out[i+1] = out[i] + w.Rows
	}
	return out
}

// SeekWindow is Seek by binary search over split s's WindowStarts.
func SeekWindow(starts []int64, s int, q int64) (WindowRef, int64, error) {
	n := starts[len(starts)-1]
	if n < 0 {
		return WindowRef{}, 0, fmt.Errorf("%w: split %d's count is not known before reading (a counting pass would make it so)", ErrUnknownRows, s)
	}
	if q < 0 || q >= n {
		return WindowRef{}, 0, fmt.Errorf("%w: %d is not in split %d's [0, %d)", ErrPosition, q, s, n)
	}
	w := sort.Search(len(starts)-1, func(i int) bool { return starts[i+1] > q })
	return WindowRef{s, w}, q - starts[w], nil
}

// WindowOrder is the emission order of window r where its pieces' counts
// are known (nil: storage order), as Batches computes it from the pieces'
// rows as read.
func (e *Epoch) WindowOrder(r WindowRef) []int32 {
	pieces := e.Pieces(r)
	segs := make([]int64, len(pieces))
	for i, p := range pieces {
		segs[i] = p.Rows()
	}
	return e.RowOrder(r, segs)
}

// Row returns the piece (an index into Pieces(r)) and the file row that
// window r emits at offset off of its emission order, given the window's
// order (WindowOrder).
func (e *Epoch) Row(r WindowRef, order []int32, off int64) (piece int, fileRow int64, err error) {
	w := e.Windows[r.Split][r.Window]
	if w.Rows < 0 || off < 0 || off >= w.Rows {
		return 0, 0, fmt.Errorf("%w: %d is not in split %d window %d's [0, %d)", ErrPosition, off, r.Split, r.Window, w.Rows)
	}
	k := off
	if order != nil {
		if int64(len(order)) != w.Rows {
			return 0, 0, fmt.Errorf("split: window order has %d entries for %d rows", len(order), w.Rows)
		}
		k = int64(order[off])
	}
	for i, p := range e.Pieces(r) {
		if k < p.Rows() {
			return i, p.FileRow(k), nil
		}
		k -= p.Rows()
	}
	return 0, 0, fmt.Errorf("split: internal error: row %d is past split %d window %d's pieces", k, r.Split, r.Window)
}
