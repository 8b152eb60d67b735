// Package metrics holds the live figures of one stream's pipeline and exports them.
//
// A stream reads chunks from storage (the read stage, several goroutines), hands them through the
// raw queue to the user's transform (the transform stage, several goroutines), and from there
// through the prefetch queue to the training loop (the consumer):
//
//	storage -> read stage -> raw queue -> transform stage -> prefetch queue -> consumer
//
// The stream reports queue depths, time spent in each stage, rows consumed and bytes read to a
// [Pipeline]. A [Snapshot] of it tells whether training waits on I/O or on transforms
// ([Snapshot.Diagnosis]), prints as one line for a log ([Snapshot.String]), and gives rates over
// an interval ([Snapshot.Since]). [Pipeline.PublishExpvar] and [NewCollector] export the same
// figures to expvar and Prometheus. The package keeps no global state: nothing is registered or
// published until the user asks for it.
package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Pipeline holds the live figures of one stream. All methods are safe for concurrent use, and the
// update methods take no locks once a storage backend has been seen, so the read and transform
// goroutines can call them per batch or per request without slowing each other down.
//
// Create it with [New]; the zero value is not usable.
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

	rawItems      atomic.Int64
	rawBytes      atomic.Int64
	rawCapacity   atomic.Int64
	prefetchItems atomic.Int64
	prefetchBytes atomic.Int64
	prefetchCap   atomic.Int64

	consumedRows    atomic.Int64
	consumedBatches atomic.Int64

	// Times are kept as nanoseconds so they can be added atomically; an int64 holds 292 years.
	fetchNanos        atomic.Int64
	transformNanos    atomic.Int64
	consumerWaitNanos atomic.Int64

	// reads maps a backend name to its counters. The map behind the pointer is never modified:
	// a new backend copies it under readsMu and swaps the pointer. There are only a handful of
	// backends and each is added once, so after the first read of each, AddRead is a pointer
	// load, a map lookup and two atomic adds.
	reads   atomic.Pointer[map[string]*backendReads]
	readsMu sync.Mutex
}

// backendReads are the I/O counters of one storage backend.
type backendReads struct {
	bytes    atomic.Int64
	requests atomic.Int64
}

// New returns a Pipeline with every figure at zero. It records the current time as the start of
// the stream; elapsed time and rates in a [Snapshot] are measured from it.
func New() *Pipeline {
	p := &Pipeline{now: time.Now}
	p.start = p.now()
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

// SetRawQueue sets the depth of the raw queue: chunks read and decoded but not yet transformed, as
// a number of items and their size in bytes. The two values are stored one after the other, so a
// snapshot taken at that moment may pair the new count with the old size.
func (p *Pipeline) SetRawQueue(items int, bytes int64) {
	p.rawItems.Store(int64(items))
	p.rawBytes.Store(bytes)
}

// SetPrefetchQueue sets the depth of the prefetch queue: batches transformed but not yet taken by
// the consumer, as a number of items and their size in bytes. Like [Pipeline.SetRawQueue], the
// two values are stored separately.
func (p *Pipeline) SetPrefetchQueue(items int, bytes int64) {
	p.prefetchItems.Store(int64(items))
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
// time training could not proceed because sluice had nothing ready. Negative durations are
// ignored.
func (p *Pipeline) AddConsumerWait(d time.Duration) {
	if d > 0 {
		p.consumerWaitNanos.Add(int64(d))
	}
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

// Snapshot returns the current figures. Each figure is exact, but they are read one after the
// other while the stream keeps running, so they are not all from the same instant.
func (p *Pipeline) Snapshot() Snapshot {
	now := p.now()
	s := Snapshot{
		Time:           now,
		ElapsedSeconds: now.Sub(p.start).Seconds(),
		UnscannedRows:  p.unscannedRows.Load(),

		RawQueueItems:         int(p.rawItems.Load()),
		RawQueueBytes:         p.rawBytes.Load(),
		RawQueueCapacity:      int(p.rawCapacity.Load()),
		PrefetchQueueItems:    int(p.prefetchItems.Load()),
		PrefetchQueueBytes:    p.prefetchBytes.Load(),
		PrefetchQueueCapacity: int(p.prefetchCap.Load()),

		ConsumedRows:        p.consumedRows.Load(),
		ConsumedBatches:     p.consumedBatches.Load(),
		FetchSeconds:        time.Duration(p.fetchNanos.Load()).Seconds(),
		TransformSeconds:    time.Duration(p.transformNanos.Load()).Seconds(),
		ConsumerWaitSeconds: time.Duration(p.consumerWaitNanos.Load()).Seconds(),
	}
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
	s.derive()
	return s
}
