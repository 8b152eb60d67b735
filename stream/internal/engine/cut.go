package engine

import (
	"fmt"
	"iter"

	"github.com/sluicedata/sluice/split"
)

// job is a batch to build: its plan and the windows it cuts from.
type job struct {
	plan    split.Batch
	windows []*window // parallel to split.Parts
	// bytes is the batch's share of its windows' decoded bytes, by rows:
	// what it holds once built, whether a slice or a gather.
	bytes int64
}

func (j *job) release() {
	for _, w := range j.windows {
		if w != nil { // a job abandoned half-built holds only some
			w.release()
		}
	}
}

// cut is the cut stage: it walks the schedule again, pairing each batch
// with its windows as the decode stage delivers them, so that the
// transform stage gets whole jobs while the reads run ahead in their own
// order. It runs on one goroutine: the batches come out in the order the
// consumer takes them.
func (it *iteration) cut(windows iter.Seq2[*window, error]) iter.Seq2[*job, error] {
	return func(yield func(*job, error) bool) {
		next, stopReads := iter.Pull2(windows)
		defer stopReads()
		c := &cutter{it: it, next: next, held: map[split.WindowRef]*window{}}
		defer c.releaseHeld()
		s := it.schedule()
		s.RowsOf = func(r split.WindowRef) int64 {
			if w := c.await(r); w != nil {
				return w.rows
			}
			return 0 // the read failed: c.err ends the walk below
		}
		for {
			if it.stopping.Load() {
				// Take in what the read stages finish, for the next
				// iteration.
				c.drain()
				return
			}
			bp, ok := s.Step(nil)
			if !ok {
				return
			}
			j, err := c.job(bp)
			switch {
			case err != nil:
				yield(nil, err)
				return
			case j == nil:
				return // the reads ended early for the next iteration
			case bp.Rows == 0:
				// Only windows that turned out empty: nothing to hand on
				// (a resumed walk finds the same).
				j.release()
				continue
			}
			// A job handed to the stage is the stage's, even when it is
			// stopping: it releases what it never ran (ReleaseIn).
			if !yield(j, nil) {
				return
			}
		}
	}
}

// cutter is the cut stage's hold on the decoded windows: every window it
// receives is kept (Engine.kept) until the consumer finishes it, and held
// by the cutter until its last batch is cut.
type cutter struct {
	it   *iteration
	next func() (*window, error, bool)
	held map[split.WindowRef]*window
	// err is the read stages' error, once one came.
	err error
}

// pull takes the next decoded window in; it reports false once the reads
// have ended or failed.
func (c *cutter) pull() bool {
	got, err, more := c.next()
	if err != nil || !more {
		c.err = err
		return false
	}
	c.it.e.kept.put(got)
	c.held[got.ref] = got
	return true
}

// await pulls windows until r's is in, and returns it, or nil where the
// reads ended first.
func (c *cutter) await(r split.WindowRef) *window {
	for c.held[r] == nil && c.err == nil && c.pull() {
	}
	return c.held[r]
}

// drain takes in every window the read stages still finish.
func (c *cutter) drain() {
	for c.pull() {
	}
}

// releaseHeld lets go of the windows no batch was cut to the end of.
func (c *cutter) releaseHeld() {
	for _, w := range c.held {
		w.release()
	}
}

// job pairs batch bp with its windows. It returns nil and no error where
// the reads ended early for the next iteration.
func (c *cutter) job(bp split.Batch) (*job, error) {
	j := &job{plan: bp, windows: make([]*window, len(bp.Parts))}
	for i, p := range bp.Parts {
		w := c.await(p.Ref)
		if w == nil && c.it.stopping.Load() {
			j.release()
			c.drain()
			return nil, nil
		}
		if w == nil {
			j.release()
			if c.err == nil {
				c.err = fmt.Errorf("stream: internal error: window %v of split %d was never read", p.Ref.Window, p.Ref.Split)
			}
			return nil, c.err
		}
		w.retain()
		j.windows[i] = w
		if w.rows > 0 {
			// A slice's buffers are its window's: the batch's share is
			// counted, not theirs.
			j.bytes += w.bytes * (p.To - p.From) / w.rows
		}
		if p.Last {
			delete(c.held, p.Ref)
			w.release() // the cutter's own hold
		}
	}
	if c.err != nil {
		j.release()
		return nil, c.err
	}
	return j, nil
}
