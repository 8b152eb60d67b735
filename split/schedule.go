package split

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicedata/sluice/permutation"
)

// ErrCursor is wrapped when a cursor does not fit the epoch it is checked
// against: a state from another plan, or a corrupt one.
var ErrCursor = errors.New("split: cursor does not fit the epoch")

// Epoch is what one epoch's order is made of: a pure function of the chunk
// list, the Order and the epoch number.
type Epoch struct {
	Epoch int64
	Order permutation.Order
	// Splits are the epoch's NumSplits splits.
	Splits []Split
	// Windows are each split's windows, in the order it emits them.
	Windows [][]Window
}

// NewEpoch orders the chunks for epoch e, deals them into splits and packs
// each split's pieces into windows.
//
// With o.Passes above one, every chunk is read that many times, each pass
// keeping a disjoint part of its rows (Pass): the chunk order then moves
// the (chunk, pass) places, Passes of them per chunk, and the splits and
// windows are cut from places as they are from chunks in one pass.
func NewEpoch(chunks []Chunk, o permutation.Order, e int64) (*Epoch, error) {
	pls := places(chunks, o.Passes, int64(o.ClumpSize))
	order := permutation.ChunkOrder(len(pls), o, e)
	splits, err := balance(chunks, pls, order, o.NumSplits, o.DropRemainder)
	if err != nil {
		return nil, err
	}
	ep := &Epoch{Epoch: e, Order: o, Splits: splits, Windows: make([][]Window, len(splits))}
	for s := range splits {
		splits[s].Pieces = windowSized(chunks, splits[s].Pieces, readRows(o))
		sp := splits[s]
		rows := make([]int64, len(sp.Pieces))
		for i, p := range sp.Pieces {
			rows[i] = p.Rows()
		}
		ep.Windows[s] = Windows(rows, o.ShuffleWindow)
	}
	return ep, nil
}

// readRows is the most rows of a paged chunk that one piece reads
// (windowSized): the window's, where the window shuffles them; twice
// that in storage order, where a window's rows only bound the memory it
// decodes, and a row group of up to twice the window is read whole
// anyway. Half the pieces halve what every piece costs a read (its
// requests, its fetch's and decode's hand-offs, its columns' readers), and
// pieces of 131,072 rows meet the page boundaries of numeric columns in
// the common writers' 1 MiB pages, where pieces of 65,536 rows each began
// or ended inside a page their neighbour decoded too: in storage order, a
// file of pyarrow's 1,048,576-row groups read at 0.9 of the same rows in
// 131,072-row groups, and at 1.0 with these pieces (docs/performance.md).
// The order is the same rows either way; only the cursors of a state
// count windows otherwise (see Epoch.Rebase).
func readRows(o permutation.Order) int {
	if o.Shuffle || o.ShuffleWindow > math.MaxInt/2 {
		return o.ShuffleWindow
	}
	return 2 * o.ShuffleWindow
}

// windowSized cuts every piece of a paged chunk (Chunk.Paged) of more
// than size rows into consecutive pieces of at most size rows, equal
// within a row, so that no window holds more than size rows of it: a
// split reads such a chunk a window at a time, fetching its pages as it
// goes (the fetch planner joins the pieces' requests). A piece of another
// chunk stays whole, a window of its own where it is larger: reading part
// of it would fetch it whole.
func windowSized(chunks []Chunk, pieces []Piece, size int) []Piece {
	if size <= 0 {
		return pieces
	}
	w := int64(size)
	var out []Piece
	for i, p := range pieces {
		n := p.Rows()
		if n <= w || !chunks[p.Chunk].Paged {
			if out != nil {
				out = append(out, p)
			}
			continue
		}
		if out == nil {
			out = append(make([]Piece, 0, len(pieces)+int(n/w)), pieces[:i]...)
		}
		k := (n + w - 1) / w
		at := p.Start
		for j := range k {
			rows := n / k
			if j < n%k {
				rows++
			}
			q := p
			q.Start, q.End = at, p.Pass.After(at, rows)
			if j == k-1 {
				q.End = p.End // the last reads to the piece's end, as the piece did
			}
			out = append(out, q)
			at = q.End
		}
	}
	if out == nil {
		return pieces
	}
	return out
}

// Count gives the epoch the rows a counting pass found in the chunks whose
// counts the plan does not know (rows[c] for chunk c; entries of chunks of
// known counts are not read): every window and split whose pieces are all
// counted gets its count. Pieces, windows and the order stay as they are,
// so a counted epoch emits the same rows in the same order as one that
// learns its counts by reading.
func (e *Epoch) Count(rows []int64) error {
	for s, ws := range e.Windows {
		e.Splits[s].Rows = 0
		for w := range ws {
			var n int64
			for _, p := range e.Pieces(WindowRef{s, w}) {
				k := p.Rows()
				if k < 0 {
					if p.Chunk < 0 || p.Chunk >= len(rows) || rows[p.Chunk] < 0 {
						return fmt.Errorf("split: no count for chunk %d of split %d window %d", p.Chunk, s, w)
					}
					k = rows[p.Chunk]
				}
				n += k
			}
			ws[w].Rows = n
			e.Splits[s].Rows += n
		}
	}
	return nil
}

// WindowRef names one window of one split.
type WindowRef struct{ Split, Window int }

// Pieces are the pieces window r is made of, in order.
func (e *Epoch) Pieces(r WindowRef) []Piece {
	w := e.Windows[r.Split][r.Window]
	return e.Splits[r.Split].Pieces[w.First:w.End]
}

// RowOrder is the order in which window r emits its rows, given the rows
// each of its pieces holds as read (nil: storage order).
func (e *Epoch) RowOrder(r WindowRef, segments []int64) []int32 {
	return permutation.RowOrder(segments, e.Order, e.Epoch, r.Split, r.Window)
}

// Cursor is how far the consumer got in one split this epoch. It names a
// window and the rows of it delivered, never a global row number, so it
// also works where row counts are unknown up front.
type Cursor struct {
	// Window is the index of the window in the split's order for the epoch.
	Window int `msgpack:"window" json:"window"`
	// Offset is the number of rows of that window already delivered.
	Offset int64 `msgpack:"offset" json:"offset"`
	// Rows is the number of rows of the split delivered this epoch.
	Rows int64 `msgpack:"rows" json:"rows"`
}

// End is the cursor of split s once every row of it is delivered. Its
// Rows is 0 where the split's count is unknown, which CheckCursor accepts.
func (e *Epoch) End(s int) Cursor {
	return Cursor{Window: len(e.Windows[s]), Rows: max(e.Splits[s].Rows, 0)}
}

// Remaining is the rows of split s after cursor c, or -1 if unknown.
func (e *Epoch) Remaining(s int, c Cursor) int64 {
	if e.Splits[s].Rows < 0 {
		return -1
	}
	return e.Splits[s].Rows - c.Rows
}

// CheckCursor returns an error wrapping ErrCursor if c cannot be a position
// of split s: past its windows, past a window's rows, or with a row count
// its window and offset contradict.
func (e *Epoch) CheckCursor(s int, c Cursor) error {
	if s < 0 || s >= len(e.Windows) {
		return fmt.Errorf("%w: split %d of %d", ErrCursor, s, len(e.Windows))
	}
	return checkCursor(e.Windows[s], s, c)
}

// checkCursor is CheckCursor of split s's windows ws.
func checkCursor(ws []Window, s int, c Cursor) error {
	switch {
	case c.Window < 0 || c.Offset < 0 || c.Rows < 0:
		return fmt.Errorf("%w: split %d cursor %+v is negative", ErrCursor, s, c)
	case c.Window > len(ws) || (c.Window == len(ws) && c.Offset != 0):
		return fmt.Errorf("%w: split %d is at window %d, the epoch has %d", ErrCursor, s, c.Window, len(ws))
	case c.Window < len(ws) && ws[c.Window].Rows >= 0 && c.Offset >= ws[c.Window].Rows && c.Offset > 0:
		// Offset 0 is allowed: a cursor may rest at the start of a counted
		// window of no rows, as it may at one that turns out empty when read.
		return fmt.Errorf("%w: split %d offset %d is past window %d's %d rows", ErrCursor, s, c.Offset, c.Window, ws[c.Window].Rows)
	}
	if want := rowsBefore(ws, c); want >= 0 && want != c.Rows {
		return fmt.Errorf("%w: split %d has delivered %d rows, its window and offset say %d", ErrCursor, s, c.Rows, want)
	}
	return nil
}

// Rebase is cursor c of split s as this epoch counts its windows, where
// c counts the windows that storage-order reads had before they cut paged
// chunks at twice the window (readRows): a state taken then resumes where
// it stopped. In storage order a split's rows come in the same order
// however they are cut into windows, so c.Rows alone says where it
// stands once c is known to be a cursor of the old windows (chunks is
// the chunk list the epoch was made from). Any other cursor (one that
// fits, one of a shuffled order, one that fits neither) is returned as it
// is, for CheckCursor.
func (e *Epoch) Rebase(chunks []Chunk, s int, c Cursor) Cursor {
	if e.Order.Shuffle || e.CheckCursor(s, c) == nil || s < 0 || s >= len(e.Splits) {
		return c
	}
	// The split's pieces as they were before windowSized cut them.
	var whole []Piece
	for _, p := range e.Splits[s].Pieces {
		if n := len(whole); n > 0 && p.Start >= 0 && p.Chunk < len(chunks) && chunks[p.Chunk].Paged &&
			whole[n-1].Chunk == p.Chunk && whole[n-1].End == p.Start {
			whole[n-1].End = p.End
			continue
		}
		whole = append(whole, p)
	}
	old := windowSized(chunks, whole, e.Order.ShuffleWindow)
	rows := make([]int64, len(old))
	for i, p := range old {
		rows[i] = p.Rows()
	}
	if checkCursor(Windows(rows, e.Order.ShuffleWindow), s, c) != nil || c.Rows > e.Splits[s].Rows {
		return c
	}
	if c.Rows == e.Splits[s].Rows {
		return e.End(s)
	}
	w, within, err := e.Seek(s, c.Rows)
	if err != nil {
		return c
	}
	return Cursor{Window: w.Window, Offset: within, Rows: c.Rows}
}

// rowsBefore is the rows of windows ws before cursor c, or -1 if unknown.
func rowsBefore(ws []Window, c Cursor) int64 {
	n := c.Offset
	for _, w := range ws[:c.Window] {
		if w.Rows < 0 {
			return -1
		}
		n += w.Rows
	}
	return n
}

// RankBatches is the number of batches holding rows that rank takes at
// worldSize from cursors to the end of the epoch, batchSize rows at a time:
// a batch never mixes splits, so it is the sum over the rank's splits of
// their rows left divided by batchSize, rounded up. It does not depend on
// the round-robin position. -1 if a split of the rank has rows the plan
// does not know.
func (e *Epoch) RankBatches(rank, worldSize, batchSize int, cursors []Cursor) int64 {
	var n int64
	b := int64(max(batchSize, 1))
	for _, s := range Owned(len(e.Splits), rank, worldSize) {
		left := e.Remaining(s, cursors[s])
		if left < 0 {
			return -1
		}
		n += (left + b - 1) / b
	}
	return n
}

// EqualBatches is the fewest batches any rank of worldSize has left from
// cursors (one per split, every split's): the number every rank takes when
// all must take the same, as data-parallel ranks that run a collective per
// step must. Each rank then takes the first EqualBatches of its own batches
// and leaves the rest of the epoch. It wraps ErrUnknownRows where a split's
// rows are not known.
func (e *Epoch) EqualBatches(worldSize, batchSize int, cursors []Cursor) (int64, error) {
	least := int64(-1)
	for rank := range worldSize {
		n := e.RankBatches(rank, worldSize, batchSize, cursors)
		if n < 0 {
			return 0, fmt.Errorf("%w: equal batches per rank need every split's row count", ErrUnknownRows)
		}
		if least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0), nil
}

// Owned returns the splits rank owns at worldSize, ascending: split s
// belongs to rank s mod worldSize.
func Owned(numSplits, rank, worldSize int) []int {
	var out []int
	for s := rank; s < numSplits; s += worldSize {
		out = append(out, s)
	}
	return out
}

// MergeCursors combines the cursors that each rank of worldSize saved
// (byRank[r] has one cursor per split, of which rank r's own count) into one
// cursor per split.
func MergeCursors(worldSize int, byRank [][]Cursor) ([]Cursor, error) {
	if worldSize < 1 || len(byRank) != worldSize {
		return nil, fmt.Errorf("split: merge needs the cursors of all %d ranks, got %d", worldSize, len(byRank))
	}
	n := len(byRank[0])
	out := make([]Cursor, n)
	for r, cs := range byRank {
		if len(cs) != n {
			return nil, fmt.Errorf("split: rank %d has %d cursors, rank 0 has %d", r, len(cs), n)
		}
		for _, s := range Owned(n, r, worldSize) {
			out[s] = cs[s]
		}
	}
	return out, nil
}

// Part is a run of a batch's rows from one window, as positions in the
// window's emission order, [From, To).
type Part struct {
	Ref      WindowRef
	From, To int64
	// Last is set when the batch takes the window's last rows: the window
	// is done after it.
	Last bool
}

// Batch is one batch of a rank's sequence.
type Batch struct {
	// Seq numbers the batches of one walk, for error messages.
	Seq   int64
	Split int
	Parts []Part
	Rows  int64
	// After is the split's cursor once this batch is taken.
	After Cursor
	// Next is the rank's round-robin position after it.
	Next int
}

// Schedule walks a rank's batches from given cursors: round-robin over the
// rank's splits, batchSize rows at a time, each split's rows in window
// order. Walks over the same inputs see the same sequence, so one walk can
// order the reads and another cut the batches.
//
// Where a window's row count is unknown until it is read, RowsOf tells the
// walk: the walk that cuts batches asks for the rows as decoded, while a walk
// that only orders reads may estimate, since only the order in which it
// first touches windows matters to it.
type Schedule struct {
	// RowsOf returns the rows of a window whose count the plan does not
	// know. Default: BatchSize, an estimate good enough to order reads.
	RowsOf func(WindowRef) int64

	ep        *Epoch
	batchSize int64
	local     []int
	cursors   []Cursor
	next      int
	seq       int64
	started   []bool // per split: taken from in this walk
	// limited walks end after left more batches holding rows (Limit).
	limited bool
	left    int64
}

// Limit ends the walk after n more batches that hold rows: what a rank
// with equal batches (EqualBatches) takes of its own.
func (s *Schedule) Limit(n int64) {
	s.limited, s.left = true, n
}

// NewSchedule starts a walk of rank's batches at worldSize from cursors
// (one per split) and the round-robin position next.
func NewSchedule(ep *Epoch, rank, worldSize, batchSize int, cursors []Cursor, next int) *Schedule {
	local := Owned(len(ep.Splits), rank, worldSize)
	return &Schedule{
		ep: ep, batchSize: int64(batchSize), local: local,
		cursors: append([]Cursor(nil), cursors...),
		next:    next % max(len(local), 1),
		started: make([]bool, len(cursors)),
	}
}

func (s *Schedule) done(split int) bool {
	return s.cursors[split].Window >= len(s.ep.Windows[split])
}

// Step returns the next batch and whether there was one. firstTouch, if not
// nil, is called for each window the batch is the first to take rows from.
// A batch may hold no rows where the windows it finishes turned out empty
// (unknown counts): it still moves the cursor past them.
func (s *Schedule) Step(firstTouch func(WindowRef)) (Batch, bool) {
	if s.limited && s.left <= 0 {
		return Batch{}, false
	}
	for range s.local {
		sp := s.local[s.next]
		s.next = (s.next + 1) % len(s.local)
		if s.done(sp) {
			continue
		}
		b := Batch{Seq: s.seq, Split: sp}
		s.seq++
		c := s.cursors[sp]
		ws := s.ep.Windows[sp]
		for b.Rows < s.batchSize && c.Window < len(ws) {
			ref := WindowRef{sp, c.Window}
			rows := ws[c.Window].Rows
			if rows < 0 {
				rows = s.batchSize
				if s.RowsOf != nil {
					rows = s.RowsOf(ref)
				}
			}
			// A window is first touched at its start, or where a resumed
			// cursor points into it.
			if firstTouch != nil && (c.Offset == 0 || !s.started[sp]) {
				firstTouch(ref)
			}
			s.started[sp] = true
			take := max(min(s.batchSize-b.Rows, rows-c.Offset), 0)
			p := Part{Ref: ref, From: c.Offset, To: c.Offset + take}
			c.Offset += take
			c.Rows += take
			b.Rows += take
			if c.Offset >= rows {
				p.Last = true
				c.Window++
				c.Offset = 0
			}
			b.Parts = append(b.Parts, p)
		}
		s.cursors[sp] = c
		b.After = c
		b.Next = s.next
		if b.Rows > 0 {
			s.left--
		}
		return b, true
	}
	return Batch{}, false
}
