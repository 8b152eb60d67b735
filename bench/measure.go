package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/internal/cputime"
	smetrics "github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// measurement is one timed pass over a dataset.
type measurement struct {
	rows, batches int64
	seconds       float64 // open (footers) to the last batch, inclusive
	firstBatch    float64 // open to the first batch: planning and the pipeline's first fill
	cpuSeconds    float64 // user and system CPU of the process meanwhile
	readBytes     int64   // every byte read from storage, footers included
	readRequests  int64
	planBytes     int64 // the part of readBytes read while planning (footers)
	planRequests  int64 // the part of readRequests made while planning
	rowGroups     int64 // units (row groups) of the selected files, per epoch
	storedBytes   int64 // stored size of the selected column chunks
	rereadBytes   int64 // data bytes read more than once (see readLog)
	idSum         int64 // sum of the id column, when asked for
	checksum      uint64
	snap          smetrics.Snapshot // the stream's own figures
	mixing        *mixMeter         // of a shuffled pass over data with an id column
	queues        *queueTrace       // queue depths over the pass, when asked for
}

func (m measurement) rowsPerSec() float64 {
	if m.seconds <= 0 {
		return 0
	}
	return float64(m.rows) / m.seconds
}

// rowsPerSecPast is the rows/s with unhidden seconds taken out of the run's
// time: the latencies no read-ahead can hide, as those of the footers and
// of the first bytes.
func (m measurement) rowsPerSecPast(unhidden float64) float64 {
	if m.seconds <= unhidden {
		return m.rowsPerSec()
	}
	return float64(m.rows) / (m.seconds - unhidden)
}

// ioAmplification is bytes read over the stored bytes of what was selected.
func (m measurement) ioAmplification() float64 {
	if m.storedBytes <= 0 {
		return 0
	}
	return float64(m.readBytes) / float64(m.storedBytes)
}

// add sums two passes, as two ranks or two files.
func (m measurement) add(o measurement) measurement {
	m.rows += o.rows
	m.batches += o.batches
	m.seconds += o.seconds
	m.cpuSeconds += o.cpuSeconds
	m.readBytes += o.readBytes
	m.readRequests += o.readRequests
	m.planBytes += o.planBytes
	m.planRequests += o.planRequests
	m.rowGroups = max(m.rowGroups, o.rowGroups)       // the ranks plan the same files
	m.rereadBytes = max(m.rereadBytes, o.rereadBytes) // a shared readLog's running total
	m.idSum += o.idSum
	m.checksum ^= o.checksum
	m.mixing = m.mixing.merge(o.mixing)
	return m
}

// bestOf runs measure reps times and keeps the fastest run; rates lists
// the rows/s of every run, in order. A collection runs before each, so
// that no run pays for the garbage of the one before.
func bestOf(reps int, measure func() (measurement, error)) (measurement, []float64, error) {
	var best measurement
	var rates []float64
	for i := range max(reps, 1) {
		runtime.GC()
		m, err := measure()
		if err != nil {
			return m, rates, err
		}
		rates = append(rates, m.rowsPerSec())
		if i == 0 || m.rowsPerSec() > best.rowsPerSec() {
			best = m
		}
	}
	return best, rates, nil
}

// processCPU is the CPU time the process has used (0 where the system
// does not say: lines then carry no CPU figures).
func processCPU() time.Duration {
	d, _ := cputime.Process()
	return d
}

// streamRun is one pass of a sluice stream.
type streamRun struct {
	urls    []string
	opts    stream.Options // URLs are set from urls
	latency time.Duration  // added to every range read, if positive
	wrap    bool           // route reads through the latency wrapper even at 0 ms
	sumIDs  bool           // sum the id column, to check exactly-once delivery
	mixing  bool           // measure the mixing of an unshuffled pass too (a shuffled one always is)
	epochs  int            // epochs to stream through Batches (default 1)
	// reads, if not nil, collects the data reads (not the footer reads of
	// planning), so that the reads of several passes, as of two ranks, can
	// be checked for overlap.
	reads *readLog
	// transform, if not nil, runs through stream.Map (on the transform
	// goroutines) instead of Batches, and its results are XORed together.
	transform func(arrow.RecordBatch) uint64
	// queueEvery, if positive, samples the stream's queue depths that often
	// during the pass (measurement.queues).
	queueEvery time.Duration
	// opened, if not nil, is called with the dataset once it is open,
	// before the first batch: for what the plan says (ds.Overlap). Its time
	// is not the run's: nothing is fetched before the first Batches call.
	opened func(*stream.Dataset)
	// onRead, if not nil, is told every range read of the data files,
	// planning's included (by object key, offset and length).
	onRead func(key string, off int64, n int)
}

// measureStream opens the dataset, streams r.epochs epochs (Map: one) and
// closes it.
func measureStream(ctx context.Context, r streamRun) (measurement, error) {
	var m measurement
	var bytes, requests atomic.Int64
	var planned atomic.Bool
	// One log per epoch: a later epoch reads everything again, rightly.
	var log atomic.Pointer[readLog]
	var logs []*readLog
	nextLog := func() {
		l := r.reads
		if l == nil || len(logs) > 0 {
			l = newReadLog()
		}
		logs = append(logs, l)
		log.Store(l)
	}
	nextLog()
	o := r.opts
	o.URLs = r.urls
	o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		if r.latency > 0 || r.wrap {
			b = withLatency(b, r.latency)
		}
		c := storage.NewCounting(b)
		c.OnRead = func(key string, off int64, n int) {
			bytes.Add(int64(n))
			requests.Add(1)
			if planned.Load() {
				log.Load().add(key, off, n)
			}
			if r.onRead != nil {
				r.onRead(key, off, n)
			}
		}
		return c
	}
	start, cpu := time.Now(), processCPU()
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return m, err
	}
	defer ds.Close()
	planned.Store(true)
	m.planBytes, m.planRequests = bytes.Load(), requests.Load()
	if r.opened != nil {
		// What the hook asks of the plan (an Estimate prices the epoch
		// batch by batch, about 0.1 s of 8M rows) is not streaming: its
		// time and CPU are left out of the run's.
		at, atCPU := time.Now(), processCPU()
		r.opened(ds)
		start, cpu = start.Add(time.Since(at)), cpu+processCPU()-atCPU
	}
	if r.queueEvery > 0 {
		q := sampleQueues(ds.Metrics(), start, r.queueEvery)
		defer q.stop() // on an error; a finished pass stops it below
		m.queues = q
	}
	for _, f := range ds.Files() {
		for _, u := range f.Units {
			m.storedBytes += u.Bytes
			m.rowGroups++
		}
	}
	m.storedBytes *= int64(max(r.epochs, 1)) // each epoch reads it all again
	idCol := -1
	if idx := ds.Schema().FieldIndices("id"); len(idx) > 0 {
		idCol = idx[0]
	}
	if (o.Shuffle || r.mixing) && idCol >= 0 {
		// Every shuffled pass reports its mixing (see mixMeter).
		m.mixing = &mixMeter{}
		for _, f := range ds.Files() {
			m.mixing.rows += f.Rows
		}
	}
	if r.transform != nil {
		type out struct {
			rows int64
			sum  uint64
		}
		fn := func(_ context.Context, b arrow.RecordBatch) (out, error) {
			return out{b.NumRows(), r.transform(b)}, nil
		}
		for v, err := range stream.Map(ctx, ds, fn) {
			if err != nil {
				return m, err
			}
			m.rows += v.rows
			m.batches++
			m.checksum ^= v.sum
		}
	} else {
		for epoch := range max(r.epochs, 1) {
			if epoch > 0 {
				nextLog()
			}
			for b, err := range ds.Batches(ctx) {
				if err != nil {
					return m, err
				}
				if m.batches == 0 {
					m.firstBatch = time.Since(start).Seconds()
				}
				m.rows += b.NumRows()
				m.batches++
				if m.mixing != nil {
					m.mixing.add(b.Column(idCol))
				}
				if r.sumIDs && idCol >= 0 {
					for _, v := range b.Column(idCol).(*array.Int64).Int64Values() {
						m.idSum += v
					}
				}
			}
		}
	}
	m.seconds = time.Since(start).Seconds()
	m.cpuSeconds = (processCPU() - cpu).Seconds()
	if m.queues != nil {
		m.queues.stop()
	}
	m.readBytes = bytes.Load()
	m.readRequests = requests.Load()
	for _, l := range logs {
		m.rereadBytes += l.reread()
	}
	m.snap = ds.Metrics().Snapshot()
	return m, nil
}

// queueTrace is the depth of a stream's two queues over a pass, sampled
// from its metrics: the raw queue (decoded windows not yet cut into
// batches) and the prefetch queue (batches ready, not yet taken).
type queueTrace struct {
	every               time.Duration
	seconds             []float64 // since the pass started (before Open)
	raw, prefetch       []int
	rawCap, prefetchCap int
	done                chan struct{}
	wg                  sync.WaitGroup
	stopOnce            sync.Once
}

// sampleQueues samples p every interval until stop.
func sampleQueues(p *smetrics.Pipeline, start time.Time, every time.Duration) *queueTrace {
	q := &queueTrace{every: every, done: make(chan struct{})}
	sample := func() {
		s := p.Snapshot()
		q.seconds = append(q.seconds, time.Since(start).Seconds())
		q.raw = append(q.raw, s.RawQueueItems)
		q.prefetch = append(q.prefetch, s.PrefetchQueueItems)
		q.rawCap, q.prefetchCap = s.RawQueueCapacity, s.PrefetchQueueCapacity
	}
	sample()
	q.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-q.done:
				sample() // the end of the pass
				return
			case <-t.C:
				sample()
			}
		}
	})
	return q
}

// stop ends the sampling; the trace may be read once it returns.
func (q *queueTrace) stop() {
	q.stopOnce.Do(func() { close(q.done) })
	q.wg.Wait()
}

// readLog records range reads by object, offset and length, and counts the
// bytes of those that repeat an earlier one exactly: data fetched twice.
type readLog struct {
	mu    sync.Mutex
	seen  map[readKey]bool
	again int64
}

type readKey struct {
	key string
	off int64
	n   int
}

func newReadLog() *readLog { return &readLog{seen: map[readKey]bool{}} }

func (l *readLog) add(key string, off int64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := readKey{key, off, n}
	if l.seen[k] {
		l.again += int64(n)
	}
	l.seen[k] = true
}

func (l *readLog) reread() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.again
}

// measureFloor is the baseline: what a user gets from arrow-go alone, one
// goroutine reading file after file through pqarrow, every row group and
// column, batchSize rows at a time. Files are opened as
// file.OpenParquetFile opens them (os.Open, default reader properties),
// through a counting io.ReaderAt so the bytes read are known.
func measureFloor(ctx context.Context, files []string, batchSize int) (measurement, error) {
	var m measurement
	var bytes, requests atomic.Int64
	start, cpu := time.Now(), processCPU()
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return m, err
		}
		pf, err := file.NewParquetReader(&countingFile{File: f, bytes: &bytes, requests: &requests})
		if err != nil {
			f.Close()
			return m, fmt.Errorf("floor: %s: %w", path, err)
		}
		md := pf.MetaData()
		for g := range md.NumRowGroups() {
			rg := md.RowGroup(g)
			for c := range md.Schema.NumColumns() {
				cc, err := rg.ColumnChunk(c)
				if err != nil {
					pf.Close()
					return m, err
				}
				m.storedBytes += cc.TotalCompressedSize()
			}
		}
		err = readAll(ctx, pf, batchSize, nil, &m)
		pf.Close() // closes f
		if err != nil {
			return m, fmt.Errorf("floor: %s: %w", path, err)
		}
	}
	m.seconds = time.Since(start).Seconds()
	m.cpuSeconds = (processCPU() - cpu).Seconds()
	m.readBytes = bytes.Load()
	m.readRequests = requests.Load()
	return m, nil
}

// readAll reads the row groups of pf (nil: all of them), every column.
func readAll(ctx context.Context, pf *file.Reader, batchSize int, rowGroups []int, m *measurement) error {
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchSize)}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	cols := make([]int, pf.MetaData().Schema.NumColumns())
	for i := range cols {
		cols[i] = i
	}
	rr, err := fr.GetRecordReader(ctx, cols, rowGroups)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		m.rows += rr.RecordBatch().NumRows()
		m.batches++
	}
	return rr.Err()
}

// countingFile counts the bytes the Parquet reader takes from a file.
type countingFile struct {
	*os.File
	bytes, requests *atomic.Int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.bytes.Add(int64(n))
	c.requests.Add(1)
	return n, err
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	c.bytes.Add(int64(n))
	c.requests.Add(1)
	return n, err
}

// heapSampler records, every few milliseconds, the peak of the Go heap in
// use (the runtime's HeapInuse: spans holding objects, live or garbage not
// yet swept) and of the live heap as the last collection marked it. It reads
// runtime/metrics, which does not stop the world as ReadMemStats does.
type heapSampler struct {
	stop       chan struct{}
	done       sync.WaitGroup
	heap, live int64
}

var heapMetrics = []string{
	"/memory/classes/heap/objects:bytes", // with unused: HeapInuse
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/live:bytes",
}

func readHeap(s []metrics.Sample) (inuse, live int64) {
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	return v(0) + v(1), v(2)
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	s := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	h.heap, h.live = readHeap(s)
	h.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				inuse, live := readHeap(s)
				h.heap, h.live = max(h.heap, inuse), max(h.live, live)
			}
		}
	})
	return h
}

// finish stops sampling and returns the peaks.
func (h *heapSampler) finish() (heap, live int64) {
	close(h.stop)
	h.done.Wait()
	return h.heap, h.live
}

// peakAllocator counts the Arrow memory outstanding and its peak.
type peakAllocator struct {
	memory.Allocator
	cur, peak atomic.Int64
}

func newPeakAllocator() *peakAllocator {
	return &peakAllocator{Allocator: memory.NewGoAllocator()}
}

func (a *peakAllocator) grow(n int) {
	c := a.cur.Add(int64(n))
	for p := a.peak.Load(); c > p && !a.peak.CompareAndSwap(p, c); p = a.peak.Load() {
	}
}

func (a *peakAllocator) Allocate(size int) []byte {
	b := a.Allocator.Allocate(size)
	a.grow(len(b))
	return b
}

func (a *peakAllocator) Reallocate(size int, b []byte) []byte {
	old := len(b)
	nb := a.Allocator.Reallocate(size, b)
	a.grow(len(nb) - old)
	return nb
}

func (a *peakAllocator) Free(b []byte) {
	a.cur.Add(-int64(len(b)))
	a.Allocator.Free(b)
}
