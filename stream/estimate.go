package stream

import "github.com/sluicedata/sluice/stream/internal/planner"

// Estimate is what the dataset's shuffle costs and gives in the current
// epoch, known from the plan before any data is read (sluice inspect
// prints it): the price of a ShuffleWindow or ShuffleMemory setting.
type Estimate struct {
	// WindowRows is the window bound in rows: ShuffleWindow, or the rows
	// ShuffleMemory holds at RowBytes.
	WindowRows int
	// RowBytes estimates a row of the selected columns decoded, in bytes
	// (see ShuffleMemory); 0 where no row count is known before reading.
	RowBytes float64
	// Windows is the number of windows of the epoch, over all splits;
	// MeanRows and MaxRows are their rows (-1 where counts are unknown
	// before reading). A window holds at least a row group, so MaxRows may
	// exceed WindowRows.
	Windows  int
	MeanRows float64
	MaxRows  int64
	// MeanPlaces and MinPlaces count the places a window draws its rows
	// from: its pieces (a chunk of whole row groups, or the part of one
	// that falls in a split). How well a window mixes depends on them.
	MeanPlaces float64
	MinPlaces  int
	// WindowBytes estimates the decoded memory of the largest window,
	// MaxRows × RowBytes, and WindowStoredBytes the most stored bytes a
	// window fetches. A window holds its stored bytes until it is decoded,
	// and a shuffled one is permuted into a copy of its decoded rows, so it
	// peaks at about WindowStoredBytes + 2 × WindowBytes (PeakBytes); the
	// stream holds up to PrefetchWindows windows decoded and the stored
	// stored bytes of windows fetched ahead, up to Limits.FetchAheadBytes.
	WindowBytes       int64
	WindowStoredBytes int64
	// WindowDecodedBytes is the decoded memory of the rows the largest
	// window's pieces read: with ShufflePasses k, each piece decodes every
	// row of its range, about k times its own, before the permutation keeps
	// its pass's; without passes it is WindowBytes. PeakBytes counts it.
	WindowDecodedBytes int64
	// DecodersPeakBytes is what the ReadConcurrency largest windows hold
	// together, each as PeakBytes counts it: a stream decodes that many
	// windows at once, so where an epoch has several windows its memory
	// is about this, not one window's (0 where the decoded size is
	// unknown). Choosing a setting by memory, compare these.
	DecodersPeakBytes int64
	// Mixing is the mixing figure batches of BatchSize rows get on data of
	// this plan's shape sorted by a label of 10 classes (the worst case for
	// a shuffle): the mean total variation distance between a batch's label
	// histogram and the global one, 0 for a perfect mix, about 0.04 for a
	// full shuffle of 1024-row batches, 0.9 for batches of one class. It
	// is computed by running the epoch's order over the plan, for the
	// batches of a sample of windows (MixingBatches of them), and is -1
	// where row counts are unknown before reading. Data whose labels are
	// not sorted mixes better.
	Mixing        float64
	MixingBatches int
}

// Estimate prices the current epoch's order: its windows, their places
// and memory, and the mixing its batches get on label-sorted data. It
// reads no data; on a large plan it puts a bounded sample of windows in
// order (about 16M rows, or one window where one is larger), so it takes
// about as long as a stream takes to shuffle that many rows.
func (d *Dataset) Estimate() Estimate {
	e := planner.Price(d.data, d.eng.Chunks(), d.eng.Current(), d.opts.BatchSize, d.opts.Limits.ReadConcurrency, d.opts.Shuffle)
	return Estimate{
		WindowRows: d.opts.ShuffleWindow, RowBytes: e.RowBytes,
		Windows: e.Windows, MeanRows: e.MeanRows, MaxRows: e.MaxRows,
		MeanPlaces: e.MeanPlaces, MinPlaces: e.MinPlaces, WindowBytes: e.WindowBytes, WindowStoredBytes: e.StoredBytes, WindowDecodedBytes: e.DecodedBytes, DecodersPeakBytes: e.DecodersPeakBytes,
		Mixing: e.Mixing, MixingBatches: e.Batches,
	}
}

// PeakBytes estimates the most memory one window holds at once: its stored
// bytes while it decodes, its decoded rows (WindowDecodedBytes: with
// passes, the other passes' rows in its pieces' ranges too) and, shuffled,
// the permuted copy of its own rows (0 where the decoded size is unknown).
func (e Estimate) PeakBytes(shuffled bool) int64 {
	if e.WindowBytes == 0 {
		return 0
	}
	decoded := max(e.WindowDecodedBytes, e.WindowBytes)
	if shuffled {
		return e.WindowStoredBytes + decoded + e.WindowBytes
	}
	return e.WindowStoredBytes + decoded
}
