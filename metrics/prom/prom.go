// Package prom exports a [metrics.Pipeline] to Prometheus.
//
// It lives apart from package metrics so that a program that streams data, or only uses expvar,
// does not link the Prometheus client: importing metrics, or stream, never pulls it in.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(prom.NewCollector(ds.Metrics(), prometheus.Labels{"stream": "train"}))
package prom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedata/sluice/metrics"
)

// NewCollector returns a Prometheus collector of the Pipeline's figures, to register with the
// user's own registry (nothing is registered here). Each scrape takes one [Snapshot].
//
// constLabels are added to every metric. Several Pipelines in one registry need labels that tell
// them apart, such as {"stream": "train"} and {"stream": "eval"}; without them the second
// registration fails as a duplicate. "backend" is used by the read metrics and cannot be a
// constant label.
//
// The metrics, all prefixed sluice_:
//
//	unscanned_rows                     gauge    rows of the epoch, for this rank, not yet read
//	refetch_bytes                      gauge    bytes of cut row groups (no page index) another rank fetches too
//	raw_queue_items                    gauge    windows decoded but not yet cut into batches
//	raw_queue_bytes                    gauge    their size in bytes
//	raw_queue_capacity_items           gauge    configured bound of the raw queue (0: unknown)
//	prefetch_queue_items               gauge    batches transformed but not yet consumed
//	prefetch_queue_bytes               gauge    their size in bytes
//	prefetch_queue_capacity_items      gauge    configured bound of the prefetch queue (0: unknown)
//	consumed_rows_total                counter  rows taken by the consumer
//	consumed_batches_total             counter  batches taken by the consumer
//	skipped_rows_total                 counter  bad rows left out of finished windows (BadRowsSkip)
//	fetch_seconds_total                counter  seconds in fetch and decode, summed over goroutines
//	transform_seconds_total            counter  seconds cutting and transforming batches, summed over goroutines
//	consumer_wait_seconds_total        counter  seconds the training loop waited for a batch
//	start_wait_seconds_total           counter  the part of it for iterations' first batches (epoch starts)
//	raw_queue_item_seconds_total       counter  raw queue depth integrated over time
//	prefetch_queue_item_seconds_total  counter  prefetch queue depth integrated over time
//	cache_hit_bytes_total              counter  bytes read from the node-local cache instead of the bucket
//	cache_evictions_total              counter  blocks the node-local cache removed to keep its bound
//	cache_evicted_bytes_total          counter  their bytes
//	data_stall_fraction                gauge    share of the Pipeline's window spent waiting
//	fetch_ahead_bytes                  gauge    stored bytes ahead of the decoders (in flight or fetched)
//	fetch_ahead_target_bytes           gauge    what latency x rate call for, before the budget
//	fetch_ahead_budget_bytes           gauge    the budget (Limits.FetchAheadBytes)
//	fetch_latency_p50_seconds          gauge    fetch durations' median so far (also p90, p99)
//	read_bytes_total{backend}          counter  bytes read from storage
//	read_requests_total{backend}       counter  requests made to storage
//
// Counters carry the Pipeline's start as their created timestamp. Rates are left to PromQL:
// rate(sluice_consumer_wait_seconds_total[1m]) - rate(sluice_start_wait_seconds_total[1m]) is
// the data stall fraction over a minute,
// rate(sluice_raw_queue_item_seconds_total[1m]) the mean depth of the raw queue over it (the
// time-integrated figure [metrics.Snapshot.Diagnosis] reads, where a scrape of
// raw_queue_items samples one instant), and rate(sluice_consumed_rows_total[1m]) the rows per
// second. data_stall_fraction is the one the Pipeline computes over its own window
// ([metrics.Options.Window]), for dashboards without PromQL at hand.
func NewCollector(p *metrics.Pipeline, constLabels prometheus.Labels) prometheus.Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_"+name, help, labels, constLabels)
	}
	gauge := func(name, help string, value func(*metrics.Snapshot) float64) figure {
		return figure{desc(name, help), prometheus.GaugeValue, value}
	}
	counter := func(name, help string, value func(*metrics.Snapshot) float64) figure {
		return figure{desc(name, help), prometheus.CounterValue, value}
	}
	return &collector{
		p: p,
		figures: []figure{
			gauge("unscanned_rows", "Rows of the epoch, for this rank, not yet read from storage.",
				func(s *metrics.Snapshot) float64 { return float64(s.UnscannedRows) }),
			gauge("refetch_bytes", "Stored bytes of the epoch this rank fetches although another rank fetches them too (row groups cut by a split boundary, without a page index).",
				func(s *metrics.Snapshot) float64 { return float64(s.RefetchBytes) }),
			gauge("raw_queue_items", "Windows decoded but not yet cut into batches.",
				func(s *metrics.Snapshot) float64 { return float64(s.RawQueueItems) }),
			gauge("raw_queue_bytes", "Size of the windows in the raw queue, in bytes.",
				func(s *metrics.Snapshot) float64 { return float64(s.RawQueueBytes) }),
			gauge("raw_queue_capacity_items", "Configured bound of the raw queue, in items; 0 if unknown.",
				func(s *metrics.Snapshot) float64 { return float64(s.RawQueueCapacity) }),
			gauge("prefetch_queue_items", "Batches transformed but not yet taken by the consumer.",
				func(s *metrics.Snapshot) float64 { return float64(s.PrefetchQueueItems) }),
			gauge("prefetch_queue_bytes", "Size of the batches in the prefetch queue, in bytes.",
				func(s *metrics.Snapshot) float64 { return float64(s.PrefetchQueueBytes) }),
			gauge("prefetch_queue_capacity_items", "Configured bound of the prefetch queue, in items; 0 if unknown.",
				func(s *metrics.Snapshot) float64 { return float64(s.PrefetchQueueCapacity) }),
			counter("consumed_rows_total", "Rows taken by the consumer.",
				func(s *metrics.Snapshot) float64 { return float64(s.ConsumedRows) }),
			counter("consumed_batches_total", "Batches taken by the consumer.",
				func(s *metrics.Snapshot) float64 { return float64(s.ConsumedBatches) }),
			counter("skipped_rows_total", "Rows left out as bad (a text format's BadRowsSkip) in the windows the consumer finished.",
				func(s *metrics.Snapshot) float64 { return float64(s.SkippedRows) }),
			counter("fetch_seconds_total", "Time spent fetching and decoding windows, summed over their goroutines, in seconds.",
				func(s *metrics.Snapshot) float64 { return s.FetchSeconds }),
			counter("transform_seconds_total", "Time spent cutting batches and in the transform function, summed over transform goroutines, in seconds.",
				func(s *metrics.Snapshot) float64 { return s.TransformSeconds }),
			counter("consumer_wait_seconds_total", "Time the training loop spent blocked waiting for a batch, in seconds.",
				func(s *metrics.Snapshot) float64 { return s.ConsumerWaitSeconds }),
			counter("start_wait_seconds_total", "The part of consumer_wait_seconds_total spent waiting for an iteration's first batch (the pipeline filling at an epoch's start), which data_stall_fraction leaves out.",
				func(s *metrics.Snapshot) float64 { return s.StartWaitSeconds }),
			counter("raw_queue_item_seconds_total", "Depth of the raw queue integrated over time, in item-seconds; its rate is the mean depth.",
				func(s *metrics.Snapshot) float64 { return s.RawQueueItemSeconds }),
			counter("prefetch_queue_item_seconds_total", "Depth of the prefetch queue integrated over time, in item-seconds; its rate is the mean depth.",
				func(s *metrics.Snapshot) float64 { return s.PrefetchQueueItemSeconds }),
			counter("cache_hit_bytes_total", "Bytes read from the node-local cache of remote bytes instead of the bucket.",
				func(s *metrics.Snapshot) float64 { return float64(s.CacheHitBytes) }),
			counter("cache_evictions_total", "Blocks the node-local cache removed to keep its bound.",
				func(s *metrics.Snapshot) float64 { return float64(s.CacheEvictions) }),
			counter("cache_evicted_bytes_total", "Bytes of the blocks the node-local cache removed to keep its bound.",
				func(s *metrics.Snapshot) float64 { return float64(s.CacheEvictedBytes) }),
			gauge("data_stall_fraction", "Share of the pipeline's recent window the training loop spent waiting for a batch, but for iterations' first batches.",
				func(s *metrics.Snapshot) float64 { return s.DataStallFraction }),
			gauge("fetch_ahead_bytes", "Stored bytes the fetch stage holds ahead of the decoders: in flight, or fetched and not yet decoded.",
				func(s *metrics.Snapshot) float64 { return float64(s.FetchAheadBytes) }),
			gauge("fetch_ahead_target_bytes", "Bytes ahead the measured fetch latency and rate call for (rate x latency, with headroom), before the budget caps them.",
				func(s *metrics.Snapshot) float64 { return float64(s.FetchAheadTargetBytes) }),
			gauge("fetch_ahead_budget_bytes", "The budget of bytes ahead of the decoders (Limits.FetchAheadBytes).",
				func(s *metrics.Snapshot) float64 { return float64(s.FetchAheadBudgetBytes) }),
			gauge("fetch_latency_p50_seconds", "Median duration of the stream's fetches so far, request to bytes in memory.",
				func(s *metrics.Snapshot) float64 { return s.FetchLatencyP50Seconds }),
			gauge("fetch_latency_p90_seconds", "90th percentile of the durations of the stream's fetches so far.",
				func(s *metrics.Snapshot) float64 { return s.FetchLatencyP90Seconds }),
			gauge("fetch_latency_p99_seconds", "99th percentile of the durations of the stream's fetches so far.",
				func(s *metrics.Snapshot) float64 { return s.FetchLatencyP99Seconds }),
		},
		readBytes:    desc("read_bytes_total", "Bytes read from storage, by backend.", "backend"),
		readRequests: desc("read_requests_total", "Requests made to storage, by backend.", "backend"),
	}
}

// figure is one metric without labels beyond the constant ones.
type figure struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*metrics.Snapshot) float64
}

type collector struct {
	p            *metrics.Pipeline
	figures      []figure
	readBytes    *prometheus.Desc
	readRequests *prometheus.Desc
}

// Describe sends every descriptor, so the registry can check names and labels when the collector
// is registered rather than at the first scrape.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.figures {
		ch <- f.desc
	}
	ch <- c.readBytes
	ch <- c.readRequests
}

// Collect sends the figures of one snapshot.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Snapshot()
	for _, f := range c.figures {
		ch <- c.metric(f.desc, f.kind, f.value(&s))
	}
	for backend, r := range s.Backends {
		ch <- c.metric(c.readBytes, prometheus.CounterValue, float64(r.Bytes), backend)
		ch <- c.metric(c.readRequests, prometheus.CounterValue, float64(r.Requests), backend)
	}
}

// metric builds one sample. Errors (a bad constant label) are sent as invalid metrics, which the
// registry reports, instead of panicking inside the user's scrape.
func (c *collector) metric(desc *prometheus.Desc, kind prometheus.ValueType, value float64, labels ...string) prometheus.Metric {
	var (
		m   prometheus.Metric
		err error
	)
	if kind == prometheus.CounterValue {
		m, err = prometheus.NewConstMetricWithCreatedTimestamp(desc, kind, value, c.p.Start(), labels...)
	} else {
		m, err = prometheus.NewConstMetric(desc, kind, value, labels...)
	}
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
