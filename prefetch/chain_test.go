package prefetch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// buf stands for a reference-counted buffer such as an Arrow record batch: the chain test checks
// that every buf allocated anywhere in a pipeline is freed exactly once, however it stops.
type buf struct {
	id    int
	freed atomic.Bool
}

// pool counts live bufs, like memory.CheckedAllocator counts bytes.
type pool struct {
	live, doubleFrees atomic.Int64
}

func (p *pool) get(id int) *buf {
	p.live.Add(1)
	return &buf{id: id}
}

func (p *pool) put(b *buf) {
	if b.freed.Swap(true) {
		p.doubleFrees.Add(1)
		return
	}
	p.live.Add(-1)
}

// gauge tracks how many calls of a function run at once, and the most ever.
type gauge struct{ now, max atomic.Int32 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
}

func (g *gauge) exit() { g.now.Add(-1) }

// chain is a two-stage pipeline as the stream package builds it: a read stage turning indexes
// into bufs, and a transform stage turning each buf into a new one.
type chain struct {
	src                 *source
	pool                pool
	read                Stage[int, *buf]
	transform           Stage[*buf, *buf]
	readFns, transFns   gauge
	readOut             atomic.Int64 // read results taken by the transform stage
	consumed            atomic.Int64 // results the consumer's loop body has started on
	readWin, transWin   int
	readDelay, trfDelay func(i int)
}

func newChain(n, readConc, readAhead, transConc, transAhead int) *chain {
	c := &chain{src: newSource(n)}
	c.readWin = effectiveAhead(readConc, readAhead)
	c.transWin = effectiveAhead(transConc, transAhead)
	c.read = Stage[int, *buf]{
		Name:        "read",
		Concurrency: readConc,
		Ahead:       readAhead,
		Fn: func(ctx context.Context, i int) (*buf, error) {
			c.readFns.enter()
			defer c.readFns.exit()
			if c.readDelay != nil {
				c.readDelay(i)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return c.pool.get(i), nil
		},
		ReleaseOut: c.pool.put,
	}
	c.transform = Stage[*buf, *buf]{
		Name:        "transform",
		Concurrency: transConc,
		Ahead:       transAhead,
		Fn: func(ctx context.Context, in *buf) (*buf, error) {
			c.transFns.enter()
			defer c.transFns.exit()
			defer c.pool.put(in) // Fn owns its input, whatever happens
			if c.trfDelay != nil {
				c.trfDelay(in.id)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return c.pool.get(in.id), nil
		},
		ReleaseIn:  c.pool.put,
		ReleaseOut: c.pool.put,
	}
	return c
}

// seq returns the pipeline, instrumented to check the window of each stage as items cross it.
func (c *chain) seq(ctx context.Context, t *testing.T) iter.Seq2[*buf, error] {
	c.src.onPull = func(pulled int) {
		// +1: the count downstream of a stage lags the stage's own by the item handed over.
		if held := int64(pulled) - c.readOut.Load(); held > int64(c.readWin)+1 {
			t.Errorf("read stage holds %d items, window is %d", held, c.readWin)
		}
	}
	read := Map(ctx, c.src.seq(), c.read)
	counted := func(yield func(*buf, error) bool) {
		for b, err := range read {
			if err == nil {
				if held := c.readOut.Add(1) - c.consumed.Load(); held > int64(c.transWin)+1 {
					t.Errorf("transform stage holds %d items, window is %d", held, c.transWin)
				}
			}
			if !yield(b, err) {
				return
			}
		}
	}
	return Map(ctx, counted, c.transform)
}

// check verifies, after the pipeline has returned, that it left nothing behind.
func (c *chain) check(t *testing.T, name string) {
	t.Helper()
	if l := c.pool.live.Load(); l != 0 {
		t.Errorf("%s: %d bufs never freed", name, l)
	}
	if d := c.pool.doubleFrees.Load(); d != 0 {
		t.Errorf("%s: %d bufs freed twice", name, d)
	}
	if r, tr := c.readFns.now.Load(), c.transFns.now.Load(); r != 0 || tr != 0 {
		t.Errorf("%s: %d read and %d transform calls still running after the pipeline returned", name, r, tr)
	}
	if !c.src.returned.Load() {
		t.Errorf("%s: upstream still running after the pipeline returned", name)
	}
}

// TestMapChain runs random two-stage pipelines with random timing, stopping them at random
// points, and checks order, the bounds of both stages, and that every buf is freed once.
func TestMapChain(t *testing.T) {
	const (
		runsOut = iota
		consumerStops
		ctxCancelled
		kinds
	)
	for trial := range 60 {
		r := rand.New(rand.NewPCG(uint64(trial), 3))
		kind := trial % kinds
		n := 1 + r.IntN(40)
		at := 1 + r.IntN(n)
		rc, ra, tc, ta := r.IntN(5), r.IntN(8), r.IntN(5), r.IntN(8)
		seed := r.Uint64()
		name := fmt.Sprintf("trial %d (kind=%d n=%d at=%d read=%d/%d transform=%d/%d)", trial, kind, n, at, rc, ra, tc, ta)

		c := newChain(n, rc, ra, tc, ta)
		srcRand := rand.New(rand.NewPCG(seed, 0))
		c.src.delay = func(int) { pause(srcRand) }
		c.readDelay = func(i int) { pause(rand.New(rand.NewPCG(seed, uint64(i)+1))) }
		c.trfDelay = func(i int) { pause(rand.New(rand.NewPCG(seed, uint64(i)+1<<20))) }
		ctx, cancel := context.WithCancel(context.Background())

		got := 0
		var gotErr error
		within(t, 10*time.Second, func() {
			consumerRand := rand.New(rand.NewPCG(seed, 1<<40))
			for b, err := range c.seq(ctx, t) {
				c.consumed.Add(1)
				if err != nil {
					gotErr = err
					continue
				}
				if b.id != got {
					t.Fatalf("%s: got item %d, want %d", name, b.id, got)
				}
				c.pool.put(b)
				got++
				pause(consumerRand)
				if got == at && kind == consumerStops {
					break
				}
				if got == at && kind == ctxCancelled {
					cancel()
				}
			}
		})
		cancel()

		c.check(t, name)
		if m := c.readFns.max.Load(); int(m) > max(rc, 1) {
			t.Errorf("%s: %d read calls ran at once", name, m)
		}
		if m := c.transFns.max.Load(); int(m) > max(tc, 1) {
			t.Errorf("%s: %d transform calls ran at once", name, m)
		}
		switch kind {
		case runsOut:
			if got != n || gotErr != nil {
				t.Errorf("%s: got %d results then %v, want %d and no error", name, got, gotErr, n)
			}
		case consumerStops:
			if got != at || gotErr != nil {
				t.Errorf("%s: got %d results then %v, want %d and no error", name, got, gotErr, at)
			}
		case ctxCancelled:
			if got != at || !errors.Is(gotErr, context.Canceled) && !(gotErr == nil && at == n) {
				t.Errorf("%s: got %d results then %v, want %d then context.Canceled", name, got, gotErr, at)
			}
		}
	}
	goleak.VerifyNone(t)
}

// TestMapChainBackpressure holds the consumer on one result: both windows fill up and the
// pipeline pulls exactly their sum past it. In a synctest bubble, synctest.Wait returns once
// both stages have settled, so an overshoot would show.
func TestMapChainBackpressure(t *testing.T) { synctest.Test(t, testMapChainBackpressure) }

func testMapChainBackpressure(t *testing.T) {
	const n, hold = 50, 2
	c := newChain(n, 2, 3, 1, 2)
	want := int64(hold + 1 + 2 + 3)
	got := 0
	for b, err := range c.seq(context.Background(), t) {
		c.consumed.Add(1)
		if err != nil || b.id != got {
			t.Fatalf("got (%v, %v), want item %d", b, err, got)
		}
		got++
		if b.id == hold {
			synctest.Wait() // both stages have done all they can while the consumer holds the item
			if p := c.src.pulled.Load(); p != want {
				t.Errorf("pulled %d items while the consumer holds item %d, want %d", p, hold, want)
			}
			// The consumer holds one buf, the transform stage 2 results, the read stage 3.
			if l := c.pool.live.Load(); l != 1+2+3 {
				t.Errorf("%d bufs live, want 6", l)
			}
		}
		c.pool.put(b)
	}
	if got != n {
		t.Errorf("got %d results, want %d", got, n)
	}
	c.check(t, "backpressure")
}
