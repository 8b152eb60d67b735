package stream

import (
	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// epochPlan is what one epoch's order is made of: a pure function of the
// chunk list, the order options and the epoch.
type epochPlan struct {
	epoch   int64
	splits  []split.Split
	windows [][]permutation.Window // per split
}

func newEpochPlan(chunks []split.Chunk, o Options, epoch int64) (*epochPlan, error) {
	po := permOptions(o, epoch)
	order := permutation.ChunkOrder(len(chunks), po)
	splits, err := split.Balance(chunks, order, split.Options{NumSplits: o.NumSplits, DropRemainder: o.DropRemainder})
	if err != nil {
		return nil, err
	}
	ep := &epochPlan{epoch: epoch, splits: splits, windows: make([][]permutation.Window, len(splits))}
	for s, sp := range splits {
		rows := make([]int64, len(sp.Pieces))
		for i, p := range sp.Pieces {
			rows[i] = p.Rows()
		}
		ep.windows[s] = permutation.Windows(rows, o.ShuffleWindow)
	}
	return ep, nil
}

func permOptions(o Options, epoch int64) permutation.Options {
	return permutation.Options{Shuffle: o.Shuffle, Seed: o.Seed, Epoch: epoch, ClumpSize: o.ClumpSize}
}

// windowRef names one window of one split.
type windowRef struct{ split, window int }

// part is a run of a batch's rows from one window, as positions in the
// window's emission order, [from, to).
type part struct {
	ref      windowRef
	from, to int64
	last     bool // the batch takes the window's last rows: the window is done after it
}

// batchPlan is one batch of a rank's sequence.
type batchPlan struct {
	seq   int64 // batch number within this iteration, for error messages
	split int
	parts []part
	rows  int64
	after checkpoint.Cursor // the split's cursor once this batch is taken
	next  int               // the rank's round-robin position after it
}

// schedule walks a rank's batches from given cursors: round-robin over the
// rank's splits, BatchSize rows at a time, each split's rows in window order.
// It is run twice over the same inputs, once to order the reads and once to
// cut batches, and both walks see the same sequence.
type schedule struct {
	ep        *epochPlan
	batchSize int64
	local     []int // the splits this rank owns, ascending
	cursors   []checkpoint.Cursor
	next      int
	seq       int64
	started   []bool // per split: taken from in this walk
}

func newSchedule(ep *epochPlan, o Options, cursors []checkpoint.Cursor, next int) *schedule {
	var local []int
	for s := o.Rank; s < o.NumSplits; s += o.WorldSize {
		local = append(local, s)
	}
	cs := make([]checkpoint.Cursor, len(cursors))
	copy(cs, cursors)
	return &schedule{ep: ep, batchSize: int64(o.BatchSize), local: local, cursors: cs, next: next % max(len(local), 1), started: make([]bool, len(cursors))}
}

func (s *schedule) done(split int) bool {
	return s.cursors[split].Window >= len(s.ep.windows[split])
}

// step returns the next batch and whether there was one. firstTouch, if not
// nil, is called for each window the batch is the first to take rows from.
func (s *schedule) step(firstTouch func(windowRef)) (batchPlan, bool) {
	for range s.local {
		sp := s.local[s.next]
		s.next = (s.next + 1) % len(s.local)
		if s.done(sp) {
			continue
		}
		b := batchPlan{seq: s.seq, split: sp}
		s.seq++
		c := s.cursors[sp]
		ws := s.ep.windows[sp]
		for b.rows < s.batchSize && c.Window < len(ws) {
			w := ws[c.Window]
			// A window is first touched at its start, or where a resumed
			// cursor points into it.
			if firstTouch != nil && (c.Offset == 0 || !s.started[sp]) {
				firstTouch(windowRef{sp, c.Window})
			}
			s.started[sp] = true
			take := min(s.batchSize-b.rows, w.Rows-c.Offset)
			p := part{ref: windowRef{sp, c.Window}, from: c.Offset, to: c.Offset + take}
			c.Offset += take
			c.Rows += take
			b.rows += take
			if c.Offset == w.Rows {
				p.last = true
				c.Window++
				c.Offset = 0
			}
			b.parts = append(b.parts, p)
		}
		s.cursors[sp] = c
		b.after = c
		b.next = s.next
		return b, true
	}
	return batchPlan{}, false
}
