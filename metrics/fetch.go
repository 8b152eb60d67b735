package metrics

import (
	"fmt"
	"math"
	"time"
)

// The fetch stage keeps a number of stored bytes ahead of the decoders that follows the storage's
// latency and the rate the stream takes bytes (bandwidth × latency), within a budget
// (stream.Limits.FetchAheadBytes). The figures here say how much it holds, what it would hold
// without the budget, and how long its requests take, so that a stream held back by the budget
// says so ([Snapshot.Advice]).

// Fetch latencies are counted in buckets of a quarter of a power of two from latencyFloor up:
// a quantile read from them is within 19% of the true one, from 100 µs to past a minute.
const (
	latencyFloor   = 100 * time.Microsecond
	latencyPerTwo  = 4
	latencyBuckets = 22 * latencyPerTwo // to 100 µs × 2^22, seven minutes
)

// latencyBucket is the bucket of a duration: the first whose upper bound is at least d.
func latencyBucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	i := int(math.Ceil(latencyPerTwo * math.Log2(float64(d)/float64(latencyFloor))))
	return min(i, latencyBuckets-1)
}

// latencyBound is the upper bound of bucket i.
func latencyBound(i int) time.Duration {
	return time.Duration(float64(latencyFloor) * math.Exp2(float64(i)/latencyPerTwo))
}

// SetFetchAhead sets the fetch stage's bytes ahead of the decoders (requested, or fetched and not
// yet taken by a decoder), the bytes the measured latency and rate call for (0 while unknown),
// and the budget that caps them.
func (p *Pipeline) SetFetchAhead(bytes, target, budget int64) {
	p.aheadBytes.Store(bytes)
	p.aheadTarget.Store(target)
	p.aheadBudget.Store(budget)
}

// AddFetchLatency counts one fetch's duration, from its request until its bytes are in memory
// (a wait for the bucket's request bound included). Negative durations are ignored.
func (p *Pipeline) AddFetchLatency(d time.Duration) {
	if d >= 0 {
		p.latencies[latencyBucket(d)].Add(1)
	}
}

// fetchFigures fills in s's fetch-ahead figures from p.
func (p *Pipeline) fetchFigures(s *Snapshot) {
	s.FetchAheadBytes = p.aheadBytes.Load()
	s.FetchAheadTargetBytes = p.aheadTarget.Load()
	s.FetchAheadBudgetBytes = p.aheadBudget.Load()
	// Left nil while no fetch was counted, so that a Pipeline without a
	// fetch stage snapshots as it always did.
	var counts []int64
	for i := range p.latencies {
		if n := p.latencies[i].Load(); n > 0 {
			if counts == nil {
				counts = make([]int64, latencyBuckets)
			}
			counts[i] = n
		}
	}
	s.fetchLatencies = counts
}

// deriveFetch computes the budget's use and the latency quantiles.
func (s *Snapshot) deriveFetch() {
	s.FetchBudgetUse = 0
	if s.FetchAheadBudgetBytes > 0 {
		s.FetchBudgetUse = float64(s.FetchAheadBytes) / float64(s.FetchAheadBudgetBytes)
	}
	s.FetchLatencyP50Seconds = latencyQuantile(s.fetchLatencies, 0.5)
	s.FetchLatencyP90Seconds = latencyQuantile(s.fetchLatencies, 0.9)
	s.FetchLatencyP99Seconds = latencyQuantile(s.fetchLatencies, 0.99)
}

// latencyQuantile is the q quantile of the counted durations, in seconds: the upper bound of the
// bucket it falls in; 0 when none was counted.
func latencyQuantile(counts []int64, q float64) float64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range counts {
		if seen += c; seen >= rank {
			return latencyBound(i).Seconds()
		}
	}
	return latencyBound(len(counts) - 1).Seconds()
}

// Advice is [Snapshot.Diagnosis], and where the stream is io-bound while the fetch stage's budget
// is below what the measured latency and rate call for, the option that helps:
// "io-bound: raise Limits.FetchAheadBytes". The budget, not the storage, then holds the stream
// back: more bytes in flight would hide more of the latency.
func (s Snapshot) Advice() string {
	d := s.Diagnosis()
	if d == IOBound && s.budgetBound() {
		return IOBound + ": raise Limits.FetchAheadBytes"
	}
	return d
}

// budgetBound reports whether the fetch stage wants more bytes ahead than its budget.
func (s Snapshot) budgetBound() bool {
	return s.FetchAheadBudgetBytes > 0 && s.FetchAheadTargetBytes > s.FetchAheadBudgetBytes
}

// fetchNote is the health line's fetch-ahead figures: nothing for a Pipeline that no fetch stage
// reports to.
func (s Snapshot) fetchNote() string {
	if s.FetchAheadBudgetBytes <= 0 {
		return ""
	}
	return fmt.Sprintf(", ahead %.1f/%.1f MB (wants %.1f MB), fetch p50 %.1f ms p99 %.1f ms",
		megabytes(s.FetchAheadBytes), megabytes(s.FetchAheadBudgetBytes), megabytes(s.FetchAheadTargetBytes),
		1e3*s.FetchLatencyP50Seconds, 1e3*s.FetchLatencyP99Seconds)
}
