package metrics

import (
	"fmt"
	"maps"
	"time"
)

// Snapshot is a copy of a [Pipeline]'s figures: plain values, safe to keep, compare and marshal
// to JSON (the field tags are snake_case).
//
// A snapshot from [Pipeline.Snapshot] covers the stream from [New] until Time. One from
// [Snapshot.Since] covers an interval between two snapshots: its counters and rates are those
// of the interval, while its gauges are those at the end of it. Either way, Recent,
// DataStallFraction and [Snapshot.Diagnosis] describe the Pipeline's last window
// ([Options.Window]) before Time.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// ElapsedSeconds is the length of the interval the snapshot covers, in seconds.
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	// UnscannedRows is the number of rows of the epoch, for this rank, not yet read from
	// storage (gauge).
	UnscannedRows int64 `json:"unscanned_rows"`
	// RefetchBytes is this rank's share of the stored bytes the epoch fetches more than once:
	// row groups cut by a split boundary in files without a page index (each side fetches
	// them), and, with ShufflePasses k, every row group's k - 1 fetches past its first
	// (gauge; see Pipeline.SetRefetchBytes).
	RefetchBytes int64 `json:"refetch_bytes"`

	// RawQueueItems and RawQueueBytes are the windows decoded but not yet cut into batches,
	// and their size in bytes (gauges).
	RawQueueItems int   `json:"raw_queue_items"`
	RawQueueBytes int64 `json:"raw_queue_bytes"`
	// RawQueueCapacity is the configured bound of the raw queue in items; 0 if unknown.
	RawQueueCapacity int `json:"raw_queue_capacity"`
	// PrefetchQueueItems and PrefetchQueueBytes are the batches transformed but not yet taken
	// by the consumer, and their size in bytes (gauges).
	PrefetchQueueItems int   `json:"prefetch_queue_items"`
	PrefetchQueueBytes int64 `json:"prefetch_queue_bytes"`
	// PrefetchQueueCapacity is the configured bound of the prefetch queue in items; 0 if
	// unknown.
	PrefetchQueueCapacity int `json:"prefetch_queue_capacity"`

	// RawQueueItemSeconds and PrefetchQueueItemSeconds are the queue depths integrated over
	// the interval, in item-seconds: divided by ElapsedSeconds they are the mean depths. As
	// counters they subtract like the others, so the mean depth over any interval is at hand.
	RawQueueItemSeconds      float64 `json:"raw_queue_item_seconds"`
	PrefetchQueueItemSeconds float64 `json:"prefetch_queue_item_seconds"`

	// ConsumedRows and ConsumedBatches count what the consumer took in the interval.
	ConsumedRows    int64 `json:"consumed_rows"`
	ConsumedBatches int64 `json:"consumed_batches"`
	// SkippedRows counts rows left out as bad (a text format's BadRowsSkip) in the windows the
	// consumer finished in the interval: each such row once per epoch, and a window resumed in
	// its middle when it is finished, never twice.
	SkippedRows int64 `json:"skipped_rows"`

	// FetchSeconds is time spent fetching (I/O) and decoding (CPU) windows in the interval,
	// in seconds summed over the goroutines of both stages: with four of them busy all the
	// time it grows four times faster than ElapsedSeconds.
	FetchSeconds float64 `json:"fetch_seconds"`
	// TransformSeconds is time spent cutting batches and running the user's transform in the
	// interval, in seconds summed over the transform goroutines.
	TransformSeconds float64 `json:"transform_seconds"`
	// ConsumerWaitSeconds is time the training loop spent blocked waiting for a batch in the
	// interval, in seconds.
	ConsumerWaitSeconds float64 `json:"consumer_wait_seconds"`
	// StartWaitSeconds is the part of ConsumerWaitSeconds spent waiting for the first batch of
	// an iteration: the pipeline filling at an epoch's start (see [Pipeline.AddStartWait]).
	StartWaitSeconds float64 `json:"start_wait_seconds"`

	// ReadBytes and ReadRequests are the storage I/O of the interval over all backends.
	ReadBytes    int64 `json:"read_bytes"`
	ReadRequests int64 `json:"read_requests"`
	// Backends breaks ReadBytes and ReadRequests down by backend name ("file", "s3", ...). It is
	// nil before the first read.
	Backends map[string]BackendReads `json:"backends,omitempty"`

	// CacheHitBytes are the bytes read from the node-local cache of remote bytes instead of the
	// bucket (stream.Options.CacheDir); the bytes the cache fetched from the bucket are in
	// ReadBytes. CacheEvictions and CacheEvictedBytes count the blocks the cache removed to keep
	// its bound, by any dataset of this Pipeline, and their bytes.
	CacheHitBytes     int64 `json:"cache_hit_bytes"`
	CacheEvictions    int64 `json:"cache_evictions"`
	CacheEvictedBytes int64 `json:"cache_evicted_bytes"`
	// Epochs is what each epoch read, in the order the stream was at them: the egress a cloud
	// bills per epoch, and what the cache saved of it. It is not an interval's: Since keeps s's.
	Epochs []EpochReads `json:"epochs,omitempty"`

	// Recent is what the stream did in its last window, from which the diagnosis and the stall
	// fraction are read.
	Recent Recent `json:"recent"`

	// FetchAheadBytes is the stored bytes the fetch stage holds ahead of the decoders: requested
	// and in flight, or fetched and not yet taken by a decoder (gauge).
	FetchAheadBytes int64 `json:"fetch_ahead_bytes"`
	// FetchAheadTargetBytes is what the measured latency and rate call for: the rate the
	// decoders take bytes at (their decode rate while they wait for bytes) times a high quantile
	// of the recent fetches' latency, with headroom, before the budget caps it (gauge; 0 until a
	// fetch has returned). Above FetchAheadBudgetBytes, the budget holds the stream back.
	FetchAheadTargetBytes int64 `json:"fetch_ahead_target_bytes"`
	// FetchAheadBudgetBytes is the budget the fetch stage holds its bytes ahead within
	// (stream.Limits.FetchAheadBytes; gauge, 0 if no fetch stage reports to the Pipeline).
	FetchAheadBudgetBytes int64 `json:"fetch_ahead_budget_bytes"`
	// FetchBudgetUse is FetchAheadBytes / FetchAheadBudgetBytes: the budget's use now.
	FetchBudgetUse float64 `json:"fetch_budget_use"`
	// FetchLatencyP50Seconds, FetchLatencyP90Seconds and FetchLatencyP99Seconds are quantiles of
	// the fetches' durations in the interval, from request to bytes in memory, in seconds (to
	// within 19%: they are counted in buckets); 0 when there was none.
	FetchLatencyP50Seconds float64 `json:"fetch_latency_p50_seconds"`
	FetchLatencyP90Seconds float64 `json:"fetch_latency_p90_seconds"`
	FetchLatencyP99Seconds float64 `json:"fetch_latency_p99_seconds"`
	// fetchLatencies are the counts of the latency buckets, for Since.
	fetchLatencies []int64

	// RowsPerSecond is ConsumedRows / ElapsedSeconds: the throughput the training loop saw.
	RowsPerSecond float64 `json:"rows_per_second"`
	// DataStallFraction is (Recent.ConsumerWaitSeconds - Recent.StartWaitSeconds) /
	// Recent.Seconds, clamped to [0, 1]: the share of the last window training spent waiting for
	// data, but for the waits for an iteration's first batch, which come with every epoch
	// whatever the stages' speeds. Near 0, data is not the bottleneck.
	DataStallFraction float64 `json:"data_stall_fraction"`
}

// Recent is the part of a [Snapshot] that covers the [Pipeline]'s last window
// ([Options.Window]). Its figures are integrals over time, not samples: a queue that flickers
// between empty and full as goroutines take turns reads as what it holds on average, whatever
// instant a snapshot happens to catch.
type Recent struct {
	// Seconds is the length of the window: between Options.Window and 1.1 times it, or the time
	// since New while that is shorter.
	Seconds float64 `json:"seconds"`
	// SteadySeconds is the part of the window the queues were steady (see
	// [Pipeline.SetSteady]): not filling at an iteration's start nor draining at its end.
	SteadySeconds float64 `json:"steady_seconds"`
	// RawQueueItems and PrefetchQueueItems are the mean depths of the queues over the window's
	// steady time (over the whole window if none of it was), weighted by time.
	RawQueueItems      float64 `json:"raw_queue_items"`
	PrefetchQueueItems float64 `json:"prefetch_queue_items"`
	// ConsumerWaitSeconds is the part of the window the consumer spent waiting for a batch. A
	// wait counts once it has ended, for the part of it that lies in the window; a wait still
	// under way when the snapshot is taken is not counted yet. StartWaitSeconds is the part of
	// it spent on iterations' first batches.
	ConsumerWaitSeconds float64 `json:"consumer_wait_seconds"`
	StartWaitSeconds    float64 `json:"start_wait_seconds"`
	// ConsumedBatches, FetchSeconds and TransformSeconds are what the stages did in the window,
	// placed in it to within the time between two queue updates: they tell whether anything
	// moved.
	ConsumedBatches  int64   `json:"consumed_batches"`
	FetchSeconds     float64 `json:"fetch_seconds"`
	TransformSeconds float64 `json:"transform_seconds"`
}

// BackendReads is the storage I/O of one backend.
type BackendReads struct {
	// Bytes is the number of bytes received.
	Bytes int64 `json:"bytes"`
	// Requests is the number of requests made (range reads, opens, listings).
	Requests int64 `json:"requests"`
}

// EpochReads is what one epoch read (see [Snapshot.Epochs]): the bytes read while the stream was
// at it, the first epoch's including planning's.
type EpochReads struct {
	Epoch int64 `json:"epoch"`
	// BucketBytes are the bytes read from object stores (every backend but local files).
	BucketBytes int64 `json:"bucket_bytes"`
	// CacheHitBytes are the bytes the node-local cache served instead.
	CacheHitBytes int64 `json:"cache_hit_bytes"`
}

// derive computes the rates from the counters, the interval and the window.
func (s *Snapshot) derive() {
	s.RowsPerSecond, s.DataStallFraction = 0, 0
	if s.ElapsedSeconds > 0 {
		s.RowsPerSecond = float64(s.ConsumedRows) / s.ElapsedSeconds
	}
	if s.Recent.Seconds > 0 {
		// Only overlapping waits of several consumers of one Pipeline could push this above 1.
		stalled := s.Recent.ConsumerWaitSeconds - s.Recent.StartWaitSeconds
		s.DataStallFraction = min(max(stalled/s.Recent.Seconds, 0), 1)
	}
	s.deriveFetch()
}

// Since returns the figures of the interval from prev to s, where prev is an earlier snapshot of
// the same Pipeline. Counters (rows, batches, seconds, bytes, requests, item-seconds) become the
// amounts added in the interval, ElapsedSeconds the interval's length, and RowsPerSecond the rate
// over it. Time, queue depths, capacities, UnscannedRows, Recent and DataStallFraction are those
// of s: the diagnosis always reads the Pipeline's last window, however long the interval.
//
// A health line printed every few seconds from s.Since(prev) shows the throughput of the present,
// where a snapshot since [New] averages away a slowdown that began a minute ago. Since with a
// zero prev returns s unchanged.
func (s Snapshot) Since(prev Snapshot) Snapshot {
	d := s
	d.ElapsedSeconds -= prev.ElapsedSeconds
	d.ConsumedRows -= prev.ConsumedRows
	d.ConsumedBatches -= prev.ConsumedBatches
	d.SkippedRows -= prev.SkippedRows
	d.FetchSeconds -= prev.FetchSeconds
	d.TransformSeconds -= prev.TransformSeconds
	d.ConsumerWaitSeconds -= prev.ConsumerWaitSeconds
	d.StartWaitSeconds -= prev.StartWaitSeconds
	d.RawQueueItemSeconds -= prev.RawQueueItemSeconds
	d.PrefetchQueueItemSeconds -= prev.PrefetchQueueItemSeconds
	d.ReadBytes -= prev.ReadBytes
	d.CacheHitBytes -= prev.CacheHitBytes
	d.CacheEvictions -= prev.CacheEvictions
	d.CacheEvictedBytes -= prev.CacheEvictedBytes
	d.ReadRequests -= prev.ReadRequests
	// A fresh map, so the result never aliases s.Backends.
	d.Backends = maps.Clone(s.Backends)
	for name, b := range d.Backends {
		p := prev.Backends[name]
		d.Backends[name] = BackendReads{Bytes: b.Bytes - p.Bytes, Requests: b.Requests - p.Requests}
	}
	if s.fetchLatencies != nil {
		d.fetchLatencies = make([]int64, len(s.fetchLatencies))
		for i, n := range s.fetchLatencies {
			if i < len(prev.fetchLatencies) {
				n -= prev.fetchLatencies[i]
			}
			d.fetchLatencies[i] = n
		}
	}
	d.derive()
	return d
}

// Diagnoses returned by [Snapshot.Diagnosis].
const (
	// Idle: nothing moved in the window; no batch consumed, no time spent fetching,
	// transforming or waiting. The stream has not started, has finished, or the consumer is not
	// iterating.
	Idle = "idle"
	// IOBound: the consumer waits while the raw queue stays near empty. Fetching and decoding
	// cannot keep up; more fetches in flight, more decode goroutines, larger chunks or faster
	// storage help.
	IOBound = "io-bound"
	// TransformBound: the consumer waits while the raw queue stays near full. Windows are
	// decoded faster than batches are cut and transformed; more transform goroutines or a
	// cheaper transform help.
	TransformBound = "transform-bound"
	// ConsumerBound: the consumer hardly waits and the prefetch queue stays near full. Batches
	// are ready before the training loop asks for them; training, not data, sets the pace. This
	// is the healthy state.
	ConsumerBound = "consumer-bound"
	// Balanced: none of the above; no stage is clearly starving another.
	Balanced = "balanced"
)

// Thresholds of [Snapshot.Diagnosis]; see its documentation for why these values.
const (
	nearEmptyFraction = 0.25
	nearFullFraction  = 0.75
	stallFraction     = 0.05
)

// Diagnosis names the stage that limits the stream over the last window ([Snapshot.Recent]). A
// stage that cannot keep up leaves the queue after it empty and, through backpressure, the queue
// before it full; the consumer's waiting tells whether the data is behind at all. It returns one
// of [Idle], [IOBound], [TransformBound], [ConsumerBound] or [Balanced]:
//
//   - Idle when in the window no batch was consumed and no fetch, transform or wait time was
//     added.
//   - If the consumer waited for at least 5% of the window (DataStallFraction: its waits for an
//     iteration's first batch left out), the data is behind, and the raw queue says where: TransformBound when it was near full on average,
//     IOBound when it was near empty, Balanced in between.
//   - Otherwise ConsumerBound when the prefetch queue was near full on average, and Balanced
//     when it was not: batches then arrive just in time.
//
// A queue is near empty when its mean depth is at most a quarter of its capacity, and near full
// when it is at least three quarters; the middle half, where no stage is clearly starved, stays
// undecided. A capacity of 0 (unknown) counts as 1 for near empty and makes a queue never near
// full.
//
// The consumer's waiting decides before the prefetch queue does because it is what training
// feels: when transforms take every core, batches can sit in the prefetch queue while the
// consumer, starved of CPU, has not yet been scheduled to take them. The queue then reads full
// and the consumer still waits; the stream is transform-bound, not consumer-bound. The 5% floor
// keeps the hand-over of batches between goroutines, which costs the consumer a few
// microseconds per batch, from reading as a starved pipeline.
//
// Depths and waits are integrated over the window rather than sampled, so a diagnosis does not
// flicker with the instant a snapshot catches. Nor is it decided by epoch starts: the waits for an
// iteration's first batch are left out of the stall, and the queue depths are means over steady
// time (Recent.SteadySeconds), leaving out the queues filling at an iteration's start and draining
// at its end, which with epochs of under a second would weigh as much as the time between.
func (s Snapshot) Diagnosis() string {
	r := s.Recent
	if r.ConsumedBatches == 0 && r.FetchSeconds == 0 && r.TransformSeconds == 0 && r.ConsumerWaitSeconds == 0 {
		return Idle
	}
	if s.DataStallFraction >= stallFraction {
		switch {
		case nearFull(r.RawQueueItems, s.RawQueueCapacity):
			return TransformBound
		case nearEmpty(r.RawQueueItems, s.RawQueueCapacity):
			return IOBound
		default:
			return Balanced
		}
	}
	if nearFull(r.PrefetchQueueItems, s.PrefetchQueueCapacity) {
		return ConsumerBound
	}
	return Balanced
}

func nearEmpty(mean float64, capacity int) bool {
	return mean <= nearEmptyFraction*float64(max(capacity, 1))
}

func nearFull(mean float64, capacity int) bool {
	return capacity > 0 && mean >= nearFullFraction*float64(capacity)
}

// String returns one line for a log, such as
//
//	io-bound: 5210 rows/s, stall 41.3%, raw 0.2/8 (0.0 MB), prefetch 0.0/4 (0.0 MB), fetch 7.9s, transform 0.6s, read 96.0 MB in 12 requests, 1200000 rows unscanned
//
// It starts with [Snapshot.Advice] (the diagnosis, or "io-bound: raise Limits.FetchAheadBytes"),
// and where a fetch stage reports its bytes ahead, ends with them, their budget, what the latency
// and rate call for, and the fetch latency's median and 99th percentile, as in ", ahead
// 12.0/268.4 MB (wants 40.2 MB), fetch p50 21.5 ms p99 27.1 ms".
// The diagnosis, the stall and the queue depths are those of the last window (Recent), the
// figures the diagnosis is read from; where the consumer waited for iterations' first batches,
// which the stall leaves out, their share of the window follows it, as in "stall 0.2% (+6.1% at
// starts)"; the rest covers the snapshot's interval. Queue depths show
// as mean items/capacity, or mean items alone when the capacity is unknown, with the megabytes
// (10^6 bytes) the queue holds now. Fetch and transform seconds are summed over goroutines.
func (s Snapshot) String() string {
	return fmt.Sprintf("%s: %.0f rows/s, stall %.1f%%%s, raw %s, prefetch %s, fetch %.1fs, transform %.1fs, read %.1f MB in %d requests, %d rows unscanned",
		s.Advice(), s.RowsPerSecond, 100*s.DataStallFraction, s.startNote(),
		queue(s.Recent.RawQueueItems, s.RawQueueCapacity, s.RawQueueBytes),
		queue(s.Recent.PrefetchQueueItems, s.PrefetchQueueCapacity, s.PrefetchQueueBytes),
		s.FetchSeconds, s.TransformSeconds, megabytes(s.ReadBytes), s.ReadRequests, s.UnscannedRows) + skippedNote(s.SkippedRows) + s.fetchNote()
}

// startNote is the health line's mention of the waits for iterations' first batches, which
// the stall leaves out: nothing when there were none.
func (s Snapshot) startNote() string {
	if s.Recent.Seconds <= 0 || s.Recent.StartWaitSeconds <= 0 {
		return ""
	}
	return fmt.Sprintf(" (+%.1f%% at starts)", 100*s.Recent.StartWaitSeconds/s.Recent.Seconds)
}

// skippedNote is the health line's mention of bad rows skipped: nothing when there were none,
// which is the common case and keeps the line short.
func skippedNote(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", %d bad rows skipped", n)
}

func queue(mean float64, capacity int, bytes int64) string {
	if capacity > 0 {
		return fmt.Sprintf("%.1f/%d (%.1f MB)", mean, capacity, megabytes(bytes))
	}
	return fmt.Sprintf("%.1f (%.1f MB)", mean, megabytes(bytes))
}

func megabytes(n int64) float64 { return float64(n) / 1e6 }
