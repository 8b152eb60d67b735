// Package price says what a shuffled order costs and what it buys, before
// any data is read: the windows an epoch's splits are packed into, the
// places (pieces of the dataset) each window draws from, the memory a
// window holds decoded, and the mixing its batches get on data sorted by
// label, the worst case for a shuffle.
//
// The mixing is the figure the bench measures (bench/mixing.go): the mean,
// over batches, of the total variation distance between a batch's label
// histogram and the global one, where the label of a row is its index in
// the dataset times Classes over the dataset's rows. It is computed by
// running the order itself (package split's epoch, windows, schedule and
// window orders) over the plan, so it is what a stream of these options
// emits, not a model of it; it reads no rows. Only a bounded sample of
// windows is put in order (Options.Budget), so it stays fast on any plan.
//
// The memory is sized by RowBytes, the plan's estimate of a decoded row,
// which Options.ShuffleMemory of package stream divides into rows.
package price

import (
	"math"
	"sort"

	"github.com/sluicedata/sluice/split"
)

// Classes is the number of labels of the mixing figure.
const Classes = 10

// Options are what an estimate is made of.
type Options struct {
	// Epoch is the epoch whose order is priced, and Chunks the chunk list
	// it was dealt from (for the windows' stored bytes; nil: unknown).
	Epoch  *split.Epoch
	Chunks []split.Chunk
	// FileRows are the rows of each fragment of the plan, -1 where unknown.
	FileRows []int64
	// BatchSize is the rows of a batch.
	BatchSize int
	// RowBytes is the decoded bytes of a row (RowBytes); 0 where unknown.
	RowBytes float64
	// Budget bounds the rows of the windows whose order the mixing
	// computes (at least one window is, however large). Default 1<<24.
	Budget int64
	// Batches bounds the batches the mixing is the mean of. Default 2000.
	Batches int
	// Decoders is how many windows are decoded at once (the stream's
	// ReadConcurrency), and Shuffled whether each is permuted into a copy
	// of its rows: they size DecodersPeakBytes. Default 1.
	Decoders int
	Shuffled bool
}

// Estimate is what an order costs and gives.
type Estimate struct {
	// Windows is the epoch's windows over all splits, MeanRows and MaxRows
	// their rows (-1 where counts are unknown).
	Windows  int
	MeanRows float64
	MaxRows  int64
	// MeanPlaces and MinPlaces are the pieces a window is made of.
	MeanPlaces float64
	MinPlaces  int
	// RowBytes is Options.RowBytes.
	RowBytes float64
	// StoredBytes is the most stored bytes a window fetches (its pieces'
	// share of their chunks' bytes, by the rows they read: with passes,
	// the other passes' rows between their own too); 0 where Chunks is not
	// given.
	StoredBytes int64
	// WindowBytes is the decoded memory of the largest window, MaxRows ×
	// RowBytes; 0 where either is unknown.
	WindowBytes int64
	// SpanRows is the most rows a window's pieces read, and DecodedBytes
	// their decoded memory, SpanRows × RowBytes: with passes a piece
	// decodes every row of its range, the other passes' too, before the
	// permutation keeps its own; without, they are MaxRows and
	// WindowBytes.
	SpanRows     int64
	DecodedBytes int64
	// DecodersPeakBytes is the most the Options.Decoders largest windows
	// hold at once, each its stored bytes, its pieces' decoded rows and,
	// shuffled, its permuted copy: with several windows an epoch, what a
	// stream's decoders hold together. 0 where RowBytes is unknown.
	DecodersPeakBytes int64
	// Mixing is the expected mixing figure on label-sorted data, -1 where
	// row counts are unknown; Batches is how many batches it is the mean
	// of, SampledRows the rows of the windows put in order for it.
	Mixing      float64
	Batches     int
	SampledRows int64
}

// Of estimates the order of o.
func Of(o Options) Estimate {
	if o.Budget <= 0 {
		o.Budget = 1 << 24
	}
	if o.Batches <= 0 {
		o.Batches = 2000
	}
	est := Estimate{MinPlaces: -1, Mixing: -1, RowBytes: o.RowBytes}
	var rows, places int64
	var peaks []int64 // each window's, where its rows are known
	known := true
	for s, ws := range o.Epoch.Windows {
		for w, win := range ws {
			pieces := o.Epoch.Pieces(split.WindowRef{Split: s, Window: w})
			n := len(pieces)
			stored, span := storedBytes(pieces, o.Chunks), spanRows(pieces)
			est.StoredBytes = max(est.StoredBytes, stored)
			est.SpanRows = max(est.SpanRows, span)
			if win.Rows >= 0 && o.RowBytes > 0 {
				held := max(span, win.Rows)
				if o.Shuffled {
					held += win.Rows
				}
				peaks = append(peaks, stored+int64(math.Ceil(float64(held)*o.RowBytes)))
			}
			est.Windows++
			places += int64(n)
			if est.MinPlaces < 0 || n < est.MinPlaces {
				est.MinPlaces = n
			}
			if win.Rows < 0 {
				known = false
				continue
			}
			rows += win.Rows
			est.MaxRows = max(est.MaxRows, win.Rows)
		}
	}
	if est.Windows == 0 {
		est.MinPlaces = 0
		return est
	}
	est.MeanPlaces = float64(places) / float64(est.Windows)
	if !known {
		est.MeanRows, est.MaxRows = -1, -1
		return est
	}
	est.MeanRows = float64(rows) / float64(est.Windows)
	est.SpanRows = max(est.SpanRows, est.MaxRows)
	if o.RowBytes > 0 {
		est.WindowBytes = int64(math.Ceil(float64(est.MaxRows) * o.RowBytes))
		est.DecodedBytes = int64(math.Ceil(float64(est.SpanRows) * o.RowBytes))
		sort.Slice(peaks, func(i, j int) bool { return peaks[i] > peaks[j] })
		for _, p := range peaks[:min(len(peaks), max(o.Decoders, 1))] {
			est.DecodersPeakBytes += p
		}
	}
	est.Mixing, est.Batches, est.SampledRows = mixing(o)
	return est
}

// mixing runs the order over a sample of windows and returns the mean
// mixing figure of the batches that lie wholly in them (at most
// o.Batches, evenly spread), how many those are, and the rows put in
// order. It is -1 where a file's rows are unknown.
func mixing(o Options) (float64, int, int64) {
	starts := make([]int64, len(o.FileRows)+1)
	for f, n := range o.FileRows {
		if n < 0 {
			return -1, 0, 0
		}
		starts[f+1] = starts[f] + n
	}
	total := starts[len(o.FileRows)]
	if total <= 0 {
		return -1, 0, 0
	}
	ep := o.Epoch
	runs, sampled := sampleRuns(ep, o.Budget, int64(8*o.BatchSize))
	picked := pickBatches(ep, runs, sampled, o.BatchSize, o.Batches)
	if len(picked) == 0 {
		return -1, 0, sampled
	}
	// Each window is put in order once, when a picked batch first needs
	// it, and dropped after its last: the order is what the stream emits.
	last := map[split.WindowRef]int{}
	for i, b := range picked {
		for _, p := range b.Parts {
			last[p.Ref] = i
		}
	}
	orders := map[split.WindowRef]*windowOrder{}
	var sum float64
	var hist [Classes]int64
	for i, b := range picked {
		hist = [Classes]int64{}
		for _, p := range b.Parts {
			wo := orders[p.Ref]
			if wo == nil {
				wo = newWindowOrder(ep, p.Ref, starts)
				orders[p.Ref] = wo
			}
			for off := p.From; off < p.To; off++ {
				hist[label(wo.row(off), total)]++
			}
			if last[p.Ref] == i {
				delete(orders, p.Ref)
			}
		}
		sum += tvd(hist[:], b.Rows)
	}
	return sum / float64(len(picked)), len(picked), sampled
}

// run is a run of consecutive windows of one split, [First, End).
type run struct{ split, first, end int }

// sampleRuns chooses the windows whose order the mixing computes: every
// split's windows where their rows fit the budget, else runs of
// consecutive windows of a split (so that the batches across their
// boundaries are whole), each of at least runRows rows where the split
// has them, spread evenly over the epoch until the budget is spent. It
// returns them and their rows.
func sampleRuns(ep *split.Epoch, budget, runRows int64) ([]run, int64) {
	var all []split.WindowRef
	var total int64
	for s, ws := range ep.Windows {
		for w := range ws {
			all = append(all, split.WindowRef{Split: s, Window: w})
			total += ws[w].Rows
		}
	}
	var out []run
	if total <= budget {
		for s, ws := range ep.Windows {
			if len(ws) > 0 {
				out = append(out, run{s, 0, len(ws)})
			}
		}
		return out, total
	}
	mean := max(total/int64(len(all)), 1)
	runs := max(1, min(int64(len(all)), budget/max(runRows, mean)))
	var used int64
	next := map[int]int{} // per split, the first window no run has taken
	for j := int64(0); j < runs && used < budget; j++ {
		first := all[j*int64(len(all))/runs]
		r := run{first.Split, max(first.Window, next[first.Split]), 0}
		var got int64
		w := r.first
		for ; w < len(ep.Windows[r.split]) && got < runRows && (got == 0 || used < budget); w++ {
			n := ep.Windows[r.split][w].Rows
			got += n
			used += n
		}
		if r.end = w; r.end > r.first {
			out = append(out, r)
			next[r.split] = r.end
		}
	}
	return out, used
}

// pickBatches walks the batches that lie wholly in the runs, as the
// stream cuts them (package split's Schedule, over the run's split alone
// from the first batch boundary in the run: a batch never mixes splits,
// and a split's batches are the same whatever the world size), and keeps
// at most max of them, evenly spread over the sampled rows.
func pickBatches(ep *split.Epoch, runs []run, rows int64, batchSize, most int) []split.Batch {
	b := int64(batchSize)
	// About rows/b batches, and one short one where a run ends a split.
	stride := max(1, (rows/b+int64(len(runs))+int64(most)-1)/int64(most))
	n := len(ep.Splits)
	var out []split.Batch
	var seen int64
	for _, r := range runs {
		starts := ep.WindowStarts(r.split)
		first := (starts[r.first] + b - 1) / b * b
		if first >= starts[r.end] {
			continue
		}
		at, off, err := split.SeekWindow(starts, r.split, first)
		if err != nil {
			continue // counts unknown: Of never gets here with them
		}
		cursors := make([]split.Cursor, n)
		cursors[r.split] = split.Cursor{Window: at.Window, Offset: off, Rows: first}
		sched := split.NewSchedule(ep, r.split, n, batchSize, cursors, 0)
		for {
			bt, ok := sched.Step(nil)
			if !ok || bt.Parts[len(bt.Parts)-1].Ref.Window >= r.end {
				break
			}
			if bt.Rows > 0 && seen%stride == stride/2 && len(out) < most {
				out = append(out, bt)
			}
			seen++
		}
	}
	return out
}

// windowOrder maps a window's emission offsets to rows of the dataset.
type windowOrder struct {
	order []int32 // nil: storage order
	// ends[i] is the window row after piece i; pieces[i] the piece and
	// base[i] the dataset row of its file's first row.
	ends, base []int64
	pieces     []split.Piece
}

func newWindowOrder(ep *split.Epoch, r split.WindowRef, starts []int64) *windowOrder {
	wo := &windowOrder{order: ep.WindowOrder(r), pieces: ep.Pieces(r)}
	var at int64
	for _, p := range wo.pieces {
		at += p.Rows()
		wo.ends = append(wo.ends, at)
		wo.base = append(wo.base, starts[p.Fragment])
	}
	return wo
}

// row is the dataset row the window emits at offset off: with passes, the
// piece's k-th row is the k-th its pass keeps, not the k-th of its range.
func (wo *windowOrder) row(off int64) int64 {
	k := off
	if wo.order != nil {
		k = int64(wo.order[off])
	}
	i := sort.Search(len(wo.ends), func(i int) bool { return wo.ends[i] > k })
	if i > 0 {
		k -= wo.ends[i-1]
	}
	return wo.base[i] + wo.pieces[i].FileRow(k)
}

// label is the class of dataset row id of total rows, sorted.
func label(id, total int64) int {
	return int(min(max(id*Classes/total, 0), Classes-1))
}

// tvd is the total variation distance between a histogram of n values and
// the uniform one.
func tvd(hist []int64, n int64) float64 {
	var d float64
	for _, c := range hist {
		d += math.Abs(float64(c)/float64(n) - 1/float64(len(hist)))
	}
	return d / 2
}

// storedBytes is what the pieces fetch: each the share of its chunk's
// stored bytes of the rows it reads (a whole chunk where counts are
// unknown).
func storedBytes(pieces []split.Piece, chunks []split.Chunk) int64 {
	var n int64
	for _, p := range pieces {
		if p.Chunk < 0 || p.Chunk >= len(chunks) {
			continue
		}
		c := chunks[p.Chunk]
		if p.Span() < 0 || c.Rows() <= 0 {
			n += c.Bytes
			continue
		}
		n += c.Bytes * p.Span() / c.Rows()
	}
	return n
}

// spanRows is the rows the pieces read, their passes' and the others'
// between them; 0 where counts are unknown.
func spanRows(pieces []split.Piece) int64 {
	var n int64
	for _, p := range pieces {
		n += max(p.Span(), 0)
	}
	return n
}
