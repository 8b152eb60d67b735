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
// of the interval, while its gauges are those at the end of it.
type Snapshot struct {
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// ElapsedSeconds is the length of the window the snapshot covers, in seconds.
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	// UnscannedRows is the number of rows of the epoch, for this rank, not yet read from
	// storage (gauge).
	UnscannedRows int64 `json:"unscanned_rows"`

	// RawQueueItems and RawQueueBytes are the chunks read but not yet transformed, and their
	// size in bytes (gauges).
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

	// ConsumedRows and ConsumedBatches count what the consumer took in the window.
	ConsumedRows    int64 `json:"consumed_rows"`
	ConsumedBatches int64 `json:"consumed_batches"`

	// FetchSeconds is time spent fetching and decoding chunks in the window, in seconds summed
	// over the read goroutines: with four of them busy all the time it grows four times faster
	// than ElapsedSeconds.
	FetchSeconds float64 `json:"fetch_seconds"`
	// TransformSeconds is time spent in the transform function in the window, in seconds summed
	// over the transform goroutines.
	TransformSeconds float64 `json:"transform_seconds"`
	// ConsumerWaitSeconds is time the training loop spent blocked waiting for a batch in the
	// window, in seconds.
	ConsumerWaitSeconds float64 `json:"consumer_wait_seconds"`

	// ReadBytes and ReadRequests are the storage I/O of the window over all backends.
	ReadBytes    int64 `json:"read_bytes"`
	ReadRequests int64 `json:"read_requests"`
	// Backends breaks ReadBytes and ReadRequests down by backend name ("file", "s3", ...). It is
	// nil before the first read.
	Backends map[string]BackendReads `json:"backends,omitempty"`

	// RowsPerSecond is ConsumedRows / ElapsedSeconds: the throughput the training loop saw.
	RowsPerSecond float64 `json:"rows_per_second"`
	// DataStallFraction is ConsumerWaitSeconds / ElapsedSeconds, clamped to [0, 1]: the share of
	// the window training spent waiting for data. Near 0, data is never the bottleneck.
	DataStallFraction float64 `json:"data_stall_fraction"`
}

// BackendReads is the storage I/O of one backend.
type BackendReads struct {
	// Bytes is the number of bytes received.
	Bytes int64 `json:"bytes"`
	// Requests is the number of requests made (range reads, opens, listings).
	Requests int64 `json:"requests"`
}

// derive computes the rates from the counters and the window length.
func (s *Snapshot) derive() {
	s.RowsPerSecond, s.DataStallFraction = 0, 0
	if s.ElapsedSeconds <= 0 {
		return
	}
	s.RowsPerSecond = float64(s.ConsumedRows) / s.ElapsedSeconds
	// Only overlapping waits of several consumers of one Pipeline could push this above 1.
	s.DataStallFraction = min(max(s.ConsumerWaitSeconds/s.ElapsedSeconds, 0), 1)
}

// Since returns the figures of the interval from prev to s, where prev is an earlier snapshot of
// the same Pipeline. Counters (rows, batches, seconds, bytes, requests) become the amounts added
// in the interval, ElapsedSeconds the interval's length, and RowsPerSecond and DataStallFraction
// the rates over it. Time, queue depths, capacities and UnscannedRows are those of s.
//
// A health line printed every few seconds from s.Since(prev) shows the present state of the
// stream, where a snapshot since [New] averages away a stall that began a minute ago. Since with
// a zero prev returns s unchanged.
func (s Snapshot) Since(prev Snapshot) Snapshot {
	d := s
	d.ElapsedSeconds -= prev.ElapsedSeconds
	d.ConsumedRows -= prev.ConsumedRows
	d.ConsumedBatches -= prev.ConsumedBatches
	d.FetchSeconds -= prev.FetchSeconds
	d.TransformSeconds -= prev.TransformSeconds
	d.ConsumerWaitSeconds -= prev.ConsumerWaitSeconds
	d.ReadBytes -= prev.ReadBytes
	d.ReadRequests -= prev.ReadRequests
	// A fresh map, so the result never aliases s.Backends.
	d.Backends = maps.Clone(s.Backends)
	for name, b := range d.Backends {
		p := prev.Backends[name]
		d.Backends[name] = BackendReads{Bytes: b.Bytes - p.Bytes, Requests: b.Requests - p.Requests}
	}
	d.derive()
	return d
}

// Diagnoses returned by [Snapshot.Diagnosis].
const (
	// Idle: nothing moved in the window; no rows consumed, no time spent fetching, transforming
	// or waiting. The stream has not started, has finished, or the consumer is not iterating.
	Idle = "idle"
	// IOBound: both queues near empty and the consumer waits. Fetching and decoding cannot keep
	// up; more read goroutines, larger chunks or faster storage help.
	IOBound = "io-bound"
	// TransformBound: the raw queue near full and the prefetch queue near empty. Data is read
	// faster than the transform handles it; more transform goroutines or a cheaper transform help.
	TransformBound = "transform-bound"
	// ConsumerBound: the prefetch queue near full. Batches are ready before the training loop
	// asks for them; training, not data, sets the pace. This is the healthy state.
	ConsumerBound = "consumer-bound"
	// Balanced: none of the above; no stage is clearly starving another.
	Balanced = "balanced"
)

// Thresholds of [Snapshot.Diagnosis]; see its documentation for why these values.
const (
	nearEmptyFraction = 0.25
	nearFullFraction  = 0.75
	ioStallFraction   = 0.05
)

// Diagnosis names the stage that limits the stream, from where its queues stand: a stage that
// cannot keep up leaves the queue after it empty and, through backpressure, the queue before it
// full. It returns one of [Idle], [IOBound], [TransformBound], [ConsumerBound] or [Balanced],
// checked in that order:
//
//   - Idle when no rows were consumed and no fetch, transform or wait time was added in the
//     window.
//   - ConsumerBound when the prefetch queue is near full, whatever the raw queue does: if batches
//     wait for the training loop, the training loop is the slowest stage. (Usually the raw queue
//     is full too, as a full prefetch queue blocks the transforms.)
//   - TransformBound when the raw queue is near full and the prefetch queue near empty.
//   - IOBound when both queues are near empty and DataStallFraction is at least 0.05.
//   - Balanced otherwise, including both queues empty while the consumer waits less than that:
//     batches then arrive just in time.
//
// A queue is near empty when it holds at most a quarter of its capacity, and near full when it
// holds at least three quarters. A queue in steady state flickers by an item or two as producers
// and consumers take turns, so a sample rarely catches it exactly empty or exactly full; the
// quarters allow for that while the middle half, where no stage is clearly starved, stays
// undecided. With small capacities the rule still reads naturally: for a capacity of 1 to 3,
// near empty means 0 items and near full means all of them. A capacity of 0 (unknown) makes a
// queue near empty only when it holds nothing, and never near full.
//
// The 5% stall floor keeps IOBound for waits that cost training real time: below that the
// consumer's waits are the hand-over of batches between goroutines, not a starved pipeline.
//
// Queue depths are gauges sampled at Time, while the stall fraction covers the whole window, so
// the diagnosis of a short interval ([Snapshot.Since]) follows changes faster than that of a
// snapshot since [New].
func (s Snapshot) Diagnosis() string {
	if s.ConsumedRows == 0 && s.ConsumedBatches == 0 &&
		s.FetchSeconds == 0 && s.TransformSeconds == 0 && s.ConsumerWaitSeconds == 0 {
		return Idle
	}
	rawEmpty := nearEmpty(s.RawQueueItems, s.RawQueueCapacity)
	rawFull := nearFull(s.RawQueueItems, s.RawQueueCapacity)
	prefetchEmpty := nearEmpty(s.PrefetchQueueItems, s.PrefetchQueueCapacity)
	prefetchFull := nearFull(s.PrefetchQueueItems, s.PrefetchQueueCapacity)
	switch {
	case prefetchFull:
		return ConsumerBound
	case rawFull && prefetchEmpty:
		return TransformBound
	case rawEmpty && prefetchEmpty && s.DataStallFraction >= ioStallFraction:
		return IOBound
	default:
		return Balanced
	}
}

func nearEmpty(items, capacity int) bool {
	return items <= 0 || (capacity > 0 && float64(items) <= nearEmptyFraction*float64(capacity))
}

func nearFull(items, capacity int) bool {
	return capacity > 0 && float64(items) >= nearFullFraction*float64(capacity)
}

// String returns one line for a log, such as
//
//	io-bound: 5210 rows/s, stall 41.3%, raw 0/8 (0.0 MB), prefetch 0/4 (0.0 MB), fetch 7.9s, transform 0.6s, read 96.0 MB in 12 requests, 1200000 rows unscanned
//
// Queue depths show as items/capacity, or items alone when the capacity is unknown. Sizes are
// in megabytes (10^6 bytes). Fetch and transform seconds are summed over goroutines.
func (s Snapshot) String() string {
	return fmt.Sprintf("%s: %.0f rows/s, stall %.1f%%, raw %s, prefetch %s, fetch %.1fs, transform %.1fs, read %.1f MB in %d requests, %d rows unscanned",
		s.Diagnosis(), s.RowsPerSecond, 100*s.DataStallFraction,
		queue(s.RawQueueItems, s.RawQueueCapacity, s.RawQueueBytes),
		queue(s.PrefetchQueueItems, s.PrefetchQueueCapacity, s.PrefetchQueueBytes),
		s.FetchSeconds, s.TransformSeconds, megabytes(s.ReadBytes), s.ReadRequests, s.UnscannedRows)
}

func queue(items, capacity int, bytes int64) string {
	if capacity > 0 {
		return fmt.Sprintf("%d/%d (%.1f MB)", items, capacity, megabytes(bytes))
	}
	return fmt.Sprintf("%d (%.1f MB)", items, megabytes(bytes))
}

func megabytes(n int64) float64 { return float64(n) / 1e6 }
