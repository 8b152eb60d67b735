package formats

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Parquet reads Apache Parquet files with arrow-go. Each column chunk a read
// needs is fetched with one range request; the footer is parsed once, at plan
// time, and kept.
type Parquet struct{}

// Name returns "parquet".
func (Parquet) Name() string { return "parquet" }

// Match accepts .parquet, .parq and .pq files.
func (Parquet) Match(key string) bool {
	switch strings.ToLower(path.Ext(key)) {
	case ".parquet", ".parq", ".pq":
		return true
	}
	return false
}

// parquetMeta is what Inspect keeps for Read.
type parquetMeta struct {
	md *metadata.FileMetaData
	// leaves maps a top-level column name to its leaf column indices.
	leaves map[string][]int
	// starts[i] is the first row of row group i; starts[len] is the total.
	starts []int64
}

// Inspect parses the footer, checks that every column chunk lies inside the
// file (arrow-go allocates a chunk's stated size before reading it), and
// records row group sizes.
func (Parquet) Inspect(ctx context.Context, f *Fragment, columns []string) error {
	if f.Size < 12 {
		return fmt.Errorf("%w: %d bytes is too small for a Parquet file", ErrCorrupt, f.Size)
	}
	pf, err := file.NewParquetReader(f.src.ReaderAt(ctx))
	if err != nil {
		return fmt.Errorf("%w: footer: %w", ErrCorrupt, err)
	}
	md := pf.MetaData()
	props := pqarrow.ArrowReadProperties{}
	manifest, err := pqarrow.NewSchemaManifest(md.Schema, md.KeyValueMetadata(), &props)
	if err != nil {
		return fmt.Errorf("%w: schema: %w", ErrCorrupt, err)
	}
	schema, err := pqarrow.FromParquet(md.Schema, &props, md.KeyValueMetadata())
	if err != nil {
		return fmt.Errorf("%w: schema: %w", ErrCorrupt, err)
	}
	meta := &parquetMeta{md: md, leaves: map[string][]int{}}
	for i := range manifest.Fields {
		sf := &manifest.Fields[i]
		meta.leaves[sf.Field.Name] = leafIndices(sf, nil)
	}
	selected := columns
	if selected == nil {
		for _, fl := range schema.Fields() {
			selected = append(selected, fl.Name)
		}
	}
	var selLeaves []int
	for _, c := range selected {
		selLeaves = append(selLeaves, meta.leaves[c]...) // a missing column is reported by unify
	}
	nrg := md.NumRowGroups()
	if md.NumRows < 0 || nrg < 0 {
		return fmt.Errorf("%w: footer: negative counts (%d rows, %d row groups)", ErrCorrupt, md.NumRows, nrg)
	}
	units := make([]Unit, nrg)
	starts := make([]int64, nrg+1)
	var rows int64
	for i := range nrg {
		rg := md.RowGroup(i)
		n := rg.NumRows()
		if n < 0 {
			return fmt.Errorf("%w: row group %d: negative row count %d", ErrCorrupt, i, n)
		}
		var bytes int64
		for _, leaf := range selLeaves {
			cc, err := rg.ColumnChunk(leaf)
			if err != nil {
				return fmt.Errorf("%w: row group %d column %d: %w", ErrCorrupt, i, leaf, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			size := cc.TotalCompressedSize()
			if start < 0 || size < 0 || start > f.Size || size > f.Size-start {
				return fmt.Errorf("%w: row group %d column %d: chunk at %d+%d lies outside the file's %d bytes", ErrCorrupt, i, leaf, start, size, f.Size)
			}
			bytes += size
		}
		units[i] = Unit{Rows: n, Bytes: bytes}
		starts[i] = rows
		rows += n
	}
	starts[nrg] = rows
	if rows != md.NumRows {
		return fmt.Errorf("%w: footer says %d rows but its row groups hold %d", ErrCorrupt, md.NumRows, rows)
	}
	meta.starts = starts
	f.Units, f.Rows, f.Schema, f.meta = units, rows, schema, meta
	return nil
}

func leafIndices(sf *pqarrow.SchemaField, out []int) []int {
	if sf.IsLeaf() {
		return append(out, sf.ColIndex)
	}
	for i := range sf.Children {
		out = leafIndices(&sf.Children[i], out)
	}
	return out
}

// Read decodes the row groups that overlap [start, end), skipping rows before
// start inside the first (with the page index where the file has one).
func (Parquet) Read(ctx context.Context, f *Fragment, schema *arrow.Schema, start, end int64, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	if start == end {
		return nil
	}
	meta := f.meta.(*parquetMeta)
	first, last := -1, -1
	for i := range len(meta.starts) - 1 {
		if meta.starts[i+1] > start && first < 0 {
			first = i
		}
		if meta.starts[i] < end {
			last = i
		}
	}
	rgs := make([]int, 0, last-first+1)
	for i := first; i <= last; i++ {
		if f.Units[i].Rows > 0 {
			rgs = append(rgs, i)
		}
	}
	var leaves []int
	for _, fl := range schema.Fields() {
		leaves = append(leaves, meta.leaves[fl.Name]...)
	}
	leaves = sortedUnique(leaves)

	props := parquet.NewReaderProperties(mem)
	pf, err := file.NewParquetReader(f.src.ReaderAt(ctx), file.WithMetadata(meta.md), file.WithReadProps(props))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, mem)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, rgs)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer rr.Release()
	if skip := start - meta.starts[first]; skip > 0 {
		if err := rr.SeekToRow(skip); err != nil {
			return fmt.Errorf("%w: seek to row %d: %w", ErrCorrupt, start, err)
		}
	}
	// The reader's columns are in file order; map them onto schema's order.
	rs := rr.Schema()
	pos := make([]int, schema.NumFields())
	for i, fl := range schema.Fields() {
		idx := rs.FieldIndices(fl.Name)
		if len(idx) == 0 {
			return fmt.Errorf("%w: column %q missing from the decoded batch", ErrCorrupt, fl.Name)
		}
		pos[i] = idx[0]
	}
	remaining := end - start
	for remaining > 0 {
		if !rr.Next() {
			break
		}
		rec := rr.RecordBatch()
		n := rec.NumRows()
		if n > remaining {
			n = remaining
		}
		out, err := project(ctx, rec, schema, pos, n, mem)
		if err != nil {
			return err
		}
		remaining -= n
		if err := yield(out); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: decode: %w", ErrCorrupt, err)
	} else if err != nil {
		return err
	}
	if remaining > 0 {
		return fmt.Errorf("%w: data ended %d rows early", ErrCorrupt, remaining)
	}
	return nil
}

// project reorders rec's columns to schema, keeps its first n rows and casts
// columns whose type was widened when files were unified.
func project(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, pos []int, n int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(pos))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, p := range pos {
		col := rec.Column(p)
		if n < int64(col.Len()) {
			col = array.NewSlice(col, 0, n)
		} else {
			col.Retain()
		}
		want := schema.Field(i).Type
		if !arrow.TypeEqual(col.DataType(), want) {
			cast, err := compute.CastArray(compute.WithAllocator(ctx, mem), col, compute.SafeCastOptions(want))
			col.Release()
			if err != nil {
				return nil, fmt.Errorf("%w: widen column %q to %s: %w", ErrSchema, schema.Field(i).Name, want, err)
			}
			col = cast
		}
		cols[i] = col
	}
	return array.NewRecordBatch(schema, cols, n), nil
}
