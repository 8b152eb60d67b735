// Package stream is sluice's user API: open a dataset, stream it as Arrow
// record batches (or the user's own type, through Map) in an order that is
// exact, elastic and resumable, and take or load its state.
//
// An epoch is dealt into NumSplits splits; what each split emits, and in
// which order, is a pure function of the data, the order options, the seed
// and the epoch, never of the world size, concurrency or timing. Rank r of
// WorldSize owns the splits s with s mod WorldSize == r and takes batches
// from them round-robin.
//
// The run-time engine (fetch, decode, permute, cut and transform, the
// position and the caches) is stream/internal/engine; planning, and the
// plan shared among ranks, stream/internal/planner. This package opens,
// validates and hands its options to them.
package stream

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/stream/internal/engine"
)

// ErrBusy is returned when a second iteration is started on a Dataset while
// one is running: a dataset has one position, so one consumer.
var ErrBusy = engine.ErrBusy

// ErrEmpty is wrapped where a dataset without rows cannot serve: as a
// source of a mix, whose weight it could not honour. An empty dataset
// itself opens and streams no rows, every epoch.
var ErrEmpty = errors.New("stream: dataset has no rows")

// Dataset is an opened, planned dataset with a position. Its methods are
// safe to call from several goroutines, but only one iteration runs at a time.
type Dataset struct {
	// opts are the options the dataset was opened with (a consumer
	// of Consumers has its parent's); the engine runs by its own copy, a
	// consumer's with its share of the budget.
	opts   Options
	data   *formats.Scan
	shared bool // a consumer made by Consumers: data is its parent's to close
	// eng holds the position and runs the pipeline.
	eng *engine.Engine
}

// Open plans the dataset (every footer read once, concurrently) and checks
// the options. Unknown columns and NumSplits not divisible by WorldSize are
// errors here, not later. An empty dataset (files without rows, a table
// without a snapshot or data files) opens: it streams no rows and no
// batches, in every epoch, mode and rank; URLs that name no data file at
// all are an error wrapping formats.ErrEmpty, there being no schema.
func Open(ctx context.Context, opts Options) (*Dataset, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := planDataset(ctx, o)
	if err != nil {
		return nil, err
	}
	// ShuffleMemory becomes the rows it holds in this data: the engine,
	// the state and the dataset's options know the window in rows.
	o.ShuffleWindow = p.ShuffleWindow
	ep := engine.Plan{Chunks: p.Chunks, ID: p.ID, PlaceBytes: p.PlaceBytes}
	eo := o.engineOptions()
	if o.EqualBatches && p.Data.Rows() < 0 {
		if ep.Counts, err = engine.CountRows(ctx, eo, o.PlanCache, p.Data, p.Chunks, p.Filter); err != nil {
			p.Data.Close()
			return nil, err
		}
	}
	eng, err := engine.New(p.Data, ep, eo)
	if err != nil {
		p.Data.Close()
		return nil, err
	}
	return &Dataset{opts: o, data: p.Data, eng: eng}, nil
}

// Close releases the dataset's buckets and the windows read ahead. It does
// not stop a running iteration; cancel its context for that.
func (d *Dataset) Close() error {
	d.eng.Close()
	if d.shared { // a consumer made by Consumers: the files are its parent's
		return nil
	}
	return d.data.Close()
}

// Schema is the schema of every batch.
func (d *Dataset) Schema() *arrow.Schema { return d.data.Schema }

// Files returns the planned fragments (files) in plan order.
func (d *Dataset) Files() []*formats.Fragment { return d.data.Fragments }

// Chunks returns the chunk list the plan fingerprint covers.
func (d *Dataset) Chunks() []split.Chunk { return d.eng.Chunks() }

// Splits returns the splits of the current epoch.
func (d *Dataset) Splits() []split.Split { return d.eng.Current().Splits }

// Epoch is the epoch the next batch comes from.
func (d *Dataset) Epoch() int64 { return d.eng.Current().Epoch }

// Metrics returns the live figures of the dataset's pipeline.
func (d *Dataset) Metrics() *metrics.Pipeline { return d.eng.Metrics() }

// Fingerprint is the plan fingerprint (a hash of files, sizes and chunks).
func (d *Dataset) Fingerprint() string { return d.eng.Fingerprint() }

// SetEpoch moves to the start of epoch e. It fails while iterating.
func (d *Dataset) SetEpoch(e int64) error {
	if e < 0 {
		return fmt.Errorf("stream: epoch %d must not be negative", e)
	}
	return d.eng.SetEpoch(e)
}

// Batches streams the rest of the current epoch as Arrow record batches, in
// this rank's order. A batch is valid until the loop body returns: Retain it
// to keep it longer. When the epoch is exhausted the iteration ends and the
// dataset moves to the next epoch, so
//
//	for epoch := 0; epoch < n; epoch++ {
//		for batch, err := range ds.Batches(ctx) { ... }
//	}
//
// streams n epochs. Breaking out of the loop keeps the position: the next
// call goes on where it stopped. It also keeps what was read ahead: the
// break lets the fetches and decodes in flight finish (it returns once they
// have), and the next call of the same epoch starts from those windows
// instead of fetching them again. The first error ends the iteration.
func (d *Dataset) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return d.eng.Batches(ctx)
}

// Map streams the rest of the current epoch through fn, run on
// TransformConcurrency goroutines, and yields fn's results in exactly the
// order of Batches. fn owns nothing: the batch it gets is released after it
// returns (Retain what the result keeps). A panic in fn becomes an error
// naming the batch; the first error ends the iteration.
func Map[T any](ctx context.Context, d *Dataset, fn func(context.Context, arrow.RecordBatch) (T, error)) iter.Seq2[T, error] {
	return engine.Run(ctx, d.eng, fn, nil)
}

// Overlap is what an epoch's split boundaries cost in bytes fetched more
// than once. A boundary may fall inside a unit (a row group); the splits
// on each side then read part of it. Where the unit can be read by pages
// (a page index), each side fetches about its own rows; where it cannot,
// each side fetches the whole unit. With Options.ShufflePasses k, every
// unit is also fetched once per pass: Bytes and RankBytes count those k - 1
// fetches too (of a unit with pages, once per pass).
type Overlap struct {
	// CutUnits is the number of units a split boundary cuts.
	CutUnits int
	// PagedUnits is how many of them are read page by page.
	PagedUnits int
	// Bytes is the stored bytes fetched more than once: for each cut unit
	// without pages, its bytes once for every split past the first that
	// reads part of it.
	Bytes int64
	// RankBytes is this rank's share of Bytes: of each cut unit without
	// pages, the fraction of its readers that are this rank's splits.
	// Summed over the ranks it is Bytes. (Both are bounds: where one rank
	// reads adjacent parts of a unit close together, one fetch serves them.)
	RankBytes int64
}

// Overlap reports what the current epoch fetches twice where split
// boundaries cut units.
func (d *Dataset) Overlap() Overlap { return Overlap(d.eng.Overlap()) }

// SkippedRows is how many rows this rank's splits left out as bad (a text
// format's BadRowsSkip) in the windows the consumer finished, over every
// epoch of the job: a state carries it (State.Skipped), so a resumed job
// counts on from where its state was taken. The metrics' SkippedRows
// counts the same rows for the process only.
func (d *Dataset) SkippedRows() int64 { return d.eng.SkippedRows() }

// MapAny is Map for a caller that cannot name the result type in a type
// parameter: package typed decodes its outputs through it, so that they run
// on TransformConcurrency goroutines as Map's functions do. Prefer Map.
func (d *Dataset) MapAny(ctx context.Context, fn func(context.Context, arrow.RecordBatch) (any, error)) iter.Seq2[any, error] {
	return Map(ctx, d, fn)
}
