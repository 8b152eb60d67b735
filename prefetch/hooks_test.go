package prefetch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// recorder keeps what a stage's hooks report.
type recorder struct {
	mu         sync.Mutex
	done       int
	doneBytes  int64
	doneTime   time.Duration
	queue      [][2]int64 // every Queue report: ready, bytes
	waits      int
	waitTime   time.Duration
	lastReady  atomic.Int64
	queueAbove atomic.Int64 // reports of more ready results than the window holds
}

func (r *recorder) hooks(window int) Hooks {
	return Hooks{
		Done: func(d time.Duration, size int64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.done++
			r.doneBytes += size
			r.doneTime += d
		},
		Queue: func(ready int, bytes int64) {
			r.lastReady.Store(int64(ready))
			if ready > window || ready < 0 {
				r.queueAbove.Add(1)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.queue = append(r.queue, [2]int64{int64(ready), bytes})
		},
		Wait: func(d time.Duration) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.waits++
			r.waitTime += d
		},
	}
}

// TestHooksSlowFn: a slow stage and a fast consumer. The consumer waits for the whole run and
// results never pile up. In a synctest bubble time moves only while every goroutine is blocked,
// so Fn's sleeps are the only time that passes and every duration is exact.
func TestHooksSlowFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, fnTime = 15, 3 * time.Millisecond
		var rec recorder
		st := Stage[int, int]{
			Concurrency: 1,
			Ahead:       4,
			Fn: func(_ context.Context, i int) (int, error) {
				time.Sleep(fnTime)
				return i, nil
			},
			Size:  func(int) int64 { return 100 },
			Hooks: rec.hooks(4),
		}
		start := time.Now()
		for _, err := range Map(context.Background(), newSource(n).seq(), st) {
			if err != nil {
				t.Fatal(err)
			}
		}
		elapsed := time.Since(start)

		rec.mu.Lock()
		defer rec.mu.Unlock()
		if elapsed != n*fnTime {
			t.Errorf("the run took %v, want %d calls of %v one after another", elapsed, n, fnTime)
		}
		if rec.waits != n+1 {
			t.Errorf("Wait called %d times, want once per result and once for the end: %d", rec.waits, n+1)
		}
		// The consumer takes each result at once and waits for the next: it waits all along.
		if rec.waitTime != elapsed {
			t.Errorf("consumer waited %v of %v, want all of it", rec.waitTime, elapsed)
		}
		if rec.done != n || rec.doneTime != n*fnTime || rec.doneBytes != n*100 {
			t.Errorf("Done: %d calls, %v, %d bytes; want %d calls, %v, %d bytes", rec.done, rec.doneTime, rec.doneBytes, n, n*fnTime, n*100)
		}
		// Each result is reported once ready (1) and once taken (0), never more at once.
		if len(rec.queue) != 2*n {
			t.Errorf("%d queue reports, want %d: %v", len(rec.queue), 2*n, rec.queue)
		}
		for k, q := range rec.queue {
			if want := [2]int64{int64(1 - k%2), int64(100 * (1 - k%2))}; q != want {
				t.Fatalf("queue report %d is %v, want %v: %v", k, q, want, rec.queue)
			}
		}
	})
}

// TestHooksSlowConsumer: a fast stage and a slow consumer. Whenever the consumer comes back for
// the next result, the queue is full: in a synctest bubble the consumer's sleep ends only once
// the stage has done all it can and blocked.
func TestHooksSlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, ahead = 25, 4
		var rec recorder
		st := Stage[int, int]{
			Concurrency: 2,
			Ahead:       ahead,
			Fn:          func(_ context.Context, i int) (int, error) { return i, nil },
			Hooks:       rec.hooks(ahead),
		}
		for i, err := range Map(context.Background(), newSource(n).seq(), st) {
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			// Near the end fewer than ahead items are left.
			if want := int64(min(ahead, n-1-i)); rec.lastReady.Load() != want {
				t.Fatalf("after taking item %d and sleeping, %d results ready, want %d", i, rec.lastReady.Load(), want)
			}
		}
		if a := rec.queueAbove.Load(); a != 0 {
			t.Errorf("%d queue reports out of [0, %d]", a, ahead)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if last := rec.queue[len(rec.queue)-1]; last != [2]int64{0, 0} {
			t.Errorf("last queue report %v, want [0 0]", last)
		}
		// The stage was always ahead, so the consumer never waited but for the first result,
		// which takes no time to make.
		if rec.waitTime != 0 {
			t.Errorf("consumer waited %v, want 0", rec.waitTime)
		}
	})
}

// TestHooksEarlyStop: after an early stop the queue reads empty, as its results were released.
// In a synctest bubble, synctest.Wait returns once the stage has filled its queue, so the stop
// always releases a full queue.
func TestHooksEarlyStop(t *testing.T) { synctest.Test(t, testHooksEarlyStop) }

func testHooksEarlyStop(t *testing.T) {
	var rec recorder
	st := Stage[int, int]{
		Concurrency: 2,
		Ahead:       6,
		Fn:          func(_ context.Context, i int) (int, error) { return i, nil },
		Size:        func(int) int64 { return 7 },
		Hooks:       rec.hooks(6),
	}
	for i := range Map(context.Background(), newSource(100).seq(), st) {
		if i == 3 {
			synctest.Wait()
			if r := rec.lastReady.Load(); r != 6 {
				t.Fatalf("%d results ready once the stage settled, want a full queue of 6", r)
			}
			break
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if last := rec.queue[len(rec.queue)-1]; last != [2]int64{0, 0} {
		t.Errorf("last queue report %v, want [0 0]", last)
	}
	if rec.doneBytes != int64(rec.done)*7 {
		t.Errorf("Done reported %d bytes for %d calls of 7", rec.doneBytes, rec.done)
	}
}
