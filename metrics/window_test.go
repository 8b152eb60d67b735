package metrics

import (
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestWindowLength(t *testing.T) {
	const window = 10 * time.Second
	p, advance := newWithWindow(window)
	// While the stream is younger than the window, the window is the stream.
	for elapsed := time.Duration(0); elapsed < window; elapsed += 2500 * time.Millisecond {
		if got := p.Snapshot().Recent.Seconds; !near(got, elapsed.Seconds()) {
			t.Errorf("at %v: window of %vs, want all of it", elapsed, got)
		}
		advance(2500 * time.Millisecond)
	}
	// Then it moves in tenths: never shorter than the window, never a tenth longer.
	p, advance = newWithWindow(window)
	for step := range 400 {
		advance(37 * time.Millisecond) // not a divisor of the step, to land anywhere in it
		elapsed := time.Duration(step+1) * 37 * time.Millisecond
		got := p.Snapshot().Recent.Seconds
		low := min(elapsed, window).Seconds()
		if got < low-1e-9 || got >= (window+window/windowSteps).Seconds() {
			t.Fatalf("after %v: window of %vs, want within [%v, 11)", elapsed, got, low)
		}
	}
	if p, _ := newWithClock(); p.win.step != DefaultWindow/windowSteps {
		t.Errorf("default window moves in steps of %v, want %v", p.win.step, DefaultWindow/windowSteps)
	}
}

func TestWindowForgets(t *testing.T) {
	// A full raw queue and a long wait early in the stream leave the window once it has moved
	// past them, while the counters since New keep them.
	p, advance := newWithWindow(time.Second)
	p.SetRawQueue(8, 0)
	advance(time.Second)
	p.AddConsumerWait(time.Second)
	p.SetRawQueue(0, 0)
	advance(5 * time.Second)
	p.AddConsumed(1, 1)
	s := p.Snapshot()
	if s.Recent.RawQueueItems != 0 || s.Recent.ConsumerWaitSeconds != 0 || s.DataStallFraction != 0 {
		t.Errorf("old figures still in the window: %+v", s.Recent)
	}
	if !near(s.RawQueueItemSeconds, 8) || s.ConsumerWaitSeconds != 1 {
		t.Errorf("counters since New lost them: %v item-seconds, %vs waited; want 8 and 1", s.RawQueueItemSeconds, s.ConsumerWaitSeconds)
	}
}

func TestWaitStraddlingWindowStart(t *testing.T) {
	// A wait is reported when it ends; only its part inside the window may count.
	p, advance := newWithWindow(time.Second)
	advance(5 * time.Second)
	p.Snapshot() // marks are made up to here
	advance(500 * time.Millisecond)
	p.AddConsumerWait(2 * time.Second) // began 1.5 s before the window's 1 s (or 1.1 s) start
	s := p.Snapshot()
	if !near(s.Recent.ConsumerWaitSeconds, s.Recent.Seconds) || s.DataStallFraction != 1 {
		t.Errorf("a wait covering the window: %vs of %vs, stall %v; want all of it", s.Recent.ConsumerWaitSeconds, s.Recent.Seconds, s.DataStallFraction)
	}
	if s.ConsumerWaitSeconds != 2 {
		t.Errorf("counter %vs, want the whole wait, 2", s.ConsumerWaitSeconds)
	}

	// Marks are made every 0.1 s, and the window starts at the oldest of the last eleven: from
	// here on it holds part of a 0.3 s wait, then less of it as it moves on, then none.
	advance(2 * time.Second) // 7.5
	p.AddConsumerWait(300 * time.Millisecond)
	for _, c := range []struct {
		advance       time.Duration
		seconds, wait float64
	}{
		{0, 1, 0.3},                         // [6.5, 7.5] holds [7.2, 7.5]
		{850 * time.Millisecond, 1.05, 0.2}, // [7.3, 8.35]
		{100 * time.Millisecond, 1.05, 0.1}, // [7.4, 8.45]
		{200 * time.Millisecond, 1.05, 0},   // [7.6, 8.65]
	} {
		advance(c.advance)
		s := p.Snapshot()
		if !near(s.Recent.Seconds, c.seconds) || !near(s.Recent.ConsumerWaitSeconds, c.wait) {
			t.Errorf("window %vs holding %vs of waiting, want %vs holding %vs", s.Recent.Seconds, s.Recent.ConsumerWaitSeconds, c.seconds, c.wait)
		}
	}
}

func TestLongSilence(t *testing.T) {
	// Hours without an update: the first snapshot after them sees the depth that held all along.
	p, advance := newWithWindow(time.Second)
	p.SetPrefetchQueue(3, 0)
	advance(5 * time.Hour)
	s := p.Snapshot()
	if !near(s.Recent.PrefetchQueueItems, 3) || !near(s.PrefetchQueueItemSeconds, 3*5*3600) {
		t.Errorf("after 5 h at depth 3: mean %v, integral %v", s.Recent.PrefetchQueueItems, s.PrefetchQueueItemSeconds)
	}
	if s.Recent.Seconds < 1 || s.Recent.Seconds >= 1.1 {
		t.Errorf("window of %vs after a silence, want [1, 1.1)", s.Recent.Seconds)
	}
}

func TestClockStepsBack(t *testing.T) {
	p, advance := newWithWindow(time.Second)
	p.SetRawQueue(2, 0)
	advance(2 * time.Second)
	p.Snapshot()
	advance(-time.Second)
	s := p.Snapshot()
	if !near(s.RawQueueItemSeconds, 4) || s.Recent.RawQueueItems < 0 {
		t.Errorf("after the clock stepped back: %v item-seconds, mean %v; want 4 and no negative", s.RawQueueItemSeconds, s.Recent.RawQueueItems)
	}
}

func TestFlickerReadsAsMean(t *testing.T) {
	// The health example's trouble with samples: a queue full for a moment after each burst
	// reads full to a snapshot taken at that moment. Integrated, it reads as what it holds on
	// average.
	p, advance := newWithWindow(time.Second)
	p.SetCapacity(3, 8)
	p.SetRawQueue(3, 0)
	for range 100 {
		p.SetPrefetchQueue(8, 0)
		advance(time.Millisecond)
		p.SetPrefetchQueue(0, 0)
		advance(9 * time.Millisecond)
		p.AddConsumerWait(9 * time.Millisecond)
		p.AddTransform(20 * time.Millisecond)
		p.AddConsumed(1024, 8)
		p.SetPrefetchQueue(8, 0)
	}
	s := p.Snapshot()
	if s.PrefetchQueueItems != 8 {
		t.Fatalf("the instant reading is %d, want 8: the test no longer catches the burst", s.PrefetchQueueItems)
	}
	if !near(s.Recent.PrefetchQueueItems, 0.8) || !near(s.DataStallFraction, 0.9) || s.Diagnosis() != TransformBound {
		t.Errorf("mean prefetch %v, stall %v, %q; want 0.8, 0.9, %q", s.Recent.PrefetchQueueItems, s.DataStallFraction, s.Diagnosis(), TransformBound)
	}
}

// Epochs of 140 ms, each as a stream reports it: 20 ms filling (the consumer waits for the
// first batch, the queues empty), 100 ms steady with both queues full while the consumer takes
// a batch every 5 ms, and 20 ms draining the prefetch queue. The stall and the queue means
// leave the filling and draining out, so the job reads consumer-bound as with long epochs,
// while the start waits stay visible on their own.
func TestShortEpochsReadAsSteady(t *testing.T) {
	const window = time.Second
	p, advance := newWithWindow(window)
	p.SetCapacity(4, 8)
	for range 30 {
		p.SetSteady(false)
		advance(20 * time.Millisecond)
		p.AddStartWait(20 * time.Millisecond)
		p.SetSteady(true)
		p.SetRawQueue(4, 0)
		p.SetPrefetchQueue(8, 0)
		for range 20 {
			advance(5 * time.Millisecond)
			p.AddConsumed(100, 1)
		}
		p.SetSteady(false)
		p.SetRawQueue(0, 0)
		for n := 7; n >= 0; n-- {
			advance(2500 * time.Microsecond)
			p.SetPrefetchQueue(n, 0)
			p.AddConsumed(100, 1)
		}
	}
	s := p.Snapshot()
	r := s.Recent
	if s.Diagnosis() != ConsumerBound || s.DataStallFraction != 0 || !near(r.PrefetchQueueItems, 8) || !near(r.RawQueueItems, 4) {
		t.Errorf("short epochs: %q, stall %v, means raw %v prefetch %v; want %q, 0, 4 and 8 (%+v)", s.Diagnosis(), s.DataStallFraction, r.RawQueueItems, r.PrefetchQueueItems, ConsumerBound, r)
	}
	if share := r.StartWaitSeconds / r.Seconds; math.Abs(share-1.0/7) > 0.03 || math.Abs(r.SteadySeconds/r.Seconds-5.0/7) > 0.03 {
		t.Errorf("start waits %.3f and steady time %.3f of the window, want 1/7 and 5/7", share, r.SteadySeconds/r.Seconds)
	}
	if s.StartWaitSeconds != 30*0.02 || !near(s.ConsumerWaitSeconds, s.StartWaitSeconds) {
		t.Errorf("start waits %vs of %vs waited, want 0.6 of 0.6", s.StartWaitSeconds, s.ConsumerWaitSeconds)
	}
	if line := s.String(); !strings.Contains(line, "stall 0.0% (+14.") {
		t.Errorf("health line %q does not show the start waits beside the stall", line)
	}
	prev := s
	advance(20 * time.Millisecond)
	p.AddStartWait(20 * time.Millisecond)
	if d := p.Snapshot().Since(prev); !near(d.StartWaitSeconds, 0.02) || !near(d.ConsumerWaitSeconds, 0.02) {
		t.Errorf("Since: %v start of %v waited, want 0.02 of 0.02", d.StartWaitSeconds, d.ConsumerWaitSeconds)
	}

	// A window without steady time (a stream that only fills and drains) reads its means over
	// all of it.
	q, advance := newWithWindow(window)
	q.SetSteady(false)
	q.SetRawQueue(2, 0)
	advance(time.Second)
	if r := q.Snapshot().Recent; r.SteadySeconds != 0 || !near(r.RawQueueItems, 2) {
		t.Errorf("no steady time: steady %vs, raw mean %v; want 0 and 2", r.SteadySeconds, r.RawQueueItems)
	}
}
