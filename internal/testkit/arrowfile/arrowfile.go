// Package arrowfile is a tiny formats driver for Arrow IPC files (Feather
// v2), written to prove that the driver interface serves a format that is
// not Parquet, including one whose row counts are unknown before reading.
// It is test plumbing, not a user-facing format: it reads every batch once
// at planning time to learn its size, which a real driver would not do.
//
// A unit is one record batch of the file. With HideCounts the driver says
// it does not know how many rows a unit holds, as CSV and JSON drivers
// will, so that planning, reading and streaming by unit ranges are
// exercised on files whose contents are easy to write and check.
package arrowfile

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// Format reads Arrow IPC files. The zero value reports exact row counts.
type Format struct {
	// HideCounts reports every unit's and file's rows as unknown (-1), so
	// that the planner chunks the file by bytes and reads it by units.
	HideCounts bool
}

// Name returns "arrow".
func (Format) Name() string { return "arrow" }

// Match accepts .arrow, .feather and .ipc files.
func (Format) Match(key string) bool {
	switch strings.ToLower(path.Ext(key)) {
	case ".arrow", ".feather", ".ipc":
		return true
	}
	return false
}

// meta is what Inspect keeps for Decode: each batch's rows as written,
// whether or not the planner is told them, so that Decode can find a row
// range's batches and notice a file that changed since it was planned.
type meta struct {
	// starts[i] is the first row of batch i; starts[len] is the total.
	starts []int64
}

// Inspect reads the footer and every batch once: the IPC footer says where
// batches lie but not how many rows they hold.
func (a Format) Inspect(ctx context.Context, f *formats.Fragment, columns []string) error {
	fr, err := ipc.NewFileReader(f.Source.ReaderAt(ctx))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, f.URL, err)
	}
	defer fr.Close()
	schema := fr.Schema()
	var cols []int // a missing column is reported by the planner, which knows every file's
	for _, c := range columns {
		cols = append(cols, schema.FieldIndices(c)...)
	}
	if columns == nil {
		cols = nil
		for i := range schema.NumFields() {
			cols = append(cols, i)
		}
	}
	n := fr.NumRecords()
	m := &meta{starts: make([]int64, n+1)}
	units := make([]formats.Unit, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := fr.RecordBatchAt(i)
		if err != nil {
			return fmt.Errorf("%w: %s: batch %d: %w", formats.ErrCorrupt, f.URL, i, err)
		}
		rows := rec.NumRows()
		var bytes int64
		for _, c := range cols {
			bytes += formats.DataBytes(rec.Column(c).Data())
		}
		rec.Release()
		units[i] = formats.Unit{Rows: rows, Bytes: bytes}
		m.starts[i+1] = m.starts[i] + rows
	}
	f.Rows = m.starts[n]
	if a.HideCounts {
		f.Rows = -1
		for i := range units {
			units[i].Rows = -1
		}
	}
	f.Units, f.Schema, f.Meta = units, schema, m
	return nil
}

// Fetch returns nil: the driver reads as it decodes.
func (Format) Fetch(context.Context, *formats.Fragment, *formats.Read) (formats.Buffer, error) {
	return nil, nil
}

// Decode reads r's rows: its row range where counts are known (found from
// the rows, so a range whose units are wider than its rows reads only the
// rows), its units whole otherwise.
func (Format) Decode(ctx context.Context, f *formats.Fragment, _ formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		if err := decode(ctx, f, r, func(b arrow.RecordBatch) bool { return yield(b, nil) }); err != nil {
			yield(nil, err)
		}
	}
}

// errStop ends a decode whose consumer stopped.
var errStop = errors.New("stopped")

func decode(ctx context.Context, f *formats.Fragment, r *formats.Read, yield func(arrow.RecordBatch) bool) error {
	m, ok := f.Meta.(*meta)
	if !ok {
		return fmt.Errorf("arrowfile: %s was not inspected by this driver", f.URL)
	}
	nb := len(m.starts) - 1
	first, end := r.Range.FirstUnit, r.Range.EndUnit
	lo, hi := r.Range.Start, r.Range.End
	if r.Range.Known() {
		if lo > hi || hi > m.starts[nb] {
			return fmt.Errorf("arrowfile: %s: rows [%d, %d) outside the file's %d", f.URL, lo, hi, m.starts[nb])
		}
		if lo == hi {
			return nil
		}
		// The batch holding lo, through the one holding hi-1.
		first, _ = slices.BinarySearch(m.starts, lo+1)
		first--
		end, _ = slices.BinarySearch(m.starts, hi)
	}
	if first < 0 || end > nb || first > end {
		return fmt.Errorf("arrowfile: %s: batches [%d, %d) outside the file's %d", f.URL, first, end, nb)
	}
	if first == end {
		return nil
	}
	fr, err := ipc.NewFileReader(f.Source.ReaderAt(ctx), ipc.WithAllocator(r.Mem))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", formats.ErrCorrupt, f.URL, err)
	}
	defer fr.Close()
	if fr.NumRecords() != nb {
		return fmt.Errorf("%w: %s has %d batches, it had %d when planned", formats.ErrCorrupt, f.URL, fr.NumRecords(), nb)
	}
	pos := make([]int, r.Schema.NumFields())
	for i, fl := range r.Schema.Fields() {
		idx := fr.Schema().FieldIndices(fl.Name)
		if len(idx) == 0 {
			return fmt.Errorf("%w: %s has no column %q", formats.ErrSchema, f.URL, fl.Name)
		}
		pos[i] = idx[0]
	}
	batchRows := int64(max(r.BatchRows, 1))
	for u := first; u < end; u++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := func() error {
			rec, err := fr.RecordBatchAt(u)
			if err != nil {
				return fmt.Errorf("%w: %s: batch %d: %w", formats.ErrCorrupt, f.URL, u, err)
			}
			defer rec.Release()
			n := rec.NumRows()
			if want := m.starts[u+1] - m.starts[u]; n != want {
				return fmt.Errorf("%w: %s: batch %d has %d rows, it had %d when planned", formats.ErrCorrupt, f.URL, u, n, want)
			}
			from, to := int64(0), n
			if r.Range.Known() {
				from, to = max(lo-m.starts[u], 0), min(hi-m.starts[u], n)
			}
			for off := from; off < to; off += batchRows {
				out, err := project(ctx, rec, r.Schema, pos, off, min(batchRows, to-off), r.Mem)
				if err != nil {
					return fmt.Errorf("%s: batch %d: %w", f.URL, u, err)
				}
				if !yield(out) {
					return errStop
				}
			}
			return nil
		}()
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// project reorders rec's columns to schema, keeps rows [off, off+n) and
// casts columns whose type the planner widened to unify the files.
func project(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, pos []int, off, n int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(pos))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, p := range pos {
		col, err := formats.Widen(ctx, array.NewSlice(rec.Column(p), off, off+n), schema.Field(i), mem)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return array.NewRecordBatch(schema, cols, n), nil
}

// Schema is the schema WriteFile writes: the columns of internal/testkit/synth's
// Parquet files, so tests over either format check the same things.
var Schema = synth.Schema

// WriteFile writes an IPC file of Schema with one record batch per entry of
// batchRows (0 writes an empty batch). Ids number the rows from first; label
// is id mod 10, x is id/2 and s is the id in decimal.
func WriteFile(name string, first int64, batchRows []int) (err error) {
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	mem := memory.NewGoAllocator()
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(Schema), ipc.WithAllocator(mem))
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
	id := first
	for _, n := range batchRows {
		for range n {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Int64Builder).Append(id % 10)
			b.Field(2).(*array.Float64Builder).Append(float64(id) / 2)
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprint(id))
			id++
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return w.Close()
}
