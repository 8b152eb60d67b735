package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
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
//	unscanned_rows                  gauge    rows of the epoch, for this rank, not yet read
//	raw_queue_items                 gauge    chunks read but not yet transformed
//	raw_queue_bytes                 gauge    their size in bytes
//	raw_queue_capacity_items        gauge    configured bound of the raw queue (0: unknown)
//	prefetch_queue_items            gauge    batches transformed but not yet consumed
//	prefetch_queue_bytes            gauge    their size in bytes
//	prefetch_queue_capacity_items   gauge    configured bound of the prefetch queue (0: unknown)
//	consumed_rows_total             counter  rows taken by the consumer
//	consumed_batches_total          counter  batches taken by the consumer
//	fetch_seconds_total             counter  seconds in fetch and decode, summed over goroutines
//	transform_seconds_total         counter  seconds in the transform, summed over goroutines
//	consumer_wait_seconds_total     counter  seconds the training loop waited for a batch
//	read_bytes_total{backend}       counter  bytes read from storage
//	read_requests_total{backend}    counter  requests made to storage
//
// Counters carry the Pipeline's start as their created timestamp. Rates are left to PromQL:
// rate(sluice_consumer_wait_seconds_total[1m]) is the data stall fraction, and
// rate(sluice_consumed_rows_total[1m]) the rows per second.
func NewCollector(p *Pipeline, constLabels prometheus.Labels) prometheus.Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_"+name, help, labels, constLabels)
	}
	gauge := func(name, help string, value func(*Snapshot) float64) figure {
		return figure{desc(name, help), prometheus.GaugeValue, value}
	}
	counter := func(name, help string, value func(*Snapshot) float64) figure {
		return figure{desc(name, help), prometheus.CounterValue, value}
	}
	return &collector{
		p: p,
		figures: []figure{
			gauge("unscanned_rows", "Rows of the epoch, for this rank, not yet read from storage.",
				func(s *Snapshot) float64 { return float64(s.UnscannedRows) }),
			gauge("raw_queue_items", "Chunks read from storage but not yet transformed.",
				func(s *Snapshot) float64 { return float64(s.RawQueueItems) }),
			gauge("raw_queue_bytes", "Size of the chunks in the raw queue, in bytes.",
				func(s *Snapshot) float64 { return float64(s.RawQueueBytes) }),
			gauge("raw_queue_capacity_items", "Configured bound of the raw queue, in items; 0 if unknown.",
				func(s *Snapshot) float64 { return float64(s.RawQueueCapacity) }),
			gauge("prefetch_queue_items", "Batches transformed but not yet taken by the consumer.",
				func(s *Snapshot) float64 { return float64(s.PrefetchQueueItems) }),
			gauge("prefetch_queue_bytes", "Size of the batches in the prefetch queue, in bytes.",
				func(s *Snapshot) float64 { return float64(s.PrefetchQueueBytes) }),
			gauge("prefetch_queue_capacity_items", "Configured bound of the prefetch queue, in items; 0 if unknown.",
				func(s *Snapshot) float64 { return float64(s.PrefetchQueueCapacity) }),
			counter("consumed_rows_total", "Rows taken by the consumer.",
				func(s *Snapshot) float64 { return float64(s.ConsumedRows) }),
			counter("consumed_batches_total", "Batches taken by the consumer.",
				func(s *Snapshot) float64 { return float64(s.ConsumedBatches) }),
			counter("fetch_seconds_total", "Time spent fetching and decoding chunks, summed over read goroutines, in seconds.",
				func(s *Snapshot) float64 { return s.FetchSeconds }),
			counter("transform_seconds_total", "Time spent in the transform function, summed over transform goroutines, in seconds.",
				func(s *Snapshot) float64 { return s.TransformSeconds }),
			counter("consumer_wait_seconds_total", "Time the training loop spent blocked waiting for a batch, in seconds.",
				func(s *Snapshot) float64 { return s.ConsumerWaitSeconds }),
		},
		readBytes:    desc("read_bytes_total", "Bytes read from storage, by backend.", "backend"),
		readRequests: desc("read_requests_total", "Requests made to storage, by backend.", "backend"),
	}
}

// figure is one metric without labels beyond the constant ones.
type figure struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*Snapshot) float64
}

type collector struct {
	p            *Pipeline
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
		m, err = prometheus.NewConstMetricWithCreatedTimestamp(desc, kind, value, c.p.start, labels...)
	} else {
		m, err = prometheus.NewConstMetric(desc, kind, value, labels...)
	}
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
