package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The package starts no goroutines; the HTTP test must not leave any behind either.
	goleak.VerifyTestMain(m)
}

// newWithClock returns a Pipeline with the default window whose clock stands still until
// advanced, so elapsed time, integrals and rates are exact in tests.
func newWithClock() (p *Pipeline, advance func(time.Duration)) {
	return newWithWindow(0)
}

// newWithWindow is newWithClock with Options.Window set to window.
func newWithWindow(window time.Duration) (p *Pipeline, advance func(time.Duration)) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p = newPipeline(Options{Window: window}, func() time.Time { return now })
	return p, func(d time.Duration) { now = now.Add(d) }
}

func TestConcurrentUpdatesSum(t *testing.T) {
	const (
		goroutines = 8
		iterations = 2000
	)
	backends := []string{"file", "s3", "gs", "azblob"}
	p := New()

	// Readers run alongside the writers: under -race they check that Snapshot reads the figures
	// safely, and every snapshot must see counters and integrals that never go backwards.
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		var prev Snapshot
		for {
			select {
			case <-stop:
				readerErr <- nil
				return
			default:
			}
			s := p.Snapshot()
			if s.ConsumedRows < prev.ConsumedRows || s.FetchSeconds < prev.FetchSeconds || s.ReadBytes < prev.ReadBytes ||
				s.RawQueueItemSeconds < prev.RawQueueItemSeconds || s.Recent.ConsumerWaitSeconds < 0 {
				readerErr <- fmt.Errorf("counter went backwards: %+v after %+v", s, prev)
				return
			}
			prev = s
		}
	}()

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range iterations {
				p.AddConsumed(3, 1)
				p.AddFetch(time.Millisecond)
				p.AddTransform(2 * time.Millisecond)
				p.AddConsumerWait(time.Microsecond)
				// Every goroutine touches every backend, the first time all at once, so
				// backends are created concurrently.
				p.AddRead(backends[(g+i)%len(backends)], 100, 1)
				p.SetRawQueue(g, int64(g))
				p.SetPrefetchQueue(i, int64(i))
				p.SetUnscannedRows(int64(i))
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}

	s := p.Snapshot()
	const n = goroutines * iterations
	if s.ConsumedRows != 3*n || s.ConsumedBatches != n {
		t.Errorf("consumed %d rows in %d batches, want %d in %d", s.ConsumedRows, s.ConsumedBatches, 3*n, n)
	}
	// Durations are summed as integer nanoseconds, so the totals are exact.
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"fetch", s.FetchSeconds, n * 0.001},
		{"transform", s.TransformSeconds, n * 0.002},
		{"consumer wait", s.ConsumerWaitSeconds, n * 0.000001},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s seconds = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.ReadBytes != 100*n || s.ReadRequests != n {
		t.Errorf("read %d bytes in %d requests, want %d in %d", s.ReadBytes, s.ReadRequests, 100*n, n)
	}
	if len(s.Backends) != len(backends) {
		t.Fatalf("backends = %v, want %v", s.Backends, backends)
	}
	for _, b := range backends {
		want := BackendReads{Bytes: 100 * n / 4, Requests: n / 4}
		if s.Backends[b] != want {
			t.Errorf("backend %s = %+v, want %+v", b, s.Backends[b], want)
		}
	}
}

func TestTightLoopsLoseNoUpdate(t *testing.T) {
	// Goroutines doing nothing but updates collide far more often than a real stream; a
	// read-modify-write that is not one atomic step loses counts here.
	const goroutines, iterations = 4, 20000
	p := New()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range iterations {
				p.AddConsumed(1, 1)
				p.AddRead("s3", 1, 1)
			}
		})
	}
	wg.Wait()
	s := p.Snapshot()
	const n = goroutines * iterations
	if s.ConsumedRows != n || s.ConsumedBatches != n || s.Backends["s3"] != (BackendReads{Bytes: n, Requests: n}) {
		t.Errorf("after %d updates: %d rows, %d batches, reads %+v", n, s.ConsumedRows, s.ConsumedBatches, s.Backends["s3"])
	}
}

func TestNewBackendCreatedOnce(t *testing.T) {
	// Goroutines that all miss the new backend queue on the lock; the ones after the first must
	// find it there rather than replace it and lose the first one's count. Each goroutine checks
	// that it misses and says so before the lock is let go, so all four take the slow path on
	// every run, however they are scheduled.
	p := New()
	p.readsMu.Lock()
	var wg sync.WaitGroup
	missed := make(chan bool)
	for range 4 {
		wg.Go(func() {
			_, found := (*p.reads.Load())["gs"]
			missed <- !found
			r := p.addBackend("gs")
			r.bytes.Add(10)
			r.requests.Add(1)
		})
	}
	for range 4 {
		if !<-missed {
			t.Error("a goroutine found the backend before the first was let add it")
		}
	}
	p.readsMu.Unlock()
	wg.Wait()
	if got := p.Snapshot().Backends["gs"]; got != (BackendReads{Bytes: 40, Requests: 4}) {
		t.Errorf("four first reads of a backend counted as %+v, want 40 bytes in 4 requests", got)
	}
}

func TestNegativeAmountsIgnored(t *testing.T) {
	p := New()
	p.AddConsumed(10, 2)
	p.AddConsumed(-5, -1)
	p.AddFetch(time.Second)
	p.AddFetch(-time.Second)
	p.AddTransform(-time.Second)
	p.AddConsumerWait(-time.Second)
	p.AddRead("s3", 100, 1)
	p.AddRead("s3", -100, -1)

	s := p.Snapshot()
	if s.ConsumedRows != 10 || s.ConsumedBatches != 2 || s.FetchSeconds != 1 || s.TransformSeconds != 0 ||
		s.ConsumerWaitSeconds != 0 || s.ReadBytes != 100 || s.ReadRequests != 1 {
		t.Errorf("a negative amount moved a counter: %+v", s)
	}
}

func TestSnapshotFigures(t *testing.T) {
	p, advance := newWithClock()
	if s := p.Snapshot(); s.ElapsedSeconds != 0 || s.RowsPerSecond != 0 || s.DataStallFraction != 0 {
		t.Errorf("at start: elapsed %v, %v rows/s, stall %v; want all 0", s.ElapsedSeconds, s.RowsPerSecond, s.DataStallFraction)
	}

	p.SetCapacity(8, 4)
	p.SetRawQueue(5, 5_000_000)
	p.SetPrefetchQueue(1, 250_000)
	p.SetUnscannedRows(70_000)
	p.AddConsumed(5000, 10)
	p.AddFetch(12 * time.Second)
	p.AddTransform(3 * time.Second)
	p.AddRead("s3", 40_000_000, 5)
	p.AddRead("file", 1_000_000, 2)
	p.AddRead("", 7, 1)
	advance(10 * time.Second)
	p.AddConsumerWait(2500 * time.Millisecond) // ends now, so it lies within the window

	got := p.Snapshot()
	want := Snapshot{
		Time:                  p.start.Add(10 * time.Second),
		ElapsedSeconds:        10,
		UnscannedRows:         70_000,
		RawQueueItems:         5,
		RawQueueBytes:         5_000_000,
		RawQueueCapacity:      8,
		PrefetchQueueItems:    1,
		PrefetchQueueBytes:    250_000,
		PrefetchQueueCapacity: 4,
		ConsumedRows:          5000,
		ConsumedBatches:       10,
		FetchSeconds:          12,
		TransformSeconds:      3,
		ConsumerWaitSeconds:   2.5,
		ReadBytes:             41_000_007,
		ReadRequests:          8,
		Backends: map[string]BackendReads{
			"s3":      {Bytes: 40_000_000, Requests: 5},
			"file":    {Bytes: 1_000_000, Requests: 2},
			"unknown": {Bytes: 7, Requests: 1},
		},
		RawQueueItemSeconds:      50,
		PrefetchQueueItemSeconds: 10,
		Recent: Recent{
			Seconds:             10,
			SteadySeconds:       10,
			RawQueueItems:       5,
			PrefetchQueueItems:  1,
			ConsumerWaitSeconds: 2.5,
			ConsumedBatches:     10,
			FetchSeconds:        12,
			TransformSeconds:    3,
		},
		RowsPerSecond:     500,
		DataStallFraction: 0.25,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot\n got %#v\nwant %#v", got, want)
	}

	// Waits of several consumers can overlap; the fraction still means "share of the time".
	p.AddConsumerWait(20 * time.Second)
	if s := p.Snapshot(); s.DataStallFraction != 1 {
		t.Errorf("stall fraction with waits longer than elapsed = %v, want 1", s.DataStallFraction)
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	p := New()
	p.AddRead("s3", 1, 1)
	s := p.Snapshot()
	s.Backends["s3"] = BackendReads{Bytes: 99}
	p.AddRead("s3", 1, 1)
	if got := p.Snapshot().Backends["s3"]; got != (BackendReads{Bytes: 2, Requests: 2}) {
		t.Errorf("after editing a snapshot's map, pipeline reads = %+v, want 2 bytes in 2 requests", got)
	}
}

func TestSnapshotJSON(t *testing.T) {
	p, advance := newWithClock()
	p.AddConsumed(100, 1)
	p.AddRead("gs", 2048, 3)
	p.SetPrefetchQueue(2, 10)
	p.SetFetchAhead(1<<20, 3<<20, 4<<20)
	p.AddFetchLatency(100 * time.Microsecond)
	advance(4 * time.Second)
	p.AddConsumerWait(time.Second)

	data, err := json.Marshal(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"elapsed_seconds":         4.0,
		"consumed_rows":           100.0,
		"consumed_batches":        1.0,
		"skipped_rows":            0.0,
		"consumer_wait_seconds":   1.0,
		"start_wait_seconds":      0.0,
		"data_stall_fraction":     0.25,
		"rows_per_second":         25.0,
		"read_bytes":              2048.0,
		"read_requests":           3.0,
		"raw_queue_capacity":      0.0,
		"prefetch_queue_items":    2.0,
		"unscanned_rows":          0.0,
		"refetch_bytes":           0.0,
		"fetch_seconds":           0.0,
		"transform_seconds":       0.0,
		"raw_queue_items":         0.0,
		"raw_queue_bytes":         0.0,
		"prefetch_queue_bytes":    10.0,
		"prefetch_queue_capacity": 0.0,

		"raw_queue_item_seconds":      0.0,
		"prefetch_queue_item_seconds": 8.0,

		"fetch_ahead_bytes":         1048576.0,
		"fetch_ahead_target_bytes":  3145728.0,
		"fetch_ahead_budget_bytes":  4194304.0,
		"fetch_budget_use":          0.25,
		"fetch_latency_p50_seconds": 0.0001,
		"fetch_latency_p90_seconds": 0.0001,
		"fetch_latency_p99_seconds": 0.0001,
		"cache_hit_bytes":           0.0,
		"cache_evictions":           0.0,
		"cache_evicted_bytes":       0.0,
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s = %v, want %v (json %s)", k, fields[k], v, data)
		}
	}
	if _, ok := fields["time"].(string); !ok {
		t.Errorf("time = %v, want a string", fields["time"])
	}
	if b, _ := json.Marshal(fields["backends"]); string(b) != `{"gs":{"bytes":2048,"requests":3}}` {
		t.Errorf("backends = %s", b)
	}
	wantRecent := `{"consumed_batches":1,"consumer_wait_seconds":1,"fetch_seconds":0,"prefetch_queue_items":2,"raw_queue_items":0,"seconds":4,"start_wait_seconds":0,"steady_seconds":4,"transform_seconds":0}`
	if b, _ := json.Marshal(fields["recent"]); string(b) != wantRecent {
		t.Errorf("recent = %s, want %s", b, wantRecent)
	}
	if len(fields) != len(want)+3 {
		t.Errorf("json has %d fields, want %d: %s", len(fields), len(want)+3, data)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	p := New()
	p.AddRead("s3", 1, 1) // the first read of a backend creates it; later ones must not allocate
	allocs := testing.AllocsPerRun(1000, func() {
		p.SetRawQueue(1, 2)
		p.SetPrefetchQueue(3, 4)
		p.SetUnscannedRows(5)
		p.AddConsumed(6, 1)
		p.AddFetch(time.Microsecond)
		p.AddTransform(time.Microsecond)
		p.AddConsumerWait(time.Microsecond)
		p.AddStartWait(time.Microsecond)
		p.SetSteady(true)
		p.AddRead("s3", 1024, 1)
	})
	if allocs != 0 {
		t.Errorf("hot-path updates allocate %v times per call, want 0", allocs)
	}
}

// The updates are called per batch or per storage request from several goroutines; these show
// what that costs alone and under contention.
func BenchmarkUpdate(b *testing.B) {
	p := New()
	p.AddRead("s3", 1, 1)
	cases := []struct {
		name string
		f    func()
	}{
		{"AddConsumed", func() { p.AddConsumed(1024, 1) }},
		{"AddFetch", func() { p.AddFetch(time.Millisecond) }},
		{"SetRawQueue", func() { p.SetRawQueue(4, 1<<20) }},
		{"AddRead", func() { p.AddRead("s3", 1<<20, 1) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.f()
				}
			})
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	p := New()
	for _, name := range []string{"file", "s3", "gs"} {
		p.AddRead(name, 1, 1)
	}
	for b.Loop() {
		_ = p.Snapshot()
	}
}

// TestEpochReads: each epoch gets the bytes from buckets (not local files) and from the cache
// read while the stream was at it, the first its planning's too; a resume in the same epoch
// starts none, and Since subtracts the cache's counters.
func TestEpochReads(t *testing.T) {
	p := New()
	p.AddRead("s3", 100, 1) // planning
	p.AddRead("file", 7, 1)
	p.SetEpoch(3)
	p.AddRead("s3", 1000, 2)
	p.AddCacheHit(10)
	p.SetEpoch(3)
	p.AddRead("gs", 5, 1)
	before := p.Snapshot()
	p.SetEpoch(4)
	p.AddCacheHit(1105)
	p.AddCacheEvictions(2, 300)
	p.AddCacheHit(-4)
	s := p.Snapshot()
	want := []EpochReads{{Epoch: 3, BucketBytes: 1105, CacheHitBytes: 10}, {Epoch: 4, BucketBytes: 0, CacheHitBytes: 1105}}
	if !reflect.DeepEqual(s.Epochs, want) {
		t.Fatalf("epochs %+v, want %+v", s.Epochs, want)
	}
	if s.CacheHitBytes != 1115 || s.CacheEvictions != 2 || s.CacheEvictedBytes != 300 {
		t.Fatalf("cache figures %d %d %d", s.CacheHitBytes, s.CacheEvictions, s.CacheEvictedBytes)
	}
	if d := s.Since(before); d.CacheHitBytes != 1105 || d.CacheEvictions != 2 || !reflect.DeepEqual(d.Epochs, want) {
		t.Fatalf("since: %d hit bytes, %d evictions, epochs %+v", d.CacheHitBytes, d.CacheEvictions, d.Epochs)
	}
}
