//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/unzeroed"
	"github.com/sluicedata/sluice/stream"
)

// A handle names an opened dataset or mix across the C ABI: C code may not
// hold Go pointers, so it holds numbers, and a closed or unknown number is
// an error rather than a dangling pointer.
var (
	handlesMu sync.Mutex
	handles   = map[int64]*handle{}
	lastID    int64
)

// handle is one dataset or mix and its pull iteration.
type handle struct {
	id  int64
	ds  *stream.Dataset // one of ds and mix is set
	mix *stream.Mixed
	// shuffle is the dataset's Shuffle option, which its estimate's peak
	// memory depends on.
	shuffle bool
	// mixes counts the open mixes over ds; srcs are a mix's datasets.
	mixes int
	srcs  []*handle
	// closers are what ds reads through (a table, a plan store's bucket),
	// closed after it.
	closers []io.Closer
	// mem is what ds's batches are made of (see recycled).
	mem *unzeroed.Recycler

	mu sync.Mutex // guards it, pos and closed
	it *pull
	// pos is the position after each batch of the last call, or the
	// position an iteration started from before any; nil where no
	// iteration runs or has batches queued (the dataset's own is it).
	pos []any
	// rows is the rows of each batch of the last call (parallel to pos
	// where it holds a call's).
	rows   []int64
	closed bool
}

func register(h *handle) int64 {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	lastID++
	h.id = lastID
	handles[h.id] = h
	return h.id
}

func lookup(id int64) (*handle, error) {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	h, ok := handles[id]
	if !ok {
		return nil, fmt.Errorf("%w (handle %d)", errClosed, id)
	}
	return h, nil
}

func (h *handle) batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	if h.mix != nil {
		return h.mix.Batches(ctx)
	}
	return h.ds.Batches(ctx)
}

func (h *handle) schema() *arrow.Schema {
	if h.mix != nil {
		return h.mix.Schema()
	}
	return h.ds.Schema()
}

// errNotReady is next's answer when no batch came within the timeout: the
// caller gets control back (to see a Ctrl-C) and asks again.
var errNotReady = errors.New("not ready")

// next returns the next batch (the caller releases it), nil at the end of
// the epoch, or errNotReady after timeout: nextGroup of one batch.
func (h *handle) next(timeout time.Duration) (arrow.RecordBatch, error) {
	g, err := h.nextGroup(1, timeout)
	if g == nil {
		return nil, err
	}
	return g.runs[0], nil
}

// batchGroup is the batches of one call: runs of them that follow one
// another in memory, each as one record batch (segments), and for each
// batch in order its run, first row in it and rows.
type batchGroup struct {
	runs             []arrow.RecordBatch
	run, start, rows []int64
}

func (g *batchGroup) release() {
	for _, r := range g.runs {
		r.Release()
	}
}

// nextGroup returns the next batches, up to most of them (those ready;
// the caller releases the group), nil at the end of the epoch, or
// errNotReady after timeout. The first call starts the iteration; the end
// or an error finishes it, and the call after starts the next epoch's.
func (h *handle) nextGroup(most int, timeout time.Duration) (*batchGroup, error) {
	if most < 1 {
		return nil, usageErr("%v (asked for %d)", errGroupSize, most)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	for {
		if h.it == nil {
			h.pos, h.rows = []any{h.position()}, nil
			h.it = startPull(h)
		}
		got := h.it.take(most, timeout)
		switch {
		case len(got) == 0 && h.it.stopped:
			// A stopped pull drained: the next starts where it left off.
			h.it = nil
			continue
		case len(got) == 0:
			return nil, errNotReady
		case got[0].b == nil:
			h.it.stop()
			h.it, h.pos = nil, nil
			if got[0].end {
				return nil, nil
			}
			return nil, got[0].err
		}
		bs := make([]arrow.RecordBatch, len(got))
		h.pos = make([]any, len(got))
		g := &batchGroup{rows: make([]int64, len(got))}
		h.rows = g.rows
		for i, x := range got {
			bs[i], h.pos[i], g.rows[i] = x.b, x.pos, x.b.NumRows()
		}
		var runs [][]arrow.RecordBatch
		runs, g.run, g.start = segments(bs)
		for _, r := range runs {
			g.runs = append(g.runs, joined(r))
		}
		for _, b := range bs {
			b.Release()
		}
		return g, nil
	}
}

// ahead is the rows and batches the dataset counts consumed that the
// caller has not delivered: those read ahead, and the last undelivered
// of the last call.
func (h *handle) ahead(undelivered int) (rows, batches int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.it != nil {
		h.it.mu.Lock()
		for _, x := range h.it.queue {
			if x.b != nil {
				rows += x.b.NumRows()
				batches++
			}
		}
		h.it.mu.Unlock()
	}
	if h.pos != nil && len(h.rows) == len(h.pos) {
		for _, n := range h.rows[max(len(h.rows)-undelivered, 0):] {
			rows += n
			batches++
		}
	}
	return rows, batches
}

// position is the dataset's or mix's position now.
func (h *handle) position() any {
	if h.mix != nil {
		return h.mix.StateDict()
	}
	return h.ds.StateDict()
}

// stopIter ends a running iteration, keeping the position: the batches
// its goroutine pulled and the caller did not take are taken by the next
// calls.
func (h *handle) stopIter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.it != nil {
		h.it.stop()
	}
}

// dropIter ends a running iteration and lets go of what it pulled ahead:
// for a caller that replaces the position.
func (h *handle) dropIter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.it != nil {
		h.it.stop()
		h.it.release()
		h.it, h.pos = nil, nil
	}
}

// state returns the position after the batches taken, encoded as
// checkpoint.Encode (a dataset) or EncodeMix (a mix) writes it.
func (h *handle) state() ([]byte, error) { return h.stateAt(0) }

// stateAt returns the position after all but the last undelivered batches
// of the last call (nextGroup): the caller has handed those on to no one
// yet.
func (h *handle) stateAt(undelivered int) ([]byte, error) {
	h.mu.Lock()
	pos := h.pos
	h.mu.Unlock()
	var p any
	switch {
	case undelivered < 0 || (undelivered > 0 && undelivered >= len(pos)):
		return nil, usageErr("sluice: state of %d batches not delivered: the last call handed over %d", undelivered, len(pos))
	case pos != nil:
		p = pos[len(pos)-1-undelivered]
	default:
		p = h.position()
	}
	if st, ok := p.(checkpoint.MixState); ok {
		return checkpoint.EncodeMix(st)
	}
	return checkpoint.Encode(p.(checkpoint.State))
}

// epoch is the epoch of the position after the batches taken.
func (h *handle) epoch() int64 {
	h.mu.Lock()
	pos := h.pos
	h.mu.Unlock()
	p := h.position()
	if pos != nil {
		p = pos[len(pos)-1]
	}
	if st, ok := p.(checkpoint.MixState); ok {
		return st.Epoch
	}
	return p.(checkpoint.State).Epoch
}

// loadState ends a running iteration (its position is replaced anyway)
// and moves to the encoded state.
func (h *handle) loadState(b []byte) error {
	h.dropIter()
	if h.mix != nil {
		st, err := checkpoint.DecodeMix(b)
		if err != nil {
			return err
		}
		return h.mix.LoadStateDict(st)
	}
	st, err := checkpoint.Decode(b)
	if err != nil {
		return err
	}
	return h.ds.LoadStateDict(st)
}

// closeHandle ends the iteration, every goroutine with it, and closes the
// dataset. A dataset that an open mix reads is refused: the mix would read
// closed files.
func closeHandle(id int64) error {
	handlesMu.Lock()
	h, ok := handles[id]
	if !ok {
		handlesMu.Unlock()
		return fmt.Errorf("%w (handle %d)", errClosed, id)
	}
	if h.mixes > 0 {
		handlesMu.Unlock()
		return usageErr("sluice: dataset %d is a source of %d open mix(es): close them first", id, h.mixes)
	}
	delete(handles, id)
	for _, s := range h.srcs {
		s.mixes--
	}
	handlesMu.Unlock()
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.dropIter()
	if h.ds != nil {
		err := errors.Join(h.ds.Close(), closeAll(h.closers))
		h.mem.Release()
		return err
	}
	return nil
}

// openDataset opens a dataset from the JSON options.
func openDataset(js []byte) (int64, error) {
	var o openOptions
	if err := decodeOptions(js, datasetOptions, &o); err != nil {
		return 0, err
	}
	so, err := o.streamOptions()
	if err != nil {
		return 0, err
	}
	sizeLimits(&so.Limits)
	ctx := context.Background()
	closers, err := o.openSources(ctx, &so)
	if err != nil {
		return 0, err
	}
	mem := recycled()
	so.Allocator = mem
	d, err := stream.Open(ctx, so)
	if err != nil {
		return 0, errors.Join(err, closeAll(closers))
	}
	return register(&handle{ds: d, shuffle: so.Shuffle, closers: closers, mem: mem}), nil
}

// recycledBytes is the most a dataset's recycler holds: 256 MiB, as much as
// the fetch stage's read-ahead budget holds by default (stream.Limits'
// FetchAheadBytes), far above what a stream's windows and a consumer's
// batches have in use at once, and a bound on what a consumer that once
// held an epoch of batches leaves held until the dataset closes.
const recycledBytes = 256 << 20

// recycled is the allocator a dataset's batches are made of: one that
// hands the buffers of batches the caller has released (sluice_release,
// the Python package's arrays once no view of them is left) to the
// windows decoded next, holding at most what the caller and the pipeline
// once had in use at once (recycledBytes at most). Left to Go's
// collector, those buffers were nine tenths of what a Python pass
// allocated, collected every few windows and faulted in fresh: the
// bench's numeric pass in Python ran at 0.68 of the Go API's, 0.84 with
// them recycled (docs/python.md). A caller reads a batch only while it
// holds it, which the C Data Interface's release protocol already asks
// of it. It is not the runtime's memory as stream.Options.Allocator
// means it: the Parquet decoder then copies the dictionary entries it
// would lend a batch into its buffers too, which cost less than the
// collections those pages made.
func recycled() *unzeroed.Recycler {
	mem := unzeroed.NewRecycler(unzeroed.Offer(memory.DefaultAllocator))
	mem.BoundByUse(recycledBytes)
	return mem
}

// openMix opens a mix over open datasets, named by handle.
func openMix(js []byte) (int64, error) {
	var o mixOptions
	if err := decodeOptions(js, mixOptionNames, &o); err != nil {
		return 0, err
	}
	var err error
	if o.Epoch, err = mixEpoch(o.EpochRule); err != nil {
		return 0, err
	}
	handlesMu.Lock()
	defer handlesMu.Unlock()
	var srcs []stream.MixSource
	var hs []*handle
	for i, s := range o.Sources {
		h, ok := handles[s.Dataset]
		if !ok || h.ds == nil {
			return 0, usageErr("mix source %d: handle %d is not an open dataset", i, s.Dataset)
		}
		srcs = append(srcs, stream.MixSource{Dataset: h.ds, Weight: s.Weight})
		hs = append(hs, h)
	}
	sizeMix(&o.MixOptions)
	m, err := stream.Mix(srcs, o.MixOptions)
	if err != nil {
		return 0, err
	}
	for _, h := range hs {
		h.mixes++
	}
	h := &handle{mix: m, srcs: hs}
	lastID++
	h.id = lastID
	handles[h.id] = h
	return h.id, nil
}

// info is what sluice_info reports.
type info struct {
	Epoch       int64  `json:"epoch"`
	Fingerprint string `json:"fingerprint,omitempty"`
	NumSplits   int    `json:"num_splits,omitempty"`
	Mix         bool   `json:"mix"`
}

func (h *handle) info() info {
	if h.mix != nil {
		return info{Epoch: h.epoch(), Mix: true}
	}
	return info{Epoch: h.epoch(), Fingerprint: h.ds.Fingerprint(), NumSplits: len(h.ds.Splits())}
}

// mergeStates merges encoded states of all ranks of one step
// (checkpoint.Merge, or MergeMix for mixes) and encodes the result.
func mergeStates(states [][]byte, mix bool) ([]byte, error) {
	if mix {
		sts := make([]checkpoint.MixState, len(states))
		for i, b := range states {
			st, err := checkpoint.DecodeMix(b)
			if err != nil {
				return nil, fmt.Errorf("state %d: %w", i, err)
			}
			sts[i] = st
		}
		st, err := checkpoint.MergeMix(sts...)
		if err != nil {
			return nil, err
		}
		return checkpoint.EncodeMix(st)
	}
	// Each state read as its own splits' entries: a worker that resumes a
	// merged loader state merges every worker's of the job.
	st, err := checkpoint.MergeEncoded(states...)
	if err != nil {
		return nil, err
	}
	return checkpoint.Encode(st)
}

// rankFromEnv is stream.RankFromEnv as JSON; no launcher is rank 0 of 1
// with an empty launcher name.
func rankFromEnv(envJSON []byte) ([]byte, error) {
	var env map[string]string
	if err := json.Unmarshal(envJSON, &env); err != nil {
		return nil, usageErr("environment: %v", err)
	}
	p, err := stream.RankFromEnv(stream.LaunchOptions{Getenv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if errors.Is(err, stream.ErrNoLauncher) {
		p, err = stream.Placement{Rank: 0, WorldSize: 1, LocalRank: -1, LocalWorldSize: -1}, nil
	}
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return json.Marshal(map[string]any{"launcher": p.Launcher, "rank": p.Rank, "world_size": p.WorldSize, "local_rank": p.LocalRank, "local_world_size": p.LocalWorldSize})
}

// estimate is what sluice_estimate reports: stream.Estimate under the
// Python package's names, and its PeakBytes for the dataset's Shuffle.
type estimate struct {
	WindowRows        int     `json:"window_rows"`
	RowBytes          float64 `json:"row_bytes"`
	Windows           int     `json:"windows"`
	MeanRows          float64 `json:"mean_rows"`
	MaxRows           int64   `json:"max_rows"`
	MeanPlaces        float64 `json:"mean_places"`
	MinPlaces         int     `json:"min_places"`
	WindowBytes       int64   `json:"window_bytes"`
	WindowStoredBytes int64   `json:"window_stored_bytes"`
	PeakBytes         int64   `json:"peak_bytes"`
	Mixing            float64 `json:"mixing"`
	MixingBatches     int     `json:"mixing_batches"`
}

// estimate prices the dataset's current epoch (stream.Dataset.Estimate).
func (h *handle) estimate() (estimate, error) {
	if h.ds == nil {
		return estimate{}, usageErr("sluice: a mix has no estimate of its own: ask its sources")
	}
	e := h.ds.Estimate()
	return estimate{
		WindowRows: e.WindowRows, RowBytes: e.RowBytes, Windows: e.Windows, MeanRows: e.MeanRows, MaxRows: e.MaxRows,
		MeanPlaces: e.MeanPlaces, MinPlaces: e.MinPlaces, WindowBytes: e.WindowBytes, WindowStoredBytes: e.WindowStoredBytes,
		PeakBytes: e.PeakBytes(h.shuffle), Mixing: e.Mixing, MixingBatches: e.MixingBatches,
	}, nil
}
