//go:build cgo

package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// readAhead is the most batches a pull holds that the caller has not taken:
// what one call can hand over at once. A call into Go from C, and the wake
// of the thread that makes it, cost about as much as decoding a batch of
// 1024 numbers does; a caller that takes many batches per call pays them
// once for all (the batches of a window are slices of its buffers, so they
// cross as one array, see segments). The batches held are slices of windows
// the pipeline holds anyway. It is one more than the 64 a call of the
// Python package asks for: a call that sees the batch after those it
// takes knows whether it ends at a window's edge (see take).
const readAhead = 65

// gather is how long a call that finds fewer batches queued than it asks
// for waits for more, from the first: each call costs the caller a
// crossing into Go and its wake, so a caller faster than the pipeline
// takes a window's batches in one call, not a few in each. The pipeline
// never waits on it (it pauses only with readAhead batches queued, enough
// for any call), so a batch waits this much longer at most, and
// throughput is the same.
var gather = 2 * time.Millisecond

// pull turns the push iteration of Batches into calls that each take the
// batches ready. Its goroutine runs ahead of the caller by up to readAhead
// batches, noting the position after each (the dataset's state inside the
// loop body of that batch): the dataset itself counts the batches pulled,
// the caller's position is the one after the last batch it took. (iter.Pull2
// would need no goroutine, but its coroutine must be resumed on the thread
// that made it, and a C caller may call from any thread.)
type pull struct {
	mu      sync.Mutex
	queue   []pulled // pulled, not taken, in order
	stopped bool     // the goroutine has ended: queue is all there is
	// want is the batches queued at which a waiting call is woken (1, or
	// those a gathering call asks for); first is true until the first call
	// took its batches.
	want  int
	first bool
	// ready (capacity 1) says an item was queued; room (capacity 1) that
	// one was taken.
	ready, room chan struct{}
	cancel      context.CancelFunc
	done        chan struct{}
}

// pulled is one item of a pull: a batch and the position after it, or the
// end of the epoch, or the error that ended the iteration.
type pulled struct {
	b   arrow.RecordBatch
	pos any // checkpoint.State of a dataset, checkpoint.MixState of a mix
	err error
	end bool
}

func startPull(h *handle) *pull {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pull{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), want: 1, first: true}
	go func() {
		defer close(p.done)
		defer func() {
			if r := recover(); r != nil {
				p.put(pulled{err: panicErr(r)})
			}
		}()
		for b, err := range h.batches(ctx) {
			if err != nil {
				if ctx.Err() == nil {
					p.put(pulled{err: err})
				}
				return
			}
			// The dataset counts b taken from here on: it is queued even
			// when the pull is being stopped, and so taken by a later call.
			b.Retain()
			p.put(pulled{b: b, pos: h.position()})
			if !p.waitRoom(ctx) {
				return
			}
		}
		if ctx.Err() == nil {
			p.put(pulled{end: true})
		}
	}()
	return p
}

func (p *pull) put(x pulled) {
	p.mu.Lock()
	p.queue = append(p.queue, x)
	wake := len(p.queue) >= p.want || x.b == nil
	p.mu.Unlock()
	if wake {
		select {
		case p.ready <- struct{}{}:
		default:
		}
	}
}

// waitRoom waits, inside the loop body of the batch last queued, until
// fewer than readAhead batches are queued; false when the pull is stopped.
func (p *pull) waitRoom(ctx context.Context) bool {
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n < readAhead {
			return true
		}
		select {
		case <-p.room:
		case <-ctx.Done():
			return false
		}
	}
}

// take returns the items at the front of the queue that one call hands
// over: an end or an error alone, else up to most batches. It waits up to
// timeout for the first, then up to gather for most of them and the one
// after (not in the first call of a pull: the first batch of an epoch goes
// at once); none, where none came or the pull is stopped and drained. A
// call that would end inside a window ends at the window's edge before,
// where there is one (cut).
func (p *pull) take(most int, timeout time.Duration) []pulled {
	enough := min(most+1, readAhead)
	var deadline time.Time // of the gather, once the first batch is queued
	var t *time.Timer
	for {
		p.mu.Lock()
		n := len(p.queue)
		if n > 0 && (p.first || n >= enough || p.stopped || p.queue[n-1].b == nil ||
			!deadline.IsZero() && !time.Now().Before(deadline)) {
			k := 1
			if p.queue[0].b != nil {
				for k < n && k < most && p.queue[k].b != nil {
					k++
				}
			}
			if !p.first && !p.stopped {
				k = p.cut(k)
			}
			got := append([]pulled(nil), p.queue[:k]...)
			p.queue = append(p.queue[:0], p.queue[k:]...)
			p.first, p.want = false, 1
			p.mu.Unlock()
			select {
			case p.room <- struct{}{}:
			default:
			}
			return got
		}
		stopped := p.stopped
		wait := timeout
		if n > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(gather)
				// Woken when the queue holds enough (or an end): a wake
				// left from the batches already seen would end the gather
				// at once.
				p.want = enough
				select {
				case <-p.ready:
				default:
				}
			}
			wait = time.Until(deadline)
		}
		p.mu.Unlock()
		if stopped {
			return nil
		}
		// The timer is made only when a call has to wait: most calls find
		// their batches queued. (Reset on a timer that fired or was
		// stopped leaves no stale tick in its channel since Go 1.23.)
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-p.ready:
		case <-t.C:
			if n == 0 {
				return nil
			}
		}
	}
}

// cut is where a call that would take the first k batches queued ends:
// k where the batch after them begins another window (or is an end), else
// the last edge between windows among them, if one is (a call that ended
// inside a window would cut it into two arrays, each exported and made
// into columns on the caller's side, and the calls after would not catch
// up with the windows' edges again). Where the runs of several splits
// interleave, no edge is certain: k.
func (p *pull) cut(k int) int {
	q := p.queue
	if k < len(q) && (q[k].b == nil || !follows(q[k-1].b, q[k].b)) {
		return k
	}
	for i := k - 1; i > 0; i-- {
		if q[i].b == nil || follows(q[i-1].b, q[i].b) {
			continue
		}
		for _, x := range q[i+1:] {
			if x.b != nil && follows(q[i-1].b, x.b) {
				return k
			}
		}
		return i
	}
	return k
}

// stop ends the goroutine and the pipeline's. What it had queued stays, to
// be taken by the next calls: the dataset counted it.
func (p *pull) stop() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// release lets go of the queued batches (the position they stand for is
// being replaced, or the dataset closed).
func (p *pull) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.queue {
		if x.b != nil {
			x.b.Release()
		}
	}
	p.queue = nil
}

// follows reports whether b continues a in memory: every column of b is
// the next rows of the same buffers as a's, as the batches cut from one
// window are. Such batches cross as one array of their rows (joined).
func follows(a, b arrow.RecordBatch) bool {
	if a.NumCols() != b.NumCols() || !sameFields(a.Schema(), b.Schema()) {
		return false
	}
	for i := range int(a.NumCols()) {
		da, db := a.Column(i).Data(), b.Column(i).Data()
		// Dictionaries and nested arrays cross batch by batch: their
		// children have offsets of their own.
		if da.DataType().ID() == arrow.DICTIONARY || len(da.Children()) > 0 || len(db.Children()) > 0 {
			return false
		}
		if da.Offset()+da.Len() != db.Offset() {
			return false
		}
		ba, bb := da.Buffers(), db.Buffers()
		if len(ba) != len(bb) {
			return false
		}
		for k := range ba {
			if ba[k] != bb[k] {
				return false
			}
		}
	}
	return true
}

// sameFields reports whether a and b have the same fields, by name, type
// and nullability. Batches cut from one window carry schemas of their
// own; Schema.Equal, which also sorts and compares metadata, cost the
// caller's thread about a twentieth of a call.
func sameFields(a, b *arrow.Schema) bool {
	if a == b {
		return true
	}
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || fa.Type != fb.Type && !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// segments sorts the batches of one call into runs that follow one
// another in memory (a window's batches, which other splits' may
// interleave): each run crosses as one array of its rows (joined). It
// returns the runs and, for each batch, its run and first row in it.
func segments(bs []arrow.RecordBatch) (runs [][]arrow.RecordBatch, seg, start []int64) {
	seg, start = make([]int64, len(bs)), make([]int64, len(bs))
	rows := []int64{}
	for i, b := range bs {
		s := -1
		for r, run := range runs {
			if follows(run[len(run)-1], b) {
				s = r
				break
			}
		}
		if s < 0 {
			s = len(runs)
			runs = append(runs, nil)
			rows = append(rows, 0)
		}
		runs[s] = append(runs[s], b)
		seg[i], start[i] = int64(s), rows[s]
		rows[s] += b.NumRows()
	}
	return runs, seg, start
}

// joined is a run of batches that follow one another as one record batch
// of all their rows, over the same buffers.
func joined(bs []arrow.RecordBatch) arrow.RecordBatch {
	if len(bs) == 1 {
		bs[0].Retain()
		return bs[0]
	}
	var rows int64
	for _, b := range bs {
		rows += b.NumRows()
	}
	first := bs[0]
	cols := make([]arrow.Array, first.NumCols())
	for i := range cols {
		d := first.Column(i).Data()
		nulls := 0
		for _, b := range bs {
			nulls += b.Column(i).NullN()
		}
		whole := array.NewData(d.DataType(), int(rows), d.Buffers(), nil, nulls, d.Offset())
		cols[i] = array.MakeFromData(whole)
		whole.Release()
	}
	rec := array.NewRecordBatch(first.Schema(), cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// errGroupSize is the error of a call that asks for fewer than one batch.
var errGroupSize = errors.New("sluice: a call takes at least one batch")
