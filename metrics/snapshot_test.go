package metrics

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestSince(t *testing.T) {
	p, advance := newWithWindow(2 * time.Second)
	p.SetCapacity(8, 4)
	p.AddConsumed(1000, 4)
	p.AddSkipped(9)
	p.AddFetch(3 * time.Second)
	p.AddTransform(time.Second)
	p.AddConsumerWait(time.Second)
	p.AddRead("s3", 5000, 5)
	p.SetRawQueue(7, 700)
	advance(60 * time.Second)
	prev := p.Snapshot()

	p.AddConsumed(300, 1)
	p.AddSkipped(4)
	p.AddFetch(1500 * time.Millisecond)
	p.AddRead("s3", 100, 1)
	p.AddRead("file", 10, 2) // a backend first seen in the interval
	p.SetRawQueue(0, 0)
	p.SetPrefetchQueue(1, 10)
	p.SetUnscannedRows(42)
	advance(2 * time.Second)
	p.AddConsumerWait(500 * time.Millisecond)
	now := p.Snapshot()

	got := now.Since(prev)
	want := Snapshot{
		Time:                     now.Time,
		ElapsedSeconds:           2,
		UnscannedRows:            42,
		RawQueueItems:            0,
		RawQueueBytes:            0,
		RawQueueCapacity:         8,
		PrefetchQueueItems:       1,
		PrefetchQueueBytes:       10,
		PrefetchQueueCapacity:    4,
		RawQueueItemSeconds:      0,
		PrefetchQueueItemSeconds: got.PrefetchQueueItemSeconds, // checked below, as floats add up inexactly
		ConsumedRows:             300,
		ConsumedBatches:          1,
		SkippedRows:              4,
		FetchSeconds:             1.5,
		TransformSeconds:         0,
		ConsumerWaitSeconds:      0.5,
		ReadBytes:                110,
		ReadRequests:             3,
		Backends: map[string]BackendReads{
			"s3":   {Bytes: 100, Requests: 1},
			"file": {Bytes: 10, Requests: 2},
		},
		// The window is the Pipeline's last 2 s, kept from now as it is, whatever the interval.
		Recent:            now.Recent,
		RowsPerSecond:     150,
		DataStallFraction: 0.25,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Since\n got %#v\nwant %#v", got, want)
	}
	if !near(got.PrefetchQueueItemSeconds, 2) {
		t.Errorf("prefetch queue over the interval: %v item-seconds, want 2", got.PrefetchQueueItemSeconds)
	}
	r := now.Recent
	if r.Seconds != 2 || r.RawQueueItems != 0 || !near(r.PrefetchQueueItems, 1) || r.ConsumerWaitSeconds != 0.5 ||
		r.ConsumedBatches != 1 || r.FetchSeconds != 1.5 || r.TransformSeconds != 0 {
		t.Errorf("Recent = %+v, want 2 s with a mean prefetch queue of 1, 0.5 s waited, 1 batch, 1.5 s fetching", r)
	}

	got.Backends["s3"] = BackendReads{}
	if now.Backends["s3"] != (BackendReads{Bytes: 5100, Requests: 6}) {
		t.Errorf("editing the result of Since changed its receiver: %+v", now.Backends)
	}

	if again := now.Since(Snapshot{}); !reflect.DeepEqual(again, now) {
		t.Errorf("Since(zero) = %+v, want the snapshot itself %+v", again, now)
	}
	if empty := now.Since(now); empty.RowsPerSecond != 0 || empty.ConsumedRows != 0 || empty.RawQueueItemSeconds != 0 {
		t.Errorf("a zero-length interval has rates: %+v", empty)
	}
}

func TestDiagnosis(t *testing.T) {
	// busy is a snapshot where something moved in the window, with the given mean queue depths
	// and stall.
	busy := func(raw float64, rawCap int, prefetch float64, prefetchCap int, stall float64) Snapshot {
		s := Snapshot{
			ElapsedSeconds:        10,
			ConsumedRows:          100,
			ConsumedBatches:       1,
			RawQueueCapacity:      rawCap,
			PrefetchQueueCapacity: prefetchCap,
			Recent: Recent{
				Seconds:             10,
				ConsumedBatches:     1,
				ConsumerWaitSeconds: 10 * stall,
				RawQueueItems:       raw,
				PrefetchQueueItems:  prefetch,
			},
		}
		s.derive()
		return s
	}
	idle := func(r Recent) Snapshot {
		s := Snapshot{ElapsedSeconds: 5, RawQueueCapacity: 4, PrefetchQueueCapacity: 4, Recent: r}
		s.derive()
		return s
	}
	for _, c := range []struct {
		name string
		s    Snapshot
		want string
	}{
		{"nothing happened", idle(Recent{Seconds: 5}), Idle},
		{"full queues, consumer away for the whole window", idle(Recent{Seconds: 5, RawQueueItems: 4, PrefetchQueueItems: 4}), Idle},
		{"moved before the window only", Snapshot{ElapsedSeconds: 60, ConsumedBatches: 50, FetchSeconds: 9, Recent: Recent{Seconds: 10}}, Idle},
		{"reading, nobody waiting yet", idle(Recent{Seconds: 5, FetchSeconds: 1}), Balanced},
		{"first batch after a long wait", idle(Recent{Seconds: 5, FetchSeconds: 4, ConsumedBatches: 1, ConsumerWaitSeconds: 4}), IOBound},
		{"only a transform ran", idle(Recent{Seconds: 5, TransformSeconds: 1}), Balanced},

		{"raw queue empty, consumer waits", busy(0, 8, 0, 4, 0.6), IOBound},
		{"raw at a quarter, at the stall floor", busy(2, 8, 1, 4, 0.05), IOBound},
		{"raw empty, waits below the floor", busy(0, 8, 0, 4, 0.049), Balanced},
		{"raw just above a quarter", busy(2.1, 8, 0, 4, 0.6), Balanced},

		{"raw full, prefetch empty", busy(8, 8, 0, 4, 0.3), TransformBound},
		{"raw at three quarters, consumer waits", busy(6, 8, 0.5, 4, 0.05), TransformBound},
		{"raw just below three quarters", busy(5.9, 8, 0, 4, 0.3), Balanced},
		{"raw full, no waiting: batches just in time", busy(8, 8, 1, 4, 0), Balanced},
		// Transforms on every core leave results in the prefetch queue while the consumer, short
		// of CPU, is not scheduled to take them: waiting decides, not the full prefetch queue.
		{"raw and prefetch full, consumer starved", busy(3, 3, 7, 8, 0.98), TransformBound},

		{"both full, no waiting", busy(8, 8, 4, 4, 0), ConsumerBound},
		{"prefetch full, raw empty", busy(0, 8, 4, 4, 0), ConsumerBound},
		{"prefetch at three quarters, waits below the floor", busy(4, 8, 3, 4, 0.04), ConsumerBound},
		{"prefetch just below three quarters", busy(8, 8, 2.9, 4, 0), Balanced},

		{"both half full, consumer waits", busy(4, 8, 2, 4, 0.5), Balanced},
		{"capacity 1: raw full a quarter of the time", busy(0.25, 1, 0, 1, 0.5), IOBound},
		{"capacity 1: raw full, waits", busy(1, 1, 0, 1, 0.5), TransformBound},
		{"capacity 1: prefetch full", busy(0, 1, 1, 1, 0), ConsumerBound},
		{"capacity unknown: empty queues still count", busy(0, 0, 0, 0, 0.5), IOBound},
		{"capacity unknown: never full", busy(100, 0, 100, 0, 0), Balanced},
	} {
		if got := c.s.Diagnosis(); got != c.want {
			t.Errorf("%s: Diagnosis() = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDiagnosisFromPipeline(t *testing.T) {
	// The same patterns reached through the update methods, as the stages report them, one
	// window after another.
	const window = 10 * time.Second
	p, advance := newWithWindow(window)
	p.SetCapacity(8, 4)
	advance(window)
	if got := p.Snapshot().Diagnosis(); got != Idle {
		t.Errorf("before any work: %q, want %q", got, Idle)
	}

	// I/O-bound: every batch takes a 70 ms wait for a read, queues stay empty.
	for range 200 {
		advance(30 * time.Millisecond)
		p.AddFetch(50 * time.Millisecond)
		advance(70 * time.Millisecond)
		p.AddConsumerWait(70 * time.Millisecond)
		p.AddConsumed(512, 1)
	}
	if s := p.Snapshot(); s.Diagnosis() != IOBound || s.DataStallFraction < 0.69 || s.DataStallFraction > 0.71 {
		t.Errorf("empty queues, consumer waiting 70%%: %q, stall %.3f; want %q, 0.70", s.Diagnosis(), s.DataStallFraction, IOBound)
	}

	// Transform-bound: the raw queue stays full; the transform hands a batch over every 20 ms
	// and the consumer takes it at once, after waiting 15 ms of the 20.
	p.SetRawQueue(8, 8<<20)
	for range 1000 {
		advance(5 * time.Millisecond)
		p.AddTransform(20 * time.Millisecond)
		advance(15 * time.Millisecond)
		p.SetPrefetchQueue(1, 1<<20)
		p.SetPrefetchQueue(0, 0)
		p.AddConsumerWait(15 * time.Millisecond)
		p.AddConsumed(512, 1)
	}
	if s := p.Snapshot(); s.Diagnosis() != TransformBound || math.Abs(s.Recent.RawQueueItems-8) > 1e-9 {
		t.Errorf("raw queue full: %q, mean raw %.2f; want %q, 8", s.Diagnosis(), s.Recent.RawQueueItems, TransformBound)
	}

	// Consumer-bound: the queues stay full; the consumer's instant take of a batch empties a
	// slot for a moment, refilled at once.
	p.SetPrefetchQueue(4, 4<<20)
	for range 1000 {
		advance(20 * time.Millisecond)
		p.SetPrefetchQueue(3, 3<<20)
		p.AddConsumed(512, 1)
		p.AddTransform(time.Millisecond)
		p.SetPrefetchQueue(4, 4<<20)
	}
	if got := p.Snapshot().Diagnosis(); got != ConsumerBound {
		t.Errorf("both queues full: %q, want %q", got, ConsumerBound)
	}

	// The consumer stops: nothing moves for a window, so the stream reads idle.
	advance(window + window/windowSteps)
	if got := p.Snapshot().Diagnosis(); got != Idle {
		t.Errorf("a window after the last batch: %q, want %q", got, Idle)
	}
}

func TestString(t *testing.T) {
	s := Snapshot{
		ElapsedSeconds:        10,
		UnscannedRows:         1_200_000,
		RawQueueItems:         0,
		RawQueueCapacity:      8,
		PrefetchQueueItems:    0,
		PrefetchQueueBytes:    40_000,
		PrefetchQueueCapacity: 4,
		ConsumedRows:          52_100,
		ConsumedBatches:       51,
		FetchSeconds:          79.04,
		TransformSeconds:      6.01,
		ConsumerWaitSeconds:   4.13,
		ReadBytes:             96_000_000,
		ReadRequests:          12,
		Recent: Recent{
			Seconds:             10,
			RawQueueItems:       0.24,
			PrefetchQueueItems:  0.01,
			ConsumerWaitSeconds: 4.13,
			ConsumedBatches:     51,
		},
	}
	s.derive()
	want := "io-bound: 5210 rows/s, stall 41.3%, raw 0.2/8 (0.0 MB), prefetch 0.0/4 (0.0 MB), " +
		"fetch 79.0s, transform 6.0s, read 96.0 MB in 12 requests, 1200000 rows unscanned"
	if got := s.String(); got != want {
		t.Errorf("String()\n got %q\nwant %q", got, want)
	}

	if got, want := queue(2.5, 0, 2_500_000), "2.5 (2.5 MB)"; got != want {
		t.Errorf("queue of unknown capacity = %q, want %q", got, want)
	}
}
