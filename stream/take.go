package stream

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/split"
)

// Random access: Take and TakeSplit return the rows at given positions of
// an epoch's order as one record batch, the rows Batches delivers there.
// A position is mapped to its row by the plan alone, so no epoch is
// walked; the rows are read grouped by unit (a row group, or a block of
// pages of one), each once, and kept in a cache bounded in bytes
// (Options.Limits.TakeCacheBytes), so that repeated requests neither read nor
// shuffle again. The engine does the work (stream/internal/engine,
// take.go).

// Location is where a position of an epoch's order comes from.
type Location struct {
	// Position is the position asked for.
	Position int64 `json:"position"`
	// Split is the split that emits it, and SplitOffset its offset in that
	// split's order.
	Split       int   `json:"split"`
	SplitOffset int64 `json:"split_offset"`
	// Window is the window of the split that emits it.
	Window int `json:"window"`
	// File indexes Files(); URL names it.
	File int    `json:"file"`
	URL  string `json:"url"`
	// Unit is the row group (stripe, ...) of the file holding the row, and
	// UnitRow the row within it.
	Unit    int   `json:"unit"`
	UnitRow int64 `json:"unit_row"`
	// Row is the row of the file. Where the file has a row mask, rows are
	// counted without the masked ones, as planning counts them.
	Row int64 `json:"row"`
}

// Take returns, as one record batch in the order asked, the rows at the
// given positions of epoch's order as one consumer takes it: every split,
// round-robin, BatchSize rows at a time, which is what Batches delivers at
// WorldSize 1 (with NumSplits 1, simply the split's order). The same
// position may be asked more than once. A position outside [0, rows of the
// epoch) is an error naming the range (wrapping split.ErrPosition); a
// dataset whose counts are not known before reading (text files, a filter)
// is refused with split.ErrUnknownRows. The caller releases the batch.
func (d *Dataset) Take(ctx context.Context, epoch int64, positions []int64) (arrow.RecordBatch, error) {
	return d.take(ctx, epoch, d.allSplits(), positions)
}

// TakeSplit is Take over the order of one split: the rows split emits in
// epoch, at the given offsets of its order.
func (d *Dataset) TakeSplit(ctx context.Context, epoch int64, split int, positions []int64) (arrow.RecordBatch, error) {
	if err := d.checkSplit(split); err != nil {
		return nil, err
	}
	return d.take(ctx, epoch, []int{split}, positions)
}

// TakeRank is Take over the order rank of worldSize receives: its splits,
// round-robin, BatchSize rows at a time, as Batches delivers them to that
// rank.
func (d *Dataset) TakeRank(ctx context.Context, epoch int64, rank, worldSize int, positions []int64) (arrow.RecordBatch, error) {
	splits, err := d.rankSplits(rank, worldSize)
	if err != nil {
		return nil, err
	}
	return d.take(ctx, epoch, splits, positions)
}

// Locate says where each position of epoch's order (as Take counts it)
// comes from, without reading any row.
func (d *Dataset) Locate(epoch int64, positions []int64) ([]Location, error) {
	return d.locate(epoch, d.allSplits(), positions)
}

// LocateSplit is Locate over the order of one split.
func (d *Dataset) LocateSplit(epoch int64, split int, positions []int64) ([]Location, error) {
	if err := d.checkSplit(split); err != nil {
		return nil, err
	}
	return d.locate(epoch, []int{split}, positions)
}

// LocateRank is Locate over the order of one rank (see TakeRank).
func (d *Dataset) LocateRank(epoch int64, rank, worldSize int, positions []int64) ([]Location, error) {
	splits, err := d.rankSplits(rank, worldSize)
	if err != nil {
		return nil, err
	}
	return d.locate(epoch, splits, positions)
}

// EpochRows is the rows of epoch's order as Take counts positions, all
// splits together, or an error wrapping split.ErrUnknownRows where that is
// not known before reading.
func (d *Dataset) EpochRows(epoch int64) (int64, error) {
	return d.eng.OrderRows(epoch, d.allSplits())
}

// SplitRows is the rows of split s's order in epoch as TakeSplit counts
// positions, or an error wrapping split.ErrUnknownRows where that is not
// known before reading.
func (d *Dataset) SplitRows(epoch int64, s int) (int64, error) {
	if err := d.checkSplit(s); err != nil {
		return 0, err
	}
	return d.eng.OrderRows(epoch, []int{s})
}

func (d *Dataset) allSplits() []int {
	out := make([]int, d.opts.NumSplits)
	for i := range out {
		out[i] = i
	}
	return out
}

func (d *Dataset) checkSplit(s int) error {
	if s < 0 || s >= d.opts.NumSplits {
		return fmt.Errorf("stream: %w: split %d is not in [0, %d)", split.ErrPosition, s, d.opts.NumSplits)
	}
	return nil
}

func (d *Dataset) rankSplits(rank, worldSize int) ([]int, error) {
	if worldSize < 1 || d.opts.NumSplits%worldSize != 0 || rank < 0 || rank >= worldSize {
		return nil, fmt.Errorf("stream: rank %d of world size %d: the world size must divide NumSplits %d and hold the rank", rank, worldSize, d.opts.NumSplits)
	}
	return split.Owned(d.opts.NumSplits, rank, worldSize), nil
}

func (d *Dataset) take(ctx context.Context, epoch int64, splits []int, positions []int64) (arrow.RecordBatch, error) {
	return d.eng.Take(ctx, epoch, splits, positions)
}

func (d *Dataset) locate(epoch int64, splits []int, positions []int64) ([]Location, error) {
	got, err := d.eng.Locate(epoch, splits, positions)
	if err != nil {
		return nil, err
	}
	out := make([]Location, len(got))
	for i, l := range got {
		out[i] = Location(l)
	}
	return out, nil
}
