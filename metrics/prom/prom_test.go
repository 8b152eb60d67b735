package prom

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/metrics"
)

func TestMain(m *testing.M) {
	// The collector starts no goroutines; the HTTP test must not leave any behind either.
	goleak.VerifyTestMain(m)
}

// busyPipeline returns a Pipeline with every figure set, and the text exposition its collector
// must produce with the label stream="train". It runs in a synctest bubble, whose clock moves
// only by the sleeps here, so the integrals over time are exact.
func busyPipeline() (*metrics.Pipeline, string) {
	p := metrics.New()
	p.SetUnscannedRows(70000)
	p.SetCapacity(8, 4)
	p.SetRawQueue(5, 5000000)
	p.SetPrefetchQueue(1, 250000)
	time.Sleep(10 * time.Second)
	p.AddConsumed(5000, 10)
	p.AddSkipped(12)
	p.AddSkipped(-3) // ignored: a counter never goes down
	p.AddFetch(12 * time.Second)
	p.AddTransform(3500 * time.Millisecond)
	p.AddConsumerWait(2500 * time.Millisecond)
	p.AddStartWait(500 * time.Millisecond) // waited, but not a stall
	p.AddRead("s3", 40000000, 5)
	p.AddRead("file", 1000000, 2)
	p.SetFetchAhead(6000000, 9000000, 8000000)
	for range 9 {
		p.AddFetchLatency(25600 * time.Microsecond) // a bucket's bound
	}
	p.AddFetchLatency(409600 * time.Microsecond)
	p.AddCacheHit(2000000)
	p.AddCacheEvictions(3, 12000000)
	return p, `
# HELP sluice_cache_evicted_bytes_total Bytes of the blocks the node-local cache removed to keep its bound.
# TYPE sluice_cache_evicted_bytes_total counter
sluice_cache_evicted_bytes_total{stream="train"} 1.2e+07
# HELP sluice_cache_evictions_total Blocks the node-local cache removed to keep its bound.
# TYPE sluice_cache_evictions_total counter
sluice_cache_evictions_total{stream="train"} 3
# HELP sluice_cache_hit_bytes_total Bytes read from the node-local cache of remote bytes instead of the bucket.
# TYPE sluice_cache_hit_bytes_total counter
sluice_cache_hit_bytes_total{stream="train"} 2e+06
# HELP sluice_consumed_batches_total Batches taken by the consumer.
# TYPE sluice_consumed_batches_total counter
sluice_consumed_batches_total{stream="train"} 10
# HELP sluice_consumed_rows_total Rows taken by the consumer.
# TYPE sluice_consumed_rows_total counter
sluice_consumed_rows_total{stream="train"} 5000
# HELP sluice_consumer_wait_seconds_total Time the training loop spent blocked waiting for a batch, in seconds.
# TYPE sluice_consumer_wait_seconds_total counter
sluice_consumer_wait_seconds_total{stream="train"} 3
# HELP sluice_data_stall_fraction Share of the pipeline's recent window the training loop spent waiting for a batch, but for iterations' first batches.
# TYPE sluice_data_stall_fraction gauge
sluice_data_stall_fraction{stream="train"} 0.25
# HELP sluice_fetch_ahead_budget_bytes The budget of bytes ahead of the decoders (Limits.FetchAheadBytes).
# TYPE sluice_fetch_ahead_budget_bytes gauge
sluice_fetch_ahead_budget_bytes{stream="train"} 8e+06
# HELP sluice_fetch_ahead_bytes Stored bytes the fetch stage holds ahead of the decoders: in flight, or fetched and not yet decoded.
# TYPE sluice_fetch_ahead_bytes gauge
sluice_fetch_ahead_bytes{stream="train"} 6e+06
# HELP sluice_fetch_ahead_target_bytes Bytes ahead the measured fetch latency and rate call for (rate x latency, with headroom), before the budget caps them.
# TYPE sluice_fetch_ahead_target_bytes gauge
sluice_fetch_ahead_target_bytes{stream="train"} 9e+06
# HELP sluice_fetch_latency_p50_seconds Median duration of the stream's fetches so far, request to bytes in memory.
# TYPE sluice_fetch_latency_p50_seconds gauge
sluice_fetch_latency_p50_seconds{stream="train"} 0.0256
# HELP sluice_fetch_latency_p90_seconds 90th percentile of the durations of the stream's fetches so far.
# TYPE sluice_fetch_latency_p90_seconds gauge
sluice_fetch_latency_p90_seconds{stream="train"} 0.0256
# HELP sluice_fetch_latency_p99_seconds 99th percentile of the durations of the stream's fetches so far.
# TYPE sluice_fetch_latency_p99_seconds gauge
sluice_fetch_latency_p99_seconds{stream="train"} 0.4096
# HELP sluice_fetch_seconds_total Time spent fetching and decoding windows, summed over their goroutines, in seconds.
# TYPE sluice_fetch_seconds_total counter
sluice_fetch_seconds_total{stream="train"} 12
# HELP sluice_prefetch_queue_bytes Size of the batches in the prefetch queue, in bytes.
# TYPE sluice_prefetch_queue_bytes gauge
sluice_prefetch_queue_bytes{stream="train"} 250000
# HELP sluice_prefetch_queue_capacity_items Configured bound of the prefetch queue, in items; 0 if unknown.
# TYPE sluice_prefetch_queue_capacity_items gauge
sluice_prefetch_queue_capacity_items{stream="train"} 4
# HELP sluice_prefetch_queue_item_seconds_total Depth of the prefetch queue integrated over time, in item-seconds; its rate is the mean depth.
# TYPE sluice_prefetch_queue_item_seconds_total counter
sluice_prefetch_queue_item_seconds_total{stream="train"} 10
# HELP sluice_prefetch_queue_items Batches transformed but not yet taken by the consumer.
# TYPE sluice_prefetch_queue_items gauge
sluice_prefetch_queue_items{stream="train"} 1
# HELP sluice_raw_queue_bytes Size of the windows in the raw queue, in bytes.
# TYPE sluice_raw_queue_bytes gauge
sluice_raw_queue_bytes{stream="train"} 5e+06
# HELP sluice_raw_queue_capacity_items Configured bound of the raw queue, in items; 0 if unknown.
# TYPE sluice_raw_queue_capacity_items gauge
sluice_raw_queue_capacity_items{stream="train"} 8
# HELP sluice_raw_queue_item_seconds_total Depth of the raw queue integrated over time, in item-seconds; its rate is the mean depth.
# TYPE sluice_raw_queue_item_seconds_total counter
sluice_raw_queue_item_seconds_total{stream="train"} 50
# HELP sluice_raw_queue_items Windows decoded but not yet cut into batches.
# TYPE sluice_raw_queue_items gauge
sluice_raw_queue_items{stream="train"} 5
# HELP sluice_read_bytes_total Bytes read from storage, by backend.
# TYPE sluice_read_bytes_total counter
sluice_read_bytes_total{backend="file",stream="train"} 1e+06
sluice_read_bytes_total{backend="s3",stream="train"} 4e+07
# HELP sluice_read_requests_total Requests made to storage, by backend.
# TYPE sluice_read_requests_total counter
sluice_read_requests_total{backend="file",stream="train"} 2
sluice_read_requests_total{backend="s3",stream="train"} 5
# HELP sluice_refetch_bytes Stored bytes of the epoch this rank fetches although another rank fetches them too (row groups cut by a split boundary, without a page index).
# TYPE sluice_refetch_bytes gauge
sluice_refetch_bytes{stream="train"} 0
# HELP sluice_skipped_rows_total Rows left out as bad (a text format's BadRowsSkip) in the windows the consumer finished.
# TYPE sluice_skipped_rows_total counter
sluice_skipped_rows_total{stream="train"} 12
# HELP sluice_start_wait_seconds_total The part of consumer_wait_seconds_total spent waiting for an iteration's first batch (the pipeline filling at an epoch's start), which data_stall_fraction leaves out.
# TYPE sluice_start_wait_seconds_total counter
sluice_start_wait_seconds_total{stream="train"} 0.5
# HELP sluice_transform_seconds_total Time spent cutting batches and in the transform function, summed over transform goroutines, in seconds.
# TYPE sluice_transform_seconds_total counter
sluice_transform_seconds_total{stream="train"} 3.5
# HELP sluice_unscanned_rows Rows of the epoch, for this rank, not yet read from storage.
# TYPE sluice_unscanned_rows gauge
sluice_unscanned_rows{stream="train"} 70000
`
}

func TestCollectorGather(t *testing.T) { synctest.Test(t, testCollectorGather) }

func testCollectorGather(t *testing.T) {
	p, want := busyPipeline()
	// The pedantic registry also checks that what is collected matches what was described.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(p, prometheus.Labels{"stream": "train"})); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Every metric name follows the Prometheus conventions the linter knows.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}

	// Values are read at each scrape, not at registration.
	p.AddConsumed(1000, 2)
	p.AddRead("s3", 1, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_consumed_rows_total Rows taken by the consumer.
# TYPE sluice_consumed_rows_total counter
sluice_consumed_rows_total{stream="train"} 6000
# HELP sluice_read_requests_total Requests made to storage, by backend.
# TYPE sluice_read_requests_total counter
sluice_read_requests_total{backend="file",stream="train"} 2
sluice_read_requests_total{backend="s3",stream="train"} 6
`), "sluice_consumed_rows_total", "sluice_read_requests_total"); err != nil {
		t.Error(err)
	}

	// Counters carry the stream's start, so a restart shows as a new series start.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			if mf.GetType() != dto.MetricType_COUNTER {
				continue
			}
			if got := m.GetCounter().GetCreatedTimestamp().AsTime(); !got.Equal(p.Start().Round(0).UTC()) {
				t.Errorf("%s created at %v, want %v", mf.GetName(), got, p.Start())
			}
		}
	}
}

func TestCollectorBeforeAnyRead(t *testing.T) {
	// Before the first read there is no backend, so no read series, and the rest are zero.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(metrics.New(), nil))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 27 {
		t.Errorf("gathered %d series (err %v), want the 27 without a backend label", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_read_bytes_total", "sluice_read_requests_total"); err != nil || n != 0 {
		t.Errorf("gathered %d read series before any read (err %v), want 0", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_consumed_rows_total Rows taken by the consumer.
# TYPE sluice_consumed_rows_total counter
sluice_consumed_rows_total 0
`), "sluice_consumed_rows_total"); err != nil {
		t.Error(err)
	}
}

func TestCollectorRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	train, eval := metrics.New(), metrics.New()
	if err := reg.Register(NewCollector(train, prometheus.Labels{"stream": "train"})); err != nil {
		t.Fatal(err)
	}
	// A second stream with its own label sits beside the first.
	if err := reg.Register(NewCollector(eval, prometheus.Labels{"stream": "eval"})); err != nil {
		t.Errorf("registering a second stream with another label: %v", err)
	}
	// The same labels twice would give duplicate series; the registry must refuse.
	if err := reg.Register(NewCollector(metrics.New(), prometheus.Labels{"stream": "train"})); err == nil {
		t.Error("registering a second collector with the same labels succeeded, want an error")
	}
	// "backend" is a variable label of the read metrics.
	if err := prometheus.NewRegistry().Register(NewCollector(metrics.New(), prometheus.Labels{"backend": "s3"})); err == nil {
		t.Error(`registering with a constant label "backend" succeeded, want an error`)
	}

	train.AddConsumed(7, 1)
	eval.AddConsumed(3, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_consumed_rows_total Rows taken by the consumer.
# TYPE sluice_consumed_rows_total counter
sluice_consumed_rows_total{stream="eval"} 3
sluice_consumed_rows_total{stream="train"} 7
`), "sluice_consumed_rows_total"); err != nil {
		t.Error(err)
	}
}

func TestCollectorOverHTTP(t *testing.T) { synctest.Test(t, testCollectorOverHTTP) }

func testCollectorOverHTTP(t *testing.T) {
	p, want := busyPipeline()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(p, prometheus.Labels{"stream": "train"}))

	// Bound to loopback explicitly: the test must not listen on other interfaces.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s: %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text format", ct)
	}

	for _, line := range []string{
		"# TYPE sluice_consumed_rows_total counter",
		`sluice_consumed_rows_total{stream="train"} 5000`,
		"# TYPE sluice_raw_queue_items gauge",
		`sluice_raw_queue_items{stream="train"} 5`,
		`sluice_read_bytes_total{backend="s3",stream="train"} 4e+07`,
		`sluice_consumer_wait_seconds_total{stream="train"} 3`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("scrape lacks line %q:\n%s", line, body)
		}
	}

	// The whole page parses as the text format and equals what the registry gathers.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	scraped, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("scrape is not in the text format: %v", err)
	}
	expected, err := parser.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if len(scraped) != len(expected) {
		t.Errorf("scraped %d metric families, want %d", len(scraped), len(expected))
	}
	for name, mf := range expected {
		got, ok := scraped[name]
		if !ok {
			t.Errorf("scrape lacks %s", name)
			continue
		}
		if got.GetType() != mf.GetType() || len(got.GetMetric()) != len(mf.GetMetric()) {
			t.Errorf("%s: scraped type %v with %d series, want %v with %d",
				name, got.GetType(), len(got.GetMetric()), mf.GetType(), len(mf.GetMetric()))
		}
	}
}
