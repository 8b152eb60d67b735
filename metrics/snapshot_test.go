package metrics

import (
	"reflect"
	"testing"
	"time"
)

func TestSince(t *testing.T) {
	p, advance := newWithClock()
	p.SetCapacity(8, 4)
	p.AddConsumed(1000, 4)
	p.AddFetch(3 * time.Second)
	p.AddTransform(time.Second)
	p.AddConsumerWait(time.Second)
	p.AddRead("s3", 5000, 5)
	p.SetRawQueue(7, 700)
	advance(60 * time.Second)
	prev := p.Snapshot()

	p.AddConsumed(300, 1)
	p.AddFetch(1500 * time.Millisecond)
	p.AddConsumerWait(500 * time.Millisecond)
	p.AddRead("s3", 100, 1)
	p.AddRead("file", 10, 2) // a backend first seen in the interval
	p.SetRawQueue(0, 0)
	p.SetPrefetchQueue(1, 10)
	p.SetUnscannedRows(42)
	advance(2 * time.Second)
	now := p.Snapshot()

	got := now.Since(prev)
	want := Snapshot{
		Time:                  now.Time,
		ElapsedSeconds:        2,
		UnscannedRows:         42,
		RawQueueItems:         0,
		RawQueueBytes:         0,
		RawQueueCapacity:      8,
		PrefetchQueueItems:    1,
		PrefetchQueueBytes:    10,
		PrefetchQueueCapacity: 4,
		ConsumedRows:          300,
		ConsumedBatches:       1,
		FetchSeconds:          1.5,
		TransformSeconds:      0,
		ConsumerWaitSeconds:   0.5,
		ReadBytes:             110,
		ReadRequests:          3,
		Backends: map[string]BackendReads{
			"s3":   {Bytes: 100, Requests: 1},
			"file": {Bytes: 10, Requests: 2},
		},
		RowsPerSecond:     150,
		DataStallFraction: 0.25,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Since\n got %+v\nwant %+v", got, want)
	}

	got.Backends["s3"] = BackendReads{}
	if now.Backends["s3"] != (BackendReads{Bytes: 5100, Requests: 6}) {
		t.Errorf("editing the result of Since changed its receiver: %+v", now.Backends)
	}

	if again := now.Since(Snapshot{}); !reflect.DeepEqual(again, now) {
		t.Errorf("Since(zero) = %+v, want the snapshot itself %+v", again, now)
	}
	if empty := now.Since(now); empty.RowsPerSecond != 0 || empty.DataStallFraction != 0 || empty.ConsumedRows != 0 {
		t.Errorf("a zero-length interval has rates: %+v", empty)
	}
}

func TestDiagnosis(t *testing.T) {
	// busy is a snapshot where something moved, with the given queues and stall.
	busy := func(raw, rawCap, prefetch, prefetchCap int, stall float64) Snapshot {
		return Snapshot{
			ElapsedSeconds:        1,
			ConsumedRows:          100,
			ConsumedBatches:       1,
			ConsumerWaitSeconds:   stall,
			DataStallFraction:     stall,
			RawQueueItems:         raw,
			RawQueueCapacity:      rawCap,
			PrefetchQueueItems:    prefetch,
			PrefetchQueueCapacity: prefetchCap,
		}
	}
	for _, c := range []struct {
		name string
		s    Snapshot
		want string
	}{
		{"nothing happened", Snapshot{ElapsedSeconds: 5}, Idle},
		{"reading, nobody waiting yet", Snapshot{ElapsedSeconds: 5, FetchSeconds: 1}, Balanced},
		{"first batch after a long wait", Snapshot{ElapsedSeconds: 5, FetchSeconds: 4, ConsumedRows: 10, ConsumedBatches: 1, ConsumerWaitSeconds: 4, DataStallFraction: 0.8}, IOBound},
		{"only a transform ran", Snapshot{ElapsedSeconds: 5, TransformSeconds: 1, RawQueueCapacity: 4, PrefetchQueueCapacity: 4}, Balanced},

		{"both queues empty, consumer waits", busy(0, 8, 0, 4, 0.6), IOBound},
		{"both near empty at a quarter", busy(2, 8, 1, 4, 0.05), IOBound},
		{"both empty, waits below the floor", busy(0, 8, 0, 4, 0.049), Balanced},
		{"raw just above a quarter", busy(3, 8, 0, 4, 0.6), Balanced},

		{"raw full, prefetch empty", busy(8, 8, 0, 4, 0.3), TransformBound},
		{"raw at three quarters, prefetch at a quarter", busy(6, 8, 1, 4, 0), TransformBound},
		{"raw just below three quarters", busy(5, 8, 0, 4, 0.3), Balanced},

		{"both full", busy(8, 8, 4, 4, 0), ConsumerBound},
		{"prefetch full, raw empty", busy(0, 8, 4, 4, 0), ConsumerBound},
		{"prefetch at three quarters", busy(4, 8, 3, 4, 0), ConsumerBound},

		{"both half full", busy(4, 8, 2, 4, 0.5), Balanced},
		{"capacity 1: full and empty", busy(1, 1, 0, 1, 0), TransformBound},
		{"capacity 1: empty and full", busy(0, 1, 1, 1, 0), ConsumerBound},
		{"capacity unknown: empty queues still count", busy(0, 0, 0, 0, 0.5), IOBound},
		{"capacity unknown: never full", busy(100, 0, 0, 0, 0.5), Balanced},
	} {
		if got := c.s.Diagnosis(); got != c.want {
			t.Errorf("%s: Diagnosis() = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDiagnosisFromPipeline(t *testing.T) {
	// The same patterns reached through the update methods and Since, as a health print would.
	p, advance := newWithClock()
	p.SetCapacity(8, 4)
	prev := p.Snapshot()
	advance(time.Second)
	if got := p.Snapshot().Since(prev).Diagnosis(); got != Idle {
		t.Errorf("before any work: %q, want %q", got, Idle)
	}

	prev = p.Snapshot()
	p.AddConsumed(512, 1)
	p.AddFetch(1900 * time.Millisecond)
	p.AddConsumerWait(700 * time.Millisecond)
	advance(time.Second)
	if got := p.Snapshot().Since(prev).Diagnosis(); got != IOBound {
		t.Errorf("empty queues, consumer waiting 70%%: %q, want %q", got, IOBound)
	}

	prev = p.Snapshot()
	p.SetRawQueue(8, 8<<20)
	p.AddConsumed(512, 1)
	p.AddTransform(2 * time.Second)
	p.AddConsumerWait(400 * time.Millisecond)
	advance(time.Second)
	if got := p.Snapshot().Since(prev).Diagnosis(); got != TransformBound {
		t.Errorf("raw queue full: %q, want %q", got, TransformBound)
	}

	prev = p.Snapshot()
	p.SetPrefetchQueue(4, 4<<20)
	p.AddConsumed(2048, 4)
	advance(time.Second)
	if got := p.Snapshot().Since(prev).Diagnosis(); got != ConsumerBound {
		t.Errorf("both queues full: %q, want %q", got, ConsumerBound)
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
	}
	s.derive()
	want := "io-bound: 5210 rows/s, stall 41.3%, raw 0/8 (0.0 MB), prefetch 0/4 (0.0 MB), " +
		"fetch 79.0s, transform 6.0s, read 96.0 MB in 12 requests, 1200000 rows unscanned"
	if got := s.String(); got != want {
		t.Errorf("String()\n got %q\nwant %q", got, want)
	}

	s.RawQueueCapacity, s.RawQueueItems, s.RawQueueBytes = 0, 3, 2_500_000
	if got, want := queue(s.RawQueueItems, s.RawQueueCapacity, s.RawQueueBytes), "3 (2.5 MB)"; got != want {
		t.Errorf("queue of unknown capacity = %q, want %q", got, want)
	}
}
