package formats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Fetched is a range of a fragment whose stored bytes are in memory, ready
// for Scan.Decode.
type Fetched struct {
	frag int
	rng  Range
	data Buffer
	// Bytes is the memory the fetched bytes hold.
	Bytes int64
	// holds counts, for a Buffer that is a Recycler, the Fetched of its
	// bytes not yet released: the one Fetch made and its parts.
	holds    *atomic.Int64
	released atomic.Bool
}

// Part is the part r of fe, sharing its bytes: a reader fetches adjacent
// ranges in one request and decodes each on its own. Its Bytes is 0, as the
// bytes are fe's.
func (fe *Fetched) Part(r Range) (*Fetched, error) {
	within := r.FirstUnit >= fe.rng.FirstUnit && r.EndUnit <= fe.rng.EndUnit && r.FirstUnit <= r.EndUnit
	if r.Known() {
		within = r.Start >= fe.rng.Start && r.End <= fe.rng.End && r.Start <= r.End
	}
	if !within {
		return nil, fmt.Errorf("formats: %v is not within the fetched %v", r, fe.rng)
	}
	if fe.released.Load() {
		return nil, fmt.Errorf("formats: a part of %v, which was released", fe.rng)
	}
	if fe.holds != nil {
		fe.holds.Add(1)
	}
	return &Fetched{frag: fe.frag, rng: r, data: fe.data, holds: fe.holds}, nil
}

// Read delivers range r of fragment i (in planning's terms: masked rows are
// not counted) in batches of at most batchRows rows. yield owns each batch
// and must release it. Errors name the file and the range; a panic in a
// third-party decoder becomes an error wrapping ErrCorrupt.
func (d *Scan) Read(ctx context.Context, i int, r Range, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	fe, err := d.Fetch(ctx, i, r)
	if err != nil {
		return err
	}
	defer fe.Release()
	_, err = d.Decode(ctx, fe, batchRows, mem, yield)
	return err
}

// RowRange is the Range of rows [start, end) of fragment i, with the units
// that hold them. It needs the fragment's counts: where they are unknown
// (a text file, a filter), read by units with Range{Start: -1, End: -1,
// FirstUnit: a, EndUnit: b}.
func (d *Scan) RowRange(i int, start, end int64) Range {
	r := Range{Start: start, End: end, FirstUnit: -1}
	if i < 0 || i >= len(d.Fragments) {
		return Range{Start: start, End: end} // for Read to refuse
	}
	f := d.Fragments[i]
	var at int64
	for u, unit := range f.Units {
		next := at + max(unit.Rows, 0)
		if r.FirstUnit < 0 && next > start {
			r.FirstUnit = u
		}
		if next >= end && r.FirstUnit >= 0 {
			r.EndUnit = u + 1
			break
		}
		at = next
	}
	if r.FirstUnit < 0 || start == end {
		r.FirstUnit, r.EndUnit = 0, 0
	}
	return r
}

// fileRange turns a planning range of f into the driver's: live rows into
// the file rows that hold them, units into rows where the driver knows the
// counts.
func (f *Fragment) fileRange(r Range) (Range, error) {
	n := len(f.Units)
	if r.FirstUnit < 0 || r.EndUnit > n || r.FirstUnit > r.EndUnit {
		return r, fmt.Errorf("formats: %s: units [%d, %d) outside the file's %d", f.URL, r.FirstUnit, r.EndUnit, n)
	}
	if !r.Known() {
		if r.Start != -1 || r.End != -1 {
			return r, fmt.Errorf("formats: %s: row range [%d, %d) is not a range", f.URL, r.Start, r.End)
		}
		if f.fileStarts != nil {
			r.Start, r.End = f.fileStarts[r.FirstUnit], f.fileStarts[r.EndUnit]
		}
		return r, nil
	}
	if r.End < r.Start || (f.Rows >= 0 && r.End > f.Rows) {
		return r, fmt.Errorf("formats: %s: row range [%d, %d) outside the file's %d rows", f.URL, r.Start, r.End, f.Rows)
	}
	if f.Mask == nil || r.Start == r.End {
		return r, nil
	}
	r.Start = f.Mask.fileRow(r.Start)
	r.End = f.Mask.fileRow(r.End-1) + 1
	return r, nil
}

// fileRow is the file row of the live row n: the n-th row not masked.
func (m *RowMask) fileRow(n int64) int64 {
	// The answer x satisfies x - (masked rows <= x) == n, x not masked; the
	// masked rows before it are found by search over the list.
	lo, hi := 0, len(m.Deleted)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Deleted[mid]-int64(mid) <= n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return n + int64(lo)
}

// Fetch fetches the stored bytes range r of fragment i needs, without
// decoding them. For formats that cannot fetch ahead it does nothing, and
// Decode does all the work.
func (d *Scan) Fetch(ctx context.Context, i int, r Range) (*Fetched, error) {
	if i < 0 || i >= len(d.Fragments) {
		return nil, fmt.Errorf("formats: fragment %d of a dataset of %d", i, len(d.Fragments))
	}
	f := d.Fragments[i]
	fr, err := f.fileRange(r)
	if err != nil {
		return nil, err
	}
	if err := f.inspectLate(ctx); err != nil {
		return nil, err
	}
	fe := &Fetched{frag: i, rng: r}
	err = guard(f.URL, r.String(), func() (err error) {
		fe.data, err = f.format.Fetch(ctx, f, d.request(f, fr, 0, nil))
		return err
	})
	if err != nil {
		return nil, err
	}
	if fe.data != nil {
		fe.Bytes = fe.data.Size()
	}
	if _, ok := fe.data.(Recycler); ok {
		fe.holds = new(atomic.Int64)
		fe.holds.Store(1)
	}
	return fe, nil
}

func (d *Scan) request(f *Fragment, r Range, batchRows int, mem memory.Allocator) *Read {
	rd := &Read{Range: r, Schema: d.read, BatchRows: batchRows, Mem: mem}
	if f.readSchema != nil {
		rd.Schema = f.readSchema
	}
	if f.Mask == nil && f.readSchema == nil {
		// Pruning would move the rows a mask names.
		rd.Filter = d.filter
	}
	return rd
}

func (d *Scan) readFetched(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error, skipped func(int64)) error {
	f := d.Fragments[fe.frag]
	if fe.released.Load() {
		return fmt.Errorf("formats: %s: %v decoded after it was released", f.URL, fe.rng)
	}
	if batchRows <= 0 {
		batchRows = 8192
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	fr, err := f.fileRange(fe.rng)
	if err != nil {
		return err
	}
	if err := f.inspectLate(ctx); err != nil {
		return err
	}
	var yieldErr error
	keep := func(b arrow.RecordBatch) error {
		if e := yield(b); e != nil {
			yieldErr = e
			return e
		}
		return nil
	}
	err = guard(f.URL, fe.rng.String(), func() error {
		next := fr.Start // the file row the next batch starts at
		mem := d.decodeMemory(f, mem)
		rq := d.request(f, fr, batchRows, mem)
		rq.Skipped = skipped
		for b, err := range f.format.Decode(ctx, f, fe.data, rq) {
			if err != nil {
				return err
			}
			at := next
			next += b.NumRows()
			if err := d.deliver(ctx, f, b, at, mem, keep); err != nil {
				return err
			}
		}
		if fr.Known() && next != fr.End && d.filter == nil && f.filter == nil {
			return fmt.Errorf("%w: read %d rows of %d", ErrCorrupt, next-fr.Start, fr.End-fr.Start)
		}
		return nil
	})
	if yieldErr != nil && errors.Is(err, yieldErr) {
		return yieldErr // the consumer's own error, not the file's
	}
	return err
}

// decodeMemory is what f's batches are decoded and compacted into: where a
// mask or a filter may drop rows of them and mem is the runtime's (what is
// never released is the collector's), the scan's reuse (see there), to
// which compact gives a decoded batch's buffers back once it copied its
// kept rows out, and the consumer a batch's once it released it.
func (d *Scan) decodeMemory(f *Fragment, mem memory.Allocator) memory.Allocator {
	if f.Mask == nil && f.filter == nil && d.filter == nil {
		return mem
	}
	if unzeroed.LendingTo(mem) != unzeroed.Keep {
		// The caller's own: one that counts (tests) or recycles (a
		// shuffled stream's) sees every buffer.
		return mem
	}
	return &d.reuse
}

// deliver applies f's mask to b, whose first row is file row at, then the
// filter and the projection onto the dataset's schema (see pass). It takes
// b.
func (d *Scan) deliver(ctx context.Context, f *Fragment, b arrow.RecordBatch, at int64, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	if f.Mask == nil || at < 0 {
		return d.pass(ctx, f, b, nil, mem, yield)
	}
	del := f.Mask.Deleted
	lo, _ := slices.BinarySearch(del, at)
	hi, _ := slices.BinarySearch(del, at+b.NumRows())
	switch {
	case lo == hi:
		return d.pass(ctx, f, b, nil, mem, yield)
	case int64(hi-lo) == b.NumRows():
		b.Release()
		return nil
	}
	keep := allKept(int(b.NumRows()))
	for _, row := range del[lo:hi] {
		bitutil.ClearBit(keep, int(row-at))
	}
	return d.pass(ctx, f, b, keep, mem, yield)
}

// pass applies the filters to b and projects it onto the dataset's schema,
// dropping the columns only the filters read. keep, where not nil, is the
// rows the mask leaves; the filters' answers are joined to it, and the
// rows left are copied out once (compact), or not at all where every row
// stays. It takes b.
func (d *Scan) pass(ctx context.Context, f *Fragment, b arrow.RecordBatch, keep []byte, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	if f.readSchema != nil {
		var err error
		if b, err = d.rename(f, b, mem); err != nil {
			return err
		}
	}
	n := b.NumRows()
	for _, flt := range []Filter{f.filter, d.filter} {
		if flt == nil {
			continue
		}
		k, err := flt.Keep(ctx, b)
		if err != nil {
			b.Release()
			return fmt.Errorf("filter %s: %w", flt, err)
		}
		if int64(k.Len()) != n {
			k.Release()
			b.Release()
			return fmt.Errorf("filter %s: %d answers for a batch of %d rows", flt, k.Len(), n)
		}
		if !keepsAll(k, n) {
			if keep == nil {
				keep = allKept(int(n))
			}
			and(keep, k)
		}
		k.Release()
	}
	if keep != nil {
		var err error
		if b, err = compact(ctx, b, keep, mem); err != nil {
			return fmt.Errorf("filter: %w", err)
		}
	}
	if d.read.NumFields() > d.Schema.NumFields() {
		out := array.NewRecordBatch(d.Schema, b.Columns()[:d.Schema.NumFields()], b.NumRows())
		b.Release()
		b = out
	}
	if b.NumRows() == 0 {
		b.Release()
		return nil
	}
	return yield(b)
}

// keepsAll reports whether a filter's answer keeps every one of n rows.
func keepsAll(keep *array.Boolean, n int64) bool {
	if keep.NullN() > 0 || int64(keep.Len()) != n {
		return false
	}
	return bitutil.CountSetBits(keep.Data().Buffers()[1].Bytes(), keep.Data().Offset(), keep.Len()) == keep.Len()
}

// guard runs fn, turning a panic (arrow-go panics on some malformed input)
// into an error that says what it tells of the file (see panics.New), and
// names the file and the part being read in any error.
func guard(url, part string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			pe := panics.New(r)
			// The stack helps whoever fixes the decoder, not the user: it
			// goes to the debug log, and the error stays one line.
			slog.Debug("formats: decoder panicked", "file", url, "part", part, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: %s: %w: %w", url, part, ErrCorrupt, pe)
		}
	}()
	if err := fn(); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if msg := err.Error(); strings.Contains(msg, url) && strings.Contains(msg, part) {
			return err
		}
		return fmt.Errorf("%s: %s: %w", url, part, err)
	}
	return nil
}
