package metrics

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The latency quantiles are read from buckets a quarter of a power of two
// wide: each is the upper bound of its bucket, within 19% above the true
// one, and Since gives those of the interval alone.
func TestFetchLatencyQuantiles(t *testing.T) {
	p, _ := newWithClock()
	if s := p.Snapshot(); s.FetchLatencyP50Seconds != 0 || s.FetchLatencyP99Seconds != 0 {
		t.Fatalf("no fetch: p50 %v p99 %v, want 0", s.FetchLatencyP50Seconds, s.FetchLatencyP99Seconds)
	}
	// 90 fetches of 20 ms and 10 of 100 ms.
	for range 90 {
		p.AddFetchLatency(20 * time.Millisecond)
	}
	for range 10 {
		p.AddFetchLatency(100 * time.Millisecond)
	}
	first := p.Snapshot()
	within := func(name string, got float64, want time.Duration) {
		t.Helper()
		if w := want.Seconds(); got < w || got > w*math.Pow(2, 0.25)+1e-12 {
			t.Errorf("%s = %v s, want within a bucket above %v", name, got, want)
		}
	}
	within("p50", first.FetchLatencyP50Seconds, 20*time.Millisecond)
	within("p90", first.FetchLatencyP90Seconds, 20*time.Millisecond)
	within("p99", first.FetchLatencyP99Seconds, 100*time.Millisecond)

	// Then 100 of 1 s: over the interval every quantile is 1 s; since the
	// start, the median is still 100 ms.
	for range 100 {
		p.AddFetchLatency(time.Second)
	}
	now := p.Snapshot()
	d := now.Since(first)
	within("interval p50", d.FetchLatencyP50Seconds, time.Second)
	within("interval p99", d.FetchLatencyP99Seconds, time.Second)
	within("whole p50", now.FetchLatencyP50Seconds, 100*time.Millisecond)
	within("whole p90", now.FetchLatencyP90Seconds, time.Second)

	// Out of range on either side: the first and the last bucket.
	p2, _ := newWithClock()
	p2.AddFetchLatency(0)
	if got := p2.Snapshot().FetchLatencyP99Seconds; got != latencyFloor.Seconds() {
		t.Errorf("a 0 s fetch: p99 %v, want the floor %v", got, latencyFloor.Seconds())
	}
	p2.AddFetchLatency(time.Hour)
	if got := p2.Snapshot().FetchLatencyP99Seconds; got != latencyBound(latencyBuckets-1).Seconds() {
		t.Errorf("an hour's fetch: p99 %v, want the last bucket's bound %v", got, latencyBound(latencyBuckets-1).Seconds())
	}
}

// The advice names the budget only where the stream is io-bound and the
// latency and rate call for more bytes ahead than it allows.
func TestAdviceRaisesTheBudget(t *testing.T) {
	ioBound := Snapshot{
		RawQueueCapacity: 8, PrefetchQueueCapacity: 4, ConsumedRows: 100, ElapsedSeconds: 10,
		Recent: Recent{Seconds: 10, RawQueueItems: 0.1, ConsumerWaitSeconds: 5, ConsumedBatches: 1},
	}
	cases := []struct {
		name                  string
		base                  Snapshot
		bytes, target, budget int64
		want                  string
		wantInLine, notInLine string
	}{
		{"io-bound, budget short", ioBound, 64 << 20, 200 << 20, 64 << 20, "io-bound: raise Limits.FetchAheadBytes", "ahead 67.1/67.1 MB (wants 209.7 MB)", ""},
		{"io-bound, budget enough", ioBound, 10 << 20, 20 << 20, 64 << 20, IOBound, "ahead 10.5/67.1 MB (wants 21.0 MB)", "raise"},
		{"no fetch stage reported", ioBound, 0, 0, 0, IOBound, "", "ahead"},
		{"consumer-bound, budget short", Snapshot{PrefetchQueueCapacity: 4, Recent: Recent{Seconds: 10, PrefetchQueueItems: 4, ConsumedBatches: 1}},
			64 << 20, 200 << 20, 64 << 20, ConsumerBound, "", "raise"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.base
			s.FetchAheadBytes, s.FetchAheadTargetBytes, s.FetchAheadBudgetBytes = c.bytes, c.target, c.budget
			s.derive()
			if got := s.Advice(); got != c.want {
				t.Errorf("Advice() = %q, want %q", got, c.want)
			}
			line := s.String()
			if !strings.HasPrefix(line, c.want+": ") {
				t.Errorf("String() = %q, want it to start with %q", line, c.want+": ")
			}
			if c.wantInLine != "" && !strings.Contains(line, c.wantInLine) {
				t.Errorf("String() = %q, want %q in it", line, c.wantInLine)
			}
			if c.notInLine != "" && strings.Contains(line, c.notInLine) {
				t.Errorf("String() = %q, want no %q in it", line, c.notInLine)
			}
			if c.budget > 0 && s.FetchBudgetUse != float64(c.bytes)/float64(c.budget) {
				t.Errorf("FetchBudgetUse = %v, want %v", s.FetchBudgetUse, float64(c.bytes)/float64(c.budget))
			}
		})
	}
}
