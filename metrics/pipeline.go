// Package metrics holds the live figures of one stream's pipeline and exports them.
//
// A stream runs three stages, each a pool of goroutines, between storage and the training loop
// (the consumer):
//
//	storage -> fetch -> decode -> raw queue -> transform -> prefetch queue -> consumer
//
// The stages:
//
//   - fetch is I/O: it reads the stored bytes of windows (runs of rows), many requests in flight
//     to hide storage latency.
//   - decode is CPU: it turns fetched bytes into Arrow record batches, one goroutine per core.
//     The windows it has decoded wait in the raw queue.
//   - transform is CPU too: it cuts batches out of decoded windows (a slice, or a gather when
//     shuffled) and runs the user's Map function on each. The batches it has finished wait in
//     the prefetch queue until the consumer takes them.
//
// What each figure measures:
//
//   - the raw queue's depth: decoded windows not yet cut into batches. It stays full when the
//     transform stage is slower than decoding, and empty when fetch and decode are the slower.
//   - the prefetch queue's depth: batches ready and not yet taken. It stays full when the
//     consumer is the slowest, and empty when any stage before it is.
//   - fetch time: wall time of fetch and decode calls, summed over their goroutines.
//   - transform time: wall time of transform calls, summed over their goroutines.
//   - consumer wait: time the training loop spent blocked waiting for the next batch, that is
//     time training lost to data; the part of it spent on the first batch of an iteration (the
//     pipeline filling at an epoch's start) is also counted on its own, as start wait.
//   - rows and batches consumed, rows not yet read (unscanned), bad rows skipped, and bytes and
//     requests read, per storage backend.
//
// The stream reports these to a [Pipeline]. Queue depths are integrated over time, and a
// [Snapshot] holds, besides the counters, their integrals over the Pipeline's last window
// ([Options.Window], 10 s by default). From those it tells whether training waits on I/O or on
// transforms ([Snapshot.Diagnosis]) and how much of the window it waited
// ([Snapshot.DataStallFraction]); it prints as one line for a log ([Snapshot.String]), and gives
// rates over an interval ([Snapshot.Since]). [Pipeline.PublishExpvar] exports the same figures to
// expvar, and the metrics/prom package to Prometheus, so that a program that does not use
// Prometheus does not link its client. The package keeps no global state: nothing is registered
// or published until the user asks for it.
package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWindow is the [Options.Window] of a Pipeline made by [New].
const DefaultWindow = 10 * time.Second

// Options configure a Pipeline. The zero value gives the documented defaults.
type Options struct {
	// Window is how far back [Snapshot.Recent] looks, and so [Snapshot.Diagnosis] and
	// [Snapshot.DataStallFraction]. Queues and waits are integrated over time within it, so a
	// longer window reads steadier and a shorter one follows a change sooner. The window moves
	// in steps of a tenth of it: a snapshot covers between Window and 1.1 × Window, or the time
	// since [New] while that is shorter.
	//
	// The default (any value < 1) is [DefaultWindow], 10 s: long enough to hold many batches of
	// a slow transform and several storage round trips, short enough that a health line printed
	// every few seconds shows a stall within seconds of its start.
	Window time.Duration
}

// Pipeline holds the live figures of one stream. All methods are safe for concurrent use. The
// counters take no locks once a storage backend has been seen; the queue gauges and
// [Pipeline.AddConsumerWait] take a short lock, as they are integrated over time. They are
// called once per batch, far too rarely for that lock to be contended.
//
// Create it with [New] or [NewWithOptions]; the zero value is not usable.
//
// Counters (rows, batches, seconds, bytes, requests) only grow: negative amounts are ignored, so
// a Prometheus scrape never sees a counter go down. Gauges (queue depths, unscanned rows,
// capacities) hold the last value set.
type Pipeline struct {
	start time.Time
	// now is time.Now except in tests, which need elapsed time they control.
	now func() time.Time

	// The figures are not padded to separate cache lines although different goroutines update
	// them: they change once per batch or per storage request, thousands of times a second at
	// most, far too rarely for false sharing to cost anything measurable.

	unscannedRows atomic.Int64
	refetchBytes  atomic.Int64

	rawBytes      atomic.Int64
	rawCapacity   atomic.Int64
	prefetchBytes atomic.Int64
	prefetchCap   atomic.Int64

	consumedRows    atomic.Int64
	consumedBatches atomic.Int64
	skippedRows     atomic.Int64

	// Times are kept as nanoseconds so they can be added atomically; an int64 holds 292 years.
	fetchNanos        atomic.Int64
	transformNanos    atomic.Int64
	consumerWaitNanos atomic.Int64
	startWaitNanos    atomic.Int64

	// reads maps a backend name to its counters. The map behind the pointer is never modified:
	// a new backend copies it under readsMu and swaps the pointer. There are only a handful of
	// backends and each is added once, so after the first read of each, AddRead is a pointer
	// load, a map lookup and two atomic adds.
	reads   atomic.Pointer[map[string]*backendReads]
	readsMu sync.Mutex

	// win holds the queue depths and their integrals over time, under its own lock.
	win window

	// The fetch stage's bytes ahead of the decoders (fetch.go).
	aheadBytes, aheadTarget, aheadBudget atomic.Int64
	latencies                            [latencyBuckets]atomic.Int64
	// The local cache's figures (stream.Options.CacheDir).
	cacheHitBytes, cacheEvictions, cacheEvictedBytes atomic.Int64
	// epochs marks where each epoch began in the bytes from buckets and from the cache, under
	// epochsMu: an epoch starts once, so it is taken a few times a run.
	epochsMu sync.Mutex
	epochs   []epochMark
}

// epochMark is where an epoch began: the counters at that moment.
type epochMark struct {
	epoch             int64
	bucketBytes, hits int64
}

// backendReads are the I/O counters of one storage backend.
type backendReads struct {
	bytes    atomic.Int64
	requests atomic.Int64
}

// New returns a Pipeline with every figure at zero and the default [Options]. It records the
// current time as the start of the stream; elapsed time and rates in a [Snapshot] are measured
// from it.
func New() *Pipeline {
	return NewWithOptions(Options{})
}

// NewWithOptions is [New] with options.
func NewWithOptions(o Options) *Pipeline {
	return newPipeline(o, time.Now)
}

func newPipeline(o Options, now func() time.Time) *Pipeline {
	if o.Window < 1 {
		o.Window = DefaultWindow
	}
	p := &Pipeline{now: now}
	p.start = p.now()
	p.win.init(p.start, o.Window)
	empty := map[string]*backendReads{}
	p.reads.Store(&empty)
	return p
}

// SetUnscannedRows sets the number of rows of the current epoch, for this rank, that have not yet
// been read from storage. Where row counts are not known ahead (CSV, JSON, filters), the stream
// reports its best estimate or leaves it at zero.
func (p *Pipeline) SetUnscannedRows(n int64) {
	p.unscannedRows.Store(n)
}

// SetRefetchBytes sets the stored bytes of the current epoch that this rank fetches although
// another rank fetches them too: units (row groups) a split boundary cuts, in files that cannot be
// read page by page (no page index), are fetched whole by each side; and a stream that reads
// every unit in several passes (stream.Options.ShufflePasses) fetches it once per pass.
func (p *Pipeline) SetRefetchBytes(n int64) {
	p.refetchBytes.Store(n)
}

// SetRawQueue sets the depth of the raw queue: chunks read and decoded but not yet transformed, as
// a number of items and their size in bytes. The two values are stored one after the other, so a
// snapshot taken at that moment may pair the new count with the old size.
func (p *Pipeline) SetRawQueue(items int, bytes int64) {
	p.setDepth(&p.win.raw, items)
	p.rawBytes.Store(bytes)
}

// SetPrefetchQueue sets the depth of the prefetch queue: batches transformed but not yet taken by
// the consumer, as a number of items and their size in bytes. Like [Pipeline.SetRawQueue], the
// two values are stored separately.
func (p *Pipeline) SetPrefetchQueue(items int, bytes int64) {
	p.setDepth(&p.win.prefetch, items)
	p.prefetchBytes.Store(bytes)
}

// SetCapacity sets the configured bounds of the raw and prefetch queues, in items, so that depths
// can be read as fractions of them. [Snapshot.Diagnosis] needs them to tell a full queue from a
// half-full one; a capacity of zero means unknown.
func (p *Pipeline) SetCapacity(rawItems, prefetchItems int) {
	p.rawCapacity.Store(int64(rawItems))
	p.prefetchCap.Store(int64(prefetchItems))
}

// AddConsumed counts rows and batches handed to the consumer. Negative amounts are ignored.
func (p *Pipeline) AddConsumed(rows, batches int64) {
	if rows > 0 {
		p.consumedRows.Add(rows)
	}
	if batches > 0 {
		p.consumedBatches.Add(batches)
	}
}

// AddSkipped counts rows left out as bad (a text format's BadRowsSkip) in windows the consumer
// finished. Negative amounts are ignored.
func (p *Pipeline) AddSkipped(rows int64) {
	if rows > 0 {
		p.skippedRows.Add(rows)
	}
}

// AddFetch adds time spent fetching and decoding chunks. Read goroutines each add their own time,
// so with N of them the total can grow up to N times faster than the wall clock. Negative
// durations are ignored.
func (p *Pipeline) AddFetch(d time.Duration) {
	if d > 0 {
		p.fetchNanos.Add(int64(d))
	}
}

// AddTransform adds time spent in the user's transform function, summed over transform goroutines
// like [Pipeline.AddFetch]. Negative durations are ignored.
func (p *Pipeline) AddTransform(d time.Duration) {
	if d > 0 {
		p.transformNanos.Add(int64(d))
	}
}

// AddConsumerWait adds time the training loop spent blocked waiting for the next batch, that is
// time training could not proceed because sluice had nothing ready. It is called when the wait
// ends: the wait is taken to have lasted from d ago until now, which is how its share of the
// recent window ([Snapshot.Recent]) is found. Negative durations are ignored.
func (p *Pipeline) AddConsumerWait(d time.Duration) {
	if d > 0 {
		p.consumerWaitNanos.Add(int64(d))
		p.addWait(d, false)
	}
}

// AddStartWait adds time the training loop waited for the first batch of an iteration: the
// pipeline filling at the start of an epoch, or of one resumed or ranged over again. It counts in
// ConsumerWaitSeconds like [Pipeline.AddConsumerWait], and in StartWaitSeconds, which the data
// stall fraction and the diagnosis leave out: with epochs of under a second, a first batch's
// 20-30 ms read and decode would otherwise read as a stall and decide the diagnosis, where
// deeper queues would not help. Negative durations are ignored.
func (p *Pipeline) AddStartWait(d time.Duration) {
	if d > 0 {
		p.consumerWaitNanos.Add(int64(d))
		p.startWaitNanos.Add(int64(d))
		p.addWait(d, true)
	}
}

// SetSteady says whether the queues are in their steady state: a stream sets false while an
// iteration fills them (until its first batch), true from then on, and false again once every
// window the iteration reads is decoded (the queues can then only drain) and when it ends. The
// mean depths of [Snapshot.Recent], which the diagnosis reads, are taken over steady time only,
// so that short epochs, each filling and draining its queues, read as what the queues do in
// between. A Pipeline is steady until told otherwise.
func (p *Pipeline) SetSteady(steady bool) {
	p.setSteady(steady)
}

// AddRead counts storage I/O: bytes received and requests made to one backend, such as "file",
// "s3", "gs", "azblob" or "mem". An empty backend name is counted as "unknown". Negative amounts
// are ignored.
func (p *Pipeline) AddRead(backend string, bytes, requests int64) {
	r := p.backend(backend)
	if bytes > 0 {
		r.bytes.Add(bytes)
	}
	if requests > 0 {
		r.requests.Add(requests)
	}
}

// backend returns the counters of the named backend, creating them on first use.
func (p *Pipeline) backend(name string) *backendReads {
	if name == "" {
		name = "unknown"
	}
	if r, ok := (*p.reads.Load())[name]; ok {
		return r
	}
	return p.addBackend(name)
}

// addBackend is backend's slow path, taken after a miss: it adds the named backend's counters
// unless another goroutine added them since the miss.
func (p *Pipeline) addBackend(name string) *backendReads {
	p.readsMu.Lock()
	defer p.readsMu.Unlock()
	// Another goroutine may have added it while this one waited for the lock.
	old := *p.reads.Load()
	if r, ok := old[name]; ok {
		return r
	}
	next := maps.Clone(old)
	r := &backendReads{}
	next[name] = r
	p.reads.Store(&next)
	return r
}

// AddCacheHit counts bytes served from the node-local cache of remote bytes instead of the
// bucket. Negative amounts are ignored.
func (p *Pipeline) AddCacheHit(bytes int64) {
	if bytes > 0 {
		p.cacheHitBytes.Add(bytes)
	}
}

// AddCacheEvictions counts blocks removed from the node-local cache to keep its bound, and their
// bytes. Negative amounts are ignored.
func (p *Pipeline) AddCacheEvictions(blocks, bytes int64) {
	if blocks > 0 {
		p.cacheEvictions.Add(blocks)
	}
	if bytes > 0 {
		p.cacheEvictedBytes.Add(bytes)
	}
}

// SetEpoch says that the stream is at epoch e now: the bytes read from buckets and from the cache
// from here until the next epoch begins are that epoch's ([Snapshot.Epochs]). The first epoch also
// counts what was read before it (planning). Setting the epoch it is at already does nothing.
func (p *Pipeline) SetEpoch(e int64) {
	p.epochsMu.Lock()
	defer p.epochsMu.Unlock()
	if n := len(p.epochs); n > 0 && p.epochs[n-1].epoch == e {
		return
	}
	m := epochMark{epoch: e}
	if len(p.epochs) > 0 {
		m.bucketBytes, m.hits = p.bucketBytes(), p.cacheHitBytes.Load()
	}
	p.epochs = append(p.epochs, m)
}

// bucketBytes is the bytes read from every backend but the local file system: the egress a
// cloud bills.
func (p *Pipeline) bucketBytes() int64 {
	var n int64
	for name, r := range *p.reads.Load() {
		if name != "file" {
			n += r.bytes.Load()
		}
	}
	return n
}

// epochReads is every epoch's reads since the first SetEpoch, the last up to now.
func (p *Pipeline) epochReads() []EpochReads {
	p.epochsMu.Lock()
	defer p.epochsMu.Unlock()
	if len(p.epochs) == 0 {
		return nil
	}
	out := make([]EpochReads, len(p.epochs))
	next := epochMark{bucketBytes: p.bucketBytes(), hits: p.cacheHitBytes.Load()}
	for i := len(p.epochs) - 1; i >= 0; i-- {
		m := p.epochs[i]
		out[i] = EpochReads{Epoch: m.epoch, BucketBytes: next.bucketBytes - m.bucketBytes, CacheHitBytes: next.hits - m.hits}
		next = m
	}
	return out
}

// Start returns the time [New] was called: the start of every counter.
func (p *Pipeline) Start() time.Time { return p.start }

// Snapshot returns the current figures. Each figure is exact, but they are read one after the
// other while the stream keeps running, so they are not all from the same instant; the queue
// depths, their integrals and [Snapshot.Recent] are read together.
func (p *Pipeline) Snapshot() Snapshot {
	w := &p.win
	w.mu.Lock()
	now := p.now()
	p.advance(now)
	s := Snapshot{
		Time:                     now,
		ElapsedSeconds:           now.Sub(p.start).Seconds(),
		RawQueueItems:            w.raw,
		PrefetchQueueItems:       w.prefetch,
		RawQueueItemSeconds:      w.rawArea,
		PrefetchQueueItemSeconds: w.prefetchArea,
		Recent:                   p.recent(now),
	}
	w.mu.Unlock()

	s.UnscannedRows = p.unscannedRows.Load()
	s.RefetchBytes = p.refetchBytes.Load()
	s.RawQueueBytes = p.rawBytes.Load()
	s.RawQueueCapacity = int(p.rawCapacity.Load())
	s.PrefetchQueueBytes = p.prefetchBytes.Load()
	s.PrefetchQueueCapacity = int(p.prefetchCap.Load())
	s.ConsumedRows = p.consumedRows.Load()
	s.ConsumedBatches = p.consumedBatches.Load()
	s.SkippedRows = p.skippedRows.Load()
	s.FetchSeconds = time.Duration(p.fetchNanos.Load()).Seconds()
	s.TransformSeconds = time.Duration(p.transformNanos.Load()).Seconds()
	s.ConsumerWaitSeconds = time.Duration(p.consumerWaitNanos.Load()).Seconds()
	s.StartWaitSeconds = time.Duration(p.startWaitNanos.Load()).Seconds()
	reads := *p.reads.Load()
	if len(reads) > 0 {
		s.Backends = make(map[string]BackendReads, len(reads))
		for name, r := range reads {
			b := BackendReads{Bytes: r.bytes.Load(), Requests: r.requests.Load()}
			s.Backends[name] = b
			s.ReadBytes += b.Bytes
			s.ReadRequests += b.Requests
		}
	}
	p.fetchFigures(&s)
	s.CacheHitBytes = p.cacheHitBytes.Load()
	s.CacheEvictions = p.cacheEvictions.Load()
	s.CacheEvictedBytes = p.cacheEvictedBytes.Load()
	s.Epochs = p.epochReads()
	s.derive()
	return s
}
