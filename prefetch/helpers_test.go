package prefetch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

var (
	errSource = errors.New("source failed")
	errFn     = errors.New("fn failed")
)

// source is a test upstream yielding 0, 1, ... n-1 that records how far it was pulled and
// whether it was stopped properly.
type source struct {
	n       int
	errAt   int              // yield (0, errSource) instead of this item; -1 for never
	panicAt int              // panic instead of yielding this item; -1 for never
	delay   func(i int)      // run before yielding item i; may be nil
	onPull  func(pulled int) // called before yielding an item, with the items pulled so far, that one included

	pulled   atomic.Int64 // items passed to yield
	returned atomic.Bool  // the iterator function has returned
}

func newSource(n int) *source { return &source{n: n, errAt: -1, panicAt: -1} }

func (s *source) seq() iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		defer s.returned.Store(true)
		for i := range s.n {
			if s.delay != nil {
				s.delay(i)
			}
			if i == s.panicAt {
				panic("source exploded")
			}
			if i == s.errAt {
				yield(0, errSource)
				return
			}
			pulled := s.pulled.Add(1)
			if s.onPull != nil {
				s.onPull(int(pulled))
			}
			if !yield(i, nil) {
				return
			}
		}
	}
}

// out is a test result: the index of the item it came from.
type out struct{ i int }

// ledger records what happens to every item and result, to check the ownership contract: each
// item taken from upstream reaches Fn or ReleaseIn, never both; each result Fn returns is
// yielded or given to ReleaseOut, never both.
type ledger struct {
	fn          []atomic.Int32
	made        []atomic.Int32
	releasedIn  []atomic.Int32
	yielded     []atomic.Int32
	releasedOut []atomic.Int32
	running     atomic.Int32 // Fn calls under way
	maxRunning  atomic.Int32
}

func newLedger(n int) *ledger {
	return &ledger{
		fn:          make([]atomic.Int32, n),
		made:        make([]atomic.Int32, n),
		releasedIn:  make([]atomic.Int32, n),
		yielded:     make([]atomic.Int32, n),
		releasedOut: make([]atomic.Int32, n),
	}
}

// stage returns a stage whose Fn is recorded in l and whose result for item i is out{i}. body,
// which may be nil, runs inside Fn and decides its error.
func (l *ledger) stage(name string, body func(ctx context.Context, i int) error) Stage[int, out] {
	return Stage[int, out]{
		Name: name,
		Fn: func(ctx context.Context, i int) (out, error) {
			l.fn[i].Add(1)
			n := l.running.Add(1)
			defer l.running.Add(-1)
			for {
				m := l.maxRunning.Load()
				if n <= m || l.maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			if body != nil {
				if err := body(ctx, i); err != nil {
					return out{}, err
				}
			}
			l.made[i].Add(1)
			return out{i}, nil
		},
		ReleaseIn:  func(i int) { l.releasedIn[i].Add(1) },
		ReleaseOut: func(o out) { l.releasedOut[o.i].Add(1) },
	}
}

// got records a result handed to the consumer.
func (l *ledger) got(o out) { l.yielded[o.i].Add(1) }

// check verifies the contract once an iteration has returned, pulled being the items the source
// handed over.
func (l *ledger) check(t *testing.T, pulled int) {
	t.Helper()
	if r := l.running.Load(); r != 0 {
		t.Errorf("%d Fn calls still running after the iteration returned", r)
	}
	for i := range l.fn {
		fn, in := l.fn[i].Load(), l.releasedIn[i].Load()
		made, y, rel := l.made[i].Load(), l.yielded[i].Load(), l.releasedOut[i].Load()
		if i >= pulled {
			if fn+in+made+y+rel != 0 {
				t.Errorf("item %d was never pulled but: fn %d, releasedIn %d, made %d, yielded %d, releasedOut %d", i, fn, in, made, y, rel)
			}
			continue
		}
		if fn+in != 1 {
			t.Errorf("item %d: Fn called %d times and ReleaseIn %d times, want exactly one of them once", i, fn, in)
		}
		if y+rel != made {
			t.Errorf("item %d: %d results made, %d yielded and %d released", i, made, y, rel)
		}
	}
}

// pause delays a goroutine by a random amount drawn from r, from nothing to a few hundred
// microseconds, to shake up the interleavings. r must not be shared between goroutines. Its
// sleep waits for nothing: the tests that pause assert only what holds under every
// interleaving (order, counts, bounds), so a slow machine changes which ones run, not the result.
func pause(r *rand.Rand) {
	switch r.IntN(4) {
	case 0:
	case 1:
		runtime.Gosched()
	case 2:
		for range r.IntN(20) {
			runtime.Gosched()
		}
	case 3:
		time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
	}
}

// within runs f and crashes the test binary, with every goroutine's stack, if f has not returned
// after d: a hung iteration would otherwise hang until go test's own timeout, and a stack dump is
// the best account of where it hangs. f runs on the test's goroutine, so it may call t.Fatal.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	watchdog := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("%s did not return within %v; goroutines:\n%s", t.Name(), d, buf))
	})
	defer watchdog.Stop()
	f()
}

// effectiveAhead is the window of a stage with the given options, by the documented defaults.
func effectiveAhead(concurrency, ahead int) int {
	c := max(concurrency, 1)
	if ahead < 1 {
		ahead = 2 * c
	}
	return max(ahead, c)
}
