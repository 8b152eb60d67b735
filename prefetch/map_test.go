package prefetch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// calls is the number of Fn calls made so far.
func (l *ledger) calls() int {
	n := 0
	for i := range l.fn {
		n += int(l.fn[i].Load())
	}
	return n
}

// TestMapOrder runs random stages with random timing in every part (upstream, Fn, consumer) and
// checks that results come exactly in input order, once each, within the bounds.
func TestMapOrder(t *testing.T) {
	for trial := range 120 {
		r := rand.New(rand.NewPCG(uint64(trial), 1))
		n := r.IntN(60)
		conc := r.IntN(7) // 0 tests the default
		ahead := r.IntN(12)
		window := effectiveAhead(conc, ahead)
		seed := r.Uint64()
		name := fmt.Sprintf("trial %d (n=%d concurrency=%d ahead=%d)", trial, n, conc, ahead)

		var consumed atomic.Int64
		src := newSource(n)
		srcRand := rand.New(rand.NewPCG(seed, 0))
		src.delay = func(int) { pause(srcRand) }
		src.onPull = func(pulled int) {
			// The consumer counts an item when its loop body starts, which can lag the stage's
			// own count by the one item being handed over.
			if held := int64(pulled) - consumed.Load(); held > int64(window)+1 {
				t.Errorf("%s: %d items pulled and not consumed, window is %d", name, held, window)
			}
		}
		l := newLedger(n)
		st := l.stage("order", func(_ context.Context, i int) error {
			pause(rand.New(rand.NewPCG(seed, uint64(i)+1)))
			return nil
		})
		st.Concurrency, st.Ahead = conc, ahead

		consumerRand := rand.New(rand.NewPCG(seed, 1<<40))
		next := 0
		within(t, 10*time.Second, func() {
			for o, err := range Map(context.Background(), src.seq(), st) {
				consumed.Add(1)
				if err != nil {
					t.Fatalf("%s: unexpected error %v", name, err)
				}
				if o.i != next {
					t.Fatalf("%s: got item %d, want %d", name, o.i, next)
				}
				l.got(o)
				next++
				pause(consumerRand)
			}
		})
		if next != n {
			t.Fatalf("%s: got %d items, want %d", name, next, n)
		}
		if !src.returned.Load() {
			t.Errorf("%s: upstream still running after the iteration returned", name)
		}
		if m := int(l.maxRunning.Load()); m > max(conc, 1) {
			t.Errorf("%s: %d Fn calls ran at once, concurrency is %d", name, m, max(conc, 1))
		}
		l.check(t, n)
		for i := range n {
			if l.yielded[i].Load() != 1 {
				t.Fatalf("%s: item %d yielded %d times", name, i, l.yielded[i].Load())
			}
		}
	}
}

// TestMapEndings ends iterations at random positions in every way they can end (the consumer
// stops, Fn fails, upstream fails, the context is cancelled) and checks what was yielded before,
// the error, and that every item and result was released exactly once if not yielded.
func TestMapEndings(t *testing.T) {
	const (
		consumerStops = iota
		fnFails
		sourceFails
		ctxCancelled
		kinds
	)
	for trial := range 160 {
		r := rand.New(rand.NewPCG(uint64(trial), 2))
		kind := trial % kinds
		n := 1 + r.IntN(40)
		conc, ahead := r.IntN(6), r.IntN(10)
		seed := r.Uint64()
		// at is the number of results the consumer should get: it stops or cancels after at
		// results, or the failure is at item at.
		at := 1 + r.IntN(n)
		if kind == fnFails || kind == sourceFails {
			at = r.IntN(n)
		}
		name := fmt.Sprintf("trial %d (kind=%d n=%d at=%d concurrency=%d ahead=%d)", trial, kind, n, at, conc, ahead)

		ctx, cancel := context.WithCancel(context.Background())
		src := newSource(n)
		if kind == sourceFails {
			src.errAt = at
		}
		srcRand := rand.New(rand.NewPCG(seed, 0))
		src.delay = func(int) { pause(srcRand) }
		l := newLedger(n)
		st := l.stage("end", func(ctx context.Context, i int) error {
			pause(rand.New(rand.NewPCG(seed, uint64(i)+1)))
			if kind == fnFails && i == at {
				return errFn
			}
			// Like a real Fn, give up once the stage is cancelled.
			return ctx.Err()
		})
		st.Concurrency, st.Ahead = conc, ahead

		got := 0
		var gotErr error
		within(t, 10*time.Second, func() {
			for o, err := range Map(ctx, src.seq(), st) {
				if err != nil {
					gotErr = err
					continue // Map must end by itself after an error
				}
				if gotErr != nil {
					t.Fatalf("%s: result after the error", name)
				}
				if o.i != got {
					t.Fatalf("%s: got item %d, want %d", name, o.i, got)
				}
				l.got(o)
				got++
				if got == at && kind == consumerStops {
					break
				}
				if got == at && kind == ctxCancelled {
					cancel()
				}
			}
		})
		cancel()

		if !src.returned.Load() {
			t.Errorf("%s: upstream still running after the iteration returned", name)
		}
		l.check(t, int(src.pulled.Load()))
		if got != at {
			t.Errorf("%s: got %d results, want %d", name, got, at)
		}
		switch kind {
		case consumerStops:
			if gotErr != nil {
				t.Errorf("%s: error %v", name, gotErr)
			}
		case fnFails:
			want := fmt.Sprintf("prefetch: end item %d: fn failed", at)
			if gotErr == nil || gotErr.Error() != want || !errors.Is(gotErr, errFn) {
				t.Errorf("%s: error %v, want %q wrapping errFn", name, gotErr, want)
			}
		case sourceFails:
			if gotErr != errSource {
				t.Errorf("%s: error %v, want the source's error unchanged", name, gotErr)
			}
		case ctxCancelled:
			// Cancelling after the last result may race with the clean end.
			if !errors.Is(gotErr, context.Canceled) && !(gotErr == nil && at == n) {
				t.Errorf("%s: error %v, want context.Canceled", name, gotErr)
			}
		}
	}
	goleak.VerifyNone(t)
}

// TestMapBackpressure holds the consumer on one result and checks that the stage fills its
// window exactly: it pulls upstream and runs Fn until Ahead items are held, and no further.
// It runs in a synctest bubble: synctest.Wait returns once every goroutine of the stage is
// blocked, so the checks see the stage settled, however slow the machine, and an overshoot
// would have happened by then.
func TestMapBackpressure(t *testing.T) {
	for _, tc := range []struct{ concurrency, ahead int }{
		{1, 0}, {1, 1}, {2, 0}, {3, 1}, {2, 5}, {4, 4}, {1, 30},
	} {
		t.Run(fmt.Sprintf("concurrency=%d,ahead=%d", tc.concurrency, tc.ahead), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, hold = 40, 3
				window := effectiveAhead(tc.concurrency, tc.ahead)
				want := min(n, hold+1+window) // the held item and a full window after it

				src := newSource(n)
				l := newLedger(n)
				st := l.stage("bp", nil)
				st.Concurrency, st.Ahead = tc.concurrency, tc.ahead
				var ready atomic.Int64
				st.Hooks.Queue = func(n int, _ int64) { ready.Store(int64(n)) }

				next := 0
				for o, err := range Map(context.Background(), src.seq(), st) {
					if err != nil || o.i != next {
						t.Fatalf("got (%v, %v), want item %d", o, err, next)
					}
					l.got(o)
					next++
					if o.i != hold {
						continue
					}
					synctest.Wait() // the stage has done all it can while the consumer holds the item
					if p := src.pulled.Load(); p != int64(want) {
						t.Errorf("pulled %d items while the consumer holds item %d, want %d", p, hold, want)
					}
					if c := l.calls(); c != want {
						t.Errorf("%d Fn calls while the consumer holds item %d, want %d", c, hold, want)
					}
					if r := ready.Load(); r != int64(want-hold-1) {
						t.Errorf("queue reports %d results ready, want %d", r, want-hold-1)
					}
				}
				if next != n {
					t.Errorf("got %d items, want %d", next, n)
				}
				l.check(t, n)
			})
		})
	}
}

// TestMapConcurrency checks that exactly Concurrency Fn calls run at once when Fn is slow.
func TestMapConcurrency(t *testing.T) {
	for _, c := range []int{1, 3, 5} {
		// In a synctest bubble time moves only once every goroutine is blocked, so every worker
		// that can start an item is inside Fn's sleep before any sleep ends: the most calls at
		// once is exactly what the stage allows.
		synctest.Test(t, func(t *testing.T) {
			n := 4 * c
			src := newSource(n)
			l := newLedger(n)
			st := l.stage("c", func(context.Context, int) error {
				time.Sleep(3 * time.Millisecond)
				return nil
			})
			st.Concurrency = c
			start := time.Now()
			for o, err := range Map(context.Background(), src.seq(), st) {
				if err != nil {
					t.Fatal(err)
				}
				l.got(o)
			}
			if m := int(l.maxRunning.Load()); m != c {
				t.Errorf("concurrency %d: at most %d Fn calls ran at once", c, m)
			}
			// n calls of 3 ms on c goroutines take n/c rounds.
			if elapsed, want := time.Since(start), time.Duration(n/c)*3*time.Millisecond; elapsed != want {
				t.Errorf("concurrency %d: %d calls took %v, want %v", c, n, elapsed, want)
			}
			l.check(t, n)
		})
	}
}

// TestMapMaxBytes holds the consumer on the first result and counts the Fn calls the byte limit
// lets through. In a synctest bubble, synctest.Wait returns once the stage has settled, so the
// counts are final when they are checked.
func TestMapMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		concurrency   int
		maxBytes      int64
		size          int64
		noSize        bool
		minRun, maxRn int // results done beyond the held one, once the stage has settled
	}{
		// One goroutine starts items while the 10-byte results waiting total at most 25:
		// at 0, 10 and 20 bytes, not at 30.
		{name: "sequential", concurrency: 1, maxBytes: 25, size: 10, minRun: 3, maxRn: 3},
		// Each start still happens at most 25 bytes, but the up to 3 calls running then
		// all finish: between 3 and 2+3 results.
		{name: "concurrent", concurrency: 3, maxBytes: 25, size: 10, minRun: 3, maxRn: 5},
		// A result larger than the limit holds back later items but never the next one.
		{name: "huge results", concurrency: 2, maxBytes: 5, size: 100, minRun: 1, maxRn: 2},
		// Without Size there is nothing to measure: only Ahead (8) bounds the stage.
		{name: "no size", concurrency: 1, maxBytes: 1, size: 10, noSize: true, minRun: 8, maxRn: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 30
				src := newSource(n)
				l := newLedger(n)
				st := l.stage("mb", nil)
				st.Concurrency, st.Ahead, st.MaxBytes = tc.concurrency, 8, tc.maxBytes
				if !tc.noSize {
					st.Size = func(out) int64 { return tc.size }
				}
				var ready, bytes atomic.Int64
				st.Hooks.Queue = func(n int, b int64) { ready.Store(int64(n)); bytes.Store(b) }

				next := 0
				within(t, 10*time.Second, func() {
					for o, err := range Map(context.Background(), src.seq(), st) {
						if err != nil || o.i != next {
							t.Fatalf("got (%v, %v), want item %d", o, err, next)
						}
						l.got(o)
						next++
						if o.i != 0 {
							continue
						}
						synctest.Wait() // the stage has done all the limit lets it do
						if r := int(ready.Load()); r < tc.minRun || r > tc.maxRn {
							t.Errorf("%d results ready while the consumer holds the first, want %d to %d", r, tc.minRun, tc.maxRn)
						}
						if c := l.calls(); c != 1+int(ready.Load()) {
							t.Errorf("%d Fn calls, want the held item and the %d ready", c, ready.Load())
						}
						if !tc.noSize && bytes.Load() != ready.Load()*tc.size {
							t.Errorf("queue reports %d bytes for %d results of %d", bytes.Load(), ready.Load(), tc.size)
						}
					}
				})
				if next != n {
					t.Errorf("got %d items, want %d", next, n)
				}
				l.check(t, n)
			})
		})
	}
}

func TestMapFnError(t *testing.T) {
	const n, bad = 40, 17
	src := newSource(n)
	l := newLedger(n)
	st := l.stage("read", func(ctx context.Context, i int) error {
		if i == bad {
			return fmt.Errorf("decoding: %w", errFn)
		}
		return ctx.Err()
	})
	st.Concurrency, st.Ahead = 4, 10
	got := 0
	var gotErr error
	for o, err := range Map(context.Background(), src.seq(), st) {
		if err != nil {
			gotErr = err
			continue
		}
		l.got(o)
		got++
	}
	if want := "prefetch: read item 17: decoding: fn failed"; gotErr == nil || gotErr.Error() != want {
		t.Errorf("error %v, want %q", gotErr, want)
	}
	if !errors.Is(gotErr, errFn) {
		t.Errorf("errors.Is(%v, errFn) is false", gotErr)
	}
	if got != bad {
		t.Errorf("got %d results before the error, want %d", got, bad)
	}
	if p := src.pulled.Load(); p > bad+10+1 {
		t.Errorf("pulled %d items, more than a window past the failed item", p)
	}
	l.check(t, int(src.pulled.Load()))
}

func TestMapUpstreamError(t *testing.T) {
	for _, at := range []int{0, 1, 5} {
		src := newSource(10)
		src.errAt = at
		l := newLedger(10)
		st := l.stage("read", nil)
		st.Concurrency = 3
		var got []int
		var gotErr error
		for o, err := range Map(context.Background(), src.seq(), st) {
			if err != nil {
				gotErr = err
				continue
			}
			l.got(o)
			got = append(got, o.i)
		}
		if gotErr != errSource {
			t.Errorf("at %d: error %v, want the upstream's error unchanged", at, gotErr)
		}
		if want := slices.Collect(func(yield func(int) bool) {
			for i := range at {
				yield(i)
			}
		}); !slices.Equal(got, want) {
			t.Errorf("at %d: got %v before the error, want %v", at, got, want)
		}
		l.check(t, at)
	}
}

func TestMapPanic(t *testing.T) {
	t.Run("value", func(t *testing.T) {
		const bad = 5
		src := newSource(20)
		l := newLedger(20)
		st := l.stage("read", func(_ context.Context, i int) error {
			if i == bad {
				panic("boom")
			}
			return nil
		})
		st.Concurrency = 3
		got := 0
		var gotErr error
		for o, err := range Map(context.Background(), src.seq(), st) {
			if err != nil {
				gotErr = err
				continue
			}
			l.got(o)
			got++
		}
		var pe *PanicError
		if !errors.As(gotErr, &pe) {
			t.Fatalf("error %v is not a *PanicError", gotErr)
		}
		if pe.Stage != "read" || pe.Index != bad || pe.Value != "boom" || pe.Input {
			t.Errorf("PanicError %+v, want stage read, index %d, value boom", pe, bad)
		}
		if want := "prefetch: read item 5: panic: boom"; pe.Error() != want {
			t.Errorf("Error() = %q, want %q", pe.Error(), want)
		}
		if !strings.Contains(string(pe.Stack), "TestMapPanic") {
			t.Errorf("stack does not show where the panic happened:\n%s", pe.Stack)
		}
		if got != bad {
			t.Errorf("got %d results before the panic, want %d", got, bad)
		}
		// Fn took the panicking item, so it is neither released nor a result.
		l.check(t, int(src.pulled.Load()))
	})
	t.Run("error", func(t *testing.T) {
		st := Stage[int, int]{Fn: func(context.Context, int) (int, error) { panic(errFn) }}
		for _, err := range Map(context.Background(), FromSeq(slices.Values([]int{1})), st) {
			if !errors.Is(err, errFn) {
				t.Errorf("errors.Is(%v, errFn) is false", err)
			}
		}
	})
	t.Run("runtime", func(t *testing.T) {
		st := Stage[int, int]{Fn: func(_ context.Context, i int) (int, error) {
			var m map[int]int
			m[i] = i
			return 0, nil
		}}
		for _, err := range Map(context.Background(), FromSeq(slices.Values([]int{1})), st) {
			var re runtime.Error
			if !errors.As(err, &re) {
				t.Errorf("errors.As(%v, runtime.Error) is false", err)
			}
		}
	})
}

func TestMapUpstreamPanic(t *testing.T) {
	src := newSource(10)
	src.panicAt = 3
	l := newLedger(10)
	st := l.stage("read", nil)
	got := 0
	var gotErr error
	for o, err := range Map(context.Background(), src.seq(), st) {
		if err != nil {
			gotErr = err
			continue
		}
		l.got(o)
		got++
	}
	var pe *PanicError
	if !errors.As(gotErr, &pe) || !pe.Input || pe.Index != 3 {
		t.Fatalf("error %v, want an input *PanicError at item 3", gotErr)
	}
	if want := "prefetch: read input, pulling item 3: panic: source exploded"; pe.Error() != want {
		t.Errorf("Error() = %q, want %q", pe.Error(), want)
	}
	if got != 3 {
		t.Errorf("got %d results before the panic, want 3", got)
	}
	l.check(t, 3)
}

func TestMapCancel(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		src := newSource(5)
		l := newLedger(5)
		steps := 0
		for _, err := range Map(ctx, src.seq(), l.stage("c", nil)) {
			steps++
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
		}
		if steps != 1 || src.pulled.Load() != 0 || l.calls() != 0 {
			t.Errorf("%d steps, %d pulled, %d Fn calls; want only the error", steps, src.pulled.Load(), l.calls())
		}
	})

	// The context is cancelled while the consumer waits for a result whose Fn waits for the
	// context: both must wake up. In a synctest bubble the timer fires only once every goroutine
	// is blocked, so the consumer has taken the two results that need no cancellation and waits
	// for the third, on any machine.
	t.Run("while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := newSource(20)
			l := newLedger(20)
			var sawCancel atomic.Int32
			st := l.stage("c", func(ctx context.Context, i int) error {
				if i < 2 {
					return nil
				}
				<-ctx.Done()
				sawCancel.Add(1)
				return ctx.Err()
			})
			st.Concurrency = 3
			timer := time.AfterFunc(20*time.Millisecond, cancel)
			defer timer.Stop()
			got := 0
			var gotErr error
			within(t, 5*time.Second, func() {
				for o, err := range Map(ctx, src.seq(), st) {
					if err != nil {
						gotErr = err
						continue
					}
					l.got(o)
					got++
				}
			})
			if !errors.Is(gotErr, context.Canceled) || got != 2 {
				t.Errorf("got %d results then %v, want 2 then context.Canceled", got, gotErr)
			}
			if s := int(sawCancel.Load()); s != l.calls()-2 {
				t.Errorf("%d of the %d blocked Fn calls saw the cancellation", s, l.calls()-2)
			}
			l.check(t, int(src.pulled.Load()))
		})
	})

	// Cancelling from the loop body ends the iteration at the next step, even though results
	// are ready: in a synctest bubble, synctest.Wait returns once the stage has filled its
	// window, so results are ready when the body cancels.
	t.Run("in body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := newSource(20)
			l := newLedger(20)
			got := 0
			var gotErr error
			for o, err := range Map(ctx, src.seq(), l.stage("c", nil)) {
				if err != nil {
					gotErr = err
					continue
				}
				l.got(o)
				got++
				if got == 4 {
					synctest.Wait() // results pile up
					cancel()
				}
			}
			if !errors.Is(gotErr, context.Canceled) || got != 4 {
				t.Errorf("got %d results then %v, want 4 then context.Canceled", got, gotErr)
			}
			l.check(t, int(src.pulled.Load()))
		})
	})
}

// TestMapStopCancelsFn stops consuming while Fn calls wait for their context: the iteration must
// cancel them and wait for them before it returns. In a synctest bubble, synctest.Wait returns
// once every worker is blocked, so the consumer stops while all three calls wait.
func TestMapStopCancelsFn(t *testing.T) {
	synctest.Test(t, testMapStopCancelsFn)
	goleak.VerifyNone(t)
}

func testMapStopCancelsFn(t *testing.T) {
	src := newSource(20)
	l := newLedger(20)
	var sawCancel atomic.Int32
	st := l.stage("s", func(ctx context.Context, i int) error {
		if i == 0 {
			return nil
		}
		<-ctx.Done()
		sawCancel.Add(1)
		return ctx.Err()
	})
	st.Concurrency = 3
	within(t, 5*time.Second, func() {
		for o, err := range Map(context.Background(), src.seq(), st) {
			if err != nil {
				t.Fatal(err)
			}
			l.got(o)
			synctest.Wait()
			if r := l.running.Load(); r != 3 {
				t.Fatalf("%d Fn calls blocked once the stage settled, want 3", r)
			}
			break
		}
	})
	if s := sawCancel.Load(); s != 3 {
		t.Errorf("%d blocked Fn calls saw their context cancelled, want 3", s)
	}
	if !src.returned.Load() {
		t.Error("upstream still running after the iteration returned")
	}
	l.check(t, int(src.pulled.Load()))
}

// TestMapConsumerPanic panics in the loop body: the panic must reach the caller, and the stage
// must still stop, release and join everything on its way. In a synctest bubble,
// synctest.Wait returns once the stage has filled its window, so there are results to release.
func TestMapConsumerPanic(t *testing.T) {
	synctest.Test(t, testMapConsumerPanic)
	goleak.VerifyNone(t)
}

func testMapConsumerPanic(t *testing.T) {
	src := newSource(20)
	l := newLedger(20)
	st := l.stage("p", nil)
	st.Concurrency = 2
	func() {
		defer func() {
			if v := recover(); v != "consumer exploded" {
				t.Errorf("recovered %v, want the consumer's panic", v)
			}
		}()
		for o := range Map(context.Background(), src.seq(), st) {
			l.got(o)
			if o.i == 2 {
				synctest.Wait() // results pile up
				panic("consumer exploded")
			}
		}
	}()
	if !src.returned.Load() {
		t.Error("upstream still running after the iteration returned")
	}
	l.check(t, int(src.pulled.Load()))
	if p := src.pulled.Load(); p <= 3 {
		t.Errorf("only %d items pulled: nothing was left to release", p)
	}
}

// TestMapRerange ranges twice over one Map: each range is a full, independent run.
func TestMapRerange(t *testing.T) {
	src := newSource(10)
	l := newLedger(10)
	seq := Map(context.Background(), src.seq(), l.stage("r", nil))
	for run := range 2 {
		next := 0
		for o, err := range seq {
			if err != nil || o.i != next {
				t.Fatalf("run %d: got (%v, %v), want item %d", run, o, err, next)
			}
			next++
		}
		if next != 10 {
			t.Errorf("run %d: got %d items, want 10", run, next)
		}
	}
	if p := src.pulled.Load(); p != 20 {
		t.Errorf("pulled %d items, want 20", p)
	}
}

func TestMapEmpty(t *testing.T) {
	l := newLedger(0)
	for o, err := range Map(context.Background(), newSource(0).seq(), l.stage("e", nil)) {
		t.Errorf("got (%v, %v) from an empty input", o, err)
	}
}

func TestMapNilFn(t *testing.T) {
	defer func() {
		if v := recover(); v == nil {
			t.Error("Map with a nil Fn did not panic")
		}
	}()
	Map(context.Background(), FromSeq(slices.Values([]int{1})), Stage[int, int]{})
}

func TestStageDefaults(t *testing.T) {
	size := func(int) int64 { return 1 }
	for _, tc := range []struct {
		in       Stage[int, int]
		conc     int
		ahead    int
		maxBytes int64
	}{
		{Stage[int, int]{}, 1, 2, 0},
		{Stage[int, int]{Concurrency: 4}, 4, 8, 0},
		{Stage[int, int]{Concurrency: 4, Ahead: 2}, 4, 4, 0},
		{Stage[int, int]{Concurrency: -1, Ahead: 5}, 1, 5, 0},
		{Stage[int, int]{MaxBytes: 10}, 1, 2, 0},
		{Stage[int, int]{MaxBytes: 10, Size: size}, 1, 2, 10},
		{Stage[int, int]{MaxBytes: -10, Size: size}, 1, 2, 0},
	} {
		got := tc.in.withDefaults()
		if got.Concurrency != tc.conc || got.Ahead != tc.ahead || got.MaxBytes != tc.maxBytes || got.Name != "stage" {
			t.Errorf("%+v: got concurrency %d, ahead %d, max bytes %d, name %q; want %d, %d, %d, stage",
				tc.in, got.Concurrency, got.Ahead, got.MaxBytes, got.Name, tc.conc, tc.ahead, tc.maxBytes)
		}
	}
}

func TestFromSeq(t *testing.T) {
	var got []int
	for v, err := range FromSeq(slices.Values([]int{1, 2, 3, 4})) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
		if v == 3 {
			break
		}
	}
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("got %v, want [1 2 3]", got)
	}
}
