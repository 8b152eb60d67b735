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

	"github.com/sluicedata/sluice/checkpoint"
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

	mu     sync.Mutex // guards it and closed
	it     *pull
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

// pull turns the push iteration of Batches into calls that each ask for
// one batch. Its goroutine stays inside the loop body of the batch it last
// handed out until the next is asked for, so that the dataset's state
// counts exactly the batches the caller has received. (iter.Pull2 would
// do the same, but its coroutine must be resumed on the thread that made
// it, and a C caller may call from any thread.)
type pull struct {
	ask    chan struct{} // capacity 1: one request outstanding
	out    chan pulled
	cancel context.CancelFunc
	done   chan struct{}
	asked  bool // a request is outstanding (guarded by handle.mu)
}

type pulled struct {
	b   arrow.RecordBatch
	err error
	end bool
}

func startPull(h *handle) *pull {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pull{ask: make(chan struct{}, 1), out: make(chan pulled, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer func() {
			if r := recover(); r != nil {
				p.out <- pulled{err: panicErr(r)}
			}
		}()
		select {
		case <-p.ask:
		case <-ctx.Done():
			return
		}
		for b, err := range h.batches(ctx) {
			if err != nil {
				p.out <- pulled{err: err}
				return
			}
			b.Retain()
			p.out <- pulled{b: b} // room: the caller took the last one before asking
			select {
			case <-p.ask:
			case <-ctx.Done():
				return
			}
		}
		p.out <- pulled{end: true}
	}()
	return p
}

// stop ends the iteration and waits for its goroutine and the pipeline's;
// a batch handed out but not taken is released. The dataset keeps the
// position of the batches the caller received.
func (p *pull) stop() {
	p.cancel()
	<-p.done
	select {
	case x := <-p.out:
		if x.b != nil {
			x.b.Release()
		}
	default:
	}
}

// errNotReady is next's answer when no batch came within the timeout: the
// caller gets control back (to see a Ctrl-C) and asks again.
var errNotReady = errors.New("not ready")

// next returns the next batch (the caller releases it), nil at the end of
// the epoch, or errNotReady after timeout. The first call starts the
// iteration; the end or an error finishes it, and the call after starts
// the next epoch's.
func (h *handle) next(timeout time.Duration) (arrow.RecordBatch, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	if h.it == nil {
		h.it = startPull(h)
	}
	p := h.it
	if !p.asked {
		p.ask <- struct{}{}
		p.asked = true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case x := <-p.out:
		p.asked = false
		if x.b != nil {
			return x.b, nil
		}
		p.stop()
		h.it = nil
		if x.end {
			return nil, nil
		}
		return nil, x.err
	case <-t.C:
		return nil, errNotReady
	}
}

// stopIter ends a running iteration, keeping the position.
func (h *handle) stopIter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.it != nil {
		h.it.stop()
		h.it = nil
	}
}

// state returns the position, encoded as checkpoint.Encode (a dataset) or
// EncodeMix (a mix) writes it.
func (h *handle) state() ([]byte, error) {
	if h.mix != nil {
		return checkpoint.EncodeMix(h.mix.StateDict())
	}
	return checkpoint.Encode(h.ds.StateDict())
}

// loadState ends a running iteration (its position is replaced anyway)
// and moves to the encoded state.
func (h *handle) loadState(b []byte) error {
	h.stopIter()
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
	h.stopIter()
	if h.ds != nil {
		return errors.Join(h.ds.Close(), closeAll(h.closers))
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
	ctx := context.Background()
	closers, err := o.openSources(ctx, &so)
	if err != nil {
		return 0, err
	}
	d, err := stream.Open(ctx, so)
	if err != nil {
		return 0, errors.Join(err, closeAll(closers))
	}
	return register(&handle{ds: d, shuffle: so.Shuffle, closers: closers}), nil
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
		return info{Epoch: h.mix.Epoch(), Mix: true}
	}
	return info{Epoch: h.ds.Epoch(), Fingerprint: h.ds.Fingerprint(), NumSplits: len(h.ds.Splits())}
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
