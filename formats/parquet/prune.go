package parquet

import (
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
)

// Row groups a filter rules out are skipped before anything of them is
// fetched: the footer's statistics (min, max, null count) of the filter's
// columns decide first, then, for = and IN, the column's bloom filter,
// which costs one small read per row group and column and is read only
// where the statistics could not decide. A filter that is not package
// filter's, or a column whose statistics are missing, unreliable (old
// writers, see metadata.ColumnChunkMetaData.StatsSet) or of a type the
// statistics cannot be read in (decimals, INT96 timestamps, nested
// columns), rules nothing out.

// pruner is the filter as the driver needs it.
type pruner interface {
	MayMatch(schema *arrow.Schema, stats func(column string) (filter.Stats, bool)) bool
}

// pruneCache keeps, per file, the statistics read so far and the bloom
// filters fetched, so that each is read once whatever the epochs and reads.
type pruneCache struct {
	mu      sync.Mutex
	stats   map[pruneKey]*columnStats
	blooms  map[pruneKey]metadata.BloomFilter
	indexes map[pruneKey]metadata.ColumnIndex
}

type pruneKey struct{ rg, leaf int }

// columnStats is one column chunk's statistics as package filter reads
// them, and how to hash a value for its bloom filter.
type columnStats struct {
	stats filter.Stats
	ok    bool
	// hash hashes a value of Min's type as the writer hashed the stored
	// one; nil where values of the type cannot be hashed so.
	hash func(h metadata.Hasher, v any) (uint64, bool)
}

func (m *parquetMeta) pruneCache() *pruneCache {
	c := &m.prune
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats, c.blooms, c.indexes = map[pruneKey]*columnStats{}, map[pruneKey]metadata.BloomFilter{}, map[pruneKey]metadata.ColumnIndex{}
	}
	return c
}

// mayMatch reports whether row group rg may hold a row r's filter keeps.
func mayMatch(ctx context.Context, f *formats.Fragment, rg int, flt formats.Filter, schema *arrow.Schema) bool {
	p, ok := flt.(pruner)
	if !ok || flt == nil {
		return true
	}
	meta := f.Meta.(*parquetMeta)
	return p.MayMatch(schema, func(col string) (filter.Stats, bool) {
		leaves := meta.leaves[col]
		if len(leaves) != 1 {
			return filter.Stats{}, false
		}
		cs := meta.chunkStats(f, rg, leaves[0], col)
		if !cs.ok {
			return filter.Stats{}, false
		}
		st := cs.stats
		if cs.hash != nil && hasBloom(meta, rg, leaves[0]) {
			st.MayContain = func(v any) bool {
				bf := meta.bloom(ctx, f, rg, leaves[0])
				if bf == nil {
					return true
				}
				h, ok := cs.hash(bf.Hasher(), v)
				return !ok || bf.CheckHash(h)
			}
		}
		return st, true
	})
}

func hasBloom(meta *parquetMeta, rg, leaf int) bool {
	cc, err := meta.md.RowGroup(rg).ColumnChunk(leaf)
	return err == nil && cc.BloomFilterOffset() > 0
}

// chunkStats reads (once) the statistics of leaf, the only leaf of the
// top-level column col, in row group rg.
func (m *parquetMeta) chunkStats(f *formats.Fragment, rg, leaf int, col string) *columnStats {
	c := m.pruneCache()
	key := pruneKey{rg, leaf}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.stats[key]; ok {
		return cs
	}
	cs := readChunkStats(m.md, f.Schema, rg, leaf, col)
	c.stats[key] = cs
	return cs
}

func readChunkStats(md *metadata.FileMetaData, schema *arrow.Schema, rg, leaf int, col string) (cs *columnStats) {
	none := &columnStats{}
	defer func() {
		if recover() != nil {
			cs = none // arrow-go panics on malformed statistics: they say nothing
		}
	}()
	g := md.RowGroup(rg)
	cc, err := g.ColumnChunk(leaf)
	if err != nil {
		return none
	}
	idx := schema.FieldIndices(col)
	if len(idx) != 1 {
		return none
	}
	typ := schema.Field(idx[0]).Type
	if d, ok := typ.(*arrow.DictionaryType); ok {
		typ = d.ValueType
	}
	descr := md.Schema.Column(leaf)
	if descr.MaxRepetitionLevel() > 0 {
		return none // a list's values are not the rows
	}
	cs = &columnStats{stats: filter.Stats{Rows: g.NumRows(), Nulls: -1}}
	ts, err := cc.Statistics()
	if err != nil || ts == nil {
		// No statistics: still a bloom filter, maybe.
		cs.hash = hasher(typ, descr)
		cs.ok = cs.hash != nil
		return cs
	}
	if ts.HasNullCount() {
		cs.stats.Nulls = ts.NullCount()
	}
	cs.hash = hasher(typ, descr)
	cs.ok = true
	if !ts.HasMinMax() {
		return cs
	}
	unsigned := arrow.IsUnsignedInteger(typ.ID())
	switch s := ts.(type) {
	case *metadata.BooleanStatistics:
		if typ.ID() == arrow.BOOL {
			cs.stats.Min, cs.stats.Max = s.Min(), s.Max()
		}
	case *metadata.Int32Statistics:
		if !plainInteger(typ, descr) {
			break
		}
		if unsigned {
			cs.stats.Min, cs.stats.Max = uint64(uint32(s.Min())), uint64(uint32(s.Max()))
		} else {
			cs.stats.Min, cs.stats.Max = int64(s.Min()), int64(s.Max())
		}
	case *metadata.Int64Statistics:
		if !plainInteger(typ, descr) {
			break
		}
		if unsigned {
			cs.stats.Min, cs.stats.Max = uint64(s.Min()), uint64(s.Max())
		} else {
			cs.stats.Min, cs.stats.Max = s.Min(), s.Max()
		}
	case *metadata.Float32Statistics:
		if typ.ID() == arrow.FLOAT32 || typ.ID() == arrow.FLOAT64 {
			cs.stats.Min, cs.stats.Max = float64(s.Min()), float64(s.Max())
		}
	case *metadata.Float64Statistics:
		if typ.ID() == arrow.FLOAT64 {
			cs.stats.Min, cs.stats.Max = s.Min(), s.Max()
		}
	case *metadata.ByteArrayStatistics:
		if isText(typ) {
			cs.stats.Min, cs.stats.Max = string(s.Min()), string(s.Max())
		}
	}
	return cs
}

// plainInteger reports whether an INT32 or INT64 column's stored values
// are typ's own values: integers, date32 days, timestamps in typ's unit.
func plainInteger(typ arrow.DataType, descr *pqschema.Column) bool {
	switch {
	case arrow.IsInteger(typ.ID()):
		_, isDecimal := descr.LogicalType().(*pqschema.DecimalLogicalType)
		return !isDecimal
	case typ.ID() == arrow.DATE32:
		return descr.PhysicalType() == parquet.Types.Int32
	case typ.ID() == arrow.TIMESTAMP:
		lt, ok := descr.LogicalType().(*pqschema.TimestampLogicalType)
		if !ok || descr.PhysicalType() != parquet.Types.Int64 {
			return false
		}
		want := map[arrow.TimeUnit]pqschema.TimeUnitType{arrow.Millisecond: pqschema.TimeUnitMillis, arrow.Microsecond: pqschema.TimeUnitMicros, arrow.Nanosecond: pqschema.TimeUnitNanos}
		u, ok := want[typ.(*arrow.TimestampType).Unit]
		return ok && lt.TimeUnit() == u
	}
	return false
}

func isText(typ arrow.DataType) bool {
	switch typ.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// hasher hashes a literal (int64, uint64, float64 or string, as
// filter.Stats holds them) as the writer hashed the column's stored
// values: in the column's physical type.
func hasher(typ arrow.DataType, descr *pqschema.Column) func(h metadata.Hasher, v any) (uint64, bool) {
	switch descr.PhysicalType() {
	case parquet.Types.Int32:
		if !plainInteger(typ, descr) {
			return nil
		}
		return func(h metadata.Hasher, v any) (uint64, bool) {
			switch v := v.(type) {
			case int64:
				if int64(int32(v)) == v || arrow.IsUnsignedInteger(typ.ID()) && v >= 0 && v <= 1<<32-1 {
					return metadata.GetHash(h, int32(v)), true
				}
			case uint64:
				if v <= 1<<32-1 {
					return metadata.GetHash(h, int32(uint32(v))), true
				}
			}
			return 0, false
		}
	case parquet.Types.Int64:
		if !plainInteger(typ, descr) {
			return nil
		}
		return func(h metadata.Hasher, v any) (uint64, bool) {
			switch v := v.(type) {
			case int64:
				return metadata.GetHash(h, v), true
			case uint64:
				return metadata.GetHash(h, int64(v)), true
			}
			return 0, false
		}
	case parquet.Types.Double:
		if typ.ID() != arrow.FLOAT64 {
			return nil
		}
		return func(h metadata.Hasher, v any) (uint64, bool) {
			f, ok := v.(float64)
			if !ok || f == 0 { // -0 and 0 are equal but hash apart
				return 0, false
			}
			return metadata.GetHash(h, f), true
		}
	case parquet.Types.ByteArray:
		if !isText(typ) {
			return nil
		}
		return func(h metadata.Hasher, v any) (uint64, bool) {
			s, ok := v.(string)
			if !ok {
				return 0, false
			}
			return metadata.GetHash(h, parquet.ByteArray(s)), true
		}
	}
	return nil
}

// bloom returns (fetching it once) the bloom filter of leaf in row group
// rg, or nil if it has none or it cannot be read: a filter that cannot be
// read rules nothing out, and the rows are read and filtered instead.
func (m *parquetMeta) bloom(ctx context.Context, f *formats.Fragment, rg, leaf int) metadata.BloomFilter {
	c := m.pruneCache()
	key := pruneKey{rg, leaf}
	c.mu.Lock()
	bf, ok := c.blooms[key]
	c.mu.Unlock()
	if ok {
		return bf
	}
	rd := metadata.BloomFilterReader{
		Input:        f.Source.ReaderAt(ctx),
		FileMetadata: m.md,
		BufferPool:   &sync.Pool{New: func() any { return memory.NewResizableBuffer(memory.DefaultAllocator) }},
	}
	bf = readBloom(&rd, rg, leaf)
	if bf == nil && ctx.Err() != nil {
		return nil // not cached: cancelled, not absent
	}
	c.mu.Lock()
	c.blooms[key] = bf
	c.mu.Unlock()
	return bf
}

func readBloom(rd *metadata.BloomFilterReader, rg, leaf int) (bf metadata.BloomFilter) {
	defer func() {
		if recover() != nil {
			bf = nil // a malformed filter is no filter
		}
	}()
	g, err := rd.RowGroup(rg)
	if err != nil {
		return nil
	}
	bf, err = g.GetColumnBloomFilter(leaf)
	if err != nil {
		return nil
	}
	return bf
}

// Pruning is what a filter lets reads of a file skip.
type Pruning struct {
	// RowGroups is the file's row groups; Pruned those the filter rules
	// out, never fetched.
	RowGroups, Pruned int
	// Bytes is the stored size of the row groups' selected and filter
	// columns; PrunedBytes that of the pruned ones.
	Bytes, PrunedBytes int64
}

// Prune says which row groups of f (planned by this driver) flt rules
// out, and what they hold, as a read would find: for inspect. It may read
// bloom filters.
func (Format) Prune(ctx context.Context, f *formats.Fragment, flt formats.Filter) (Pruning, []bool) {
	out := Pruning{RowGroups: len(f.Units)}
	pruned := make([]bool, len(f.Units))
	for rg, u := range f.Units {
		out.Bytes += u.Bytes
		if flt != nil && !mayMatch(ctx, f, rg, flt, f.Schema) {
			pruned[rg] = true
			out.Pruned++
			out.PrunedBytes += u.Bytes
		}
	}
	return out, pruned
}

func (fe *parquetFetched) prune(rg int) {
	if fe.pruned == nil {
		fe.pruned = map[int]bool{}
	}
	fe.pruned[rg] = true
}

// Within a row group the filter does not rule out, the column index (the
// page index's per-page min, max and null counts) can: the pages of the
// filter's columns cut the row group into segments, each checked against
// the pages that cover it, and the read is narrowed to the rows from the
// first segment that may match to the end of the last. One span, not
// several: the read stays one seek and one run of pages per column, and a
// filter on a sorted or clustered column, the case the index serves, keeps
// one run of rows anyway.

// narrowed returns rows [lo, hi) of row group rg as the read fetches and
// decodes them: narrowed by the page index where the filter narrowed them.
func (fe *parquetFetched) narrowed(rg int, lo, hi int64) (int64, int64) {
	if n, ok := fe.narrow[rg]; ok {
		return max(lo, n[0]), min(hi, n[1])
	}
	return lo, hi
}

// narrowPages narrows rows [lo, hi) of row group rg to the span the
// filter's pages may match, recording it in fe; empty (lo == hi) if none
// may. It reads the column indexes of the filter's columns (once per file)
// and the row group's offset index, and does nothing where either is
// missing or malformed.
func (fe *parquetFetched) narrowPages(ctx context.Context, f *formats.Fragment, rg int, r *formats.Read, lo, hi int64) (int64, int64, error) {
	p, ok := r.Filter.(pruner)
	if !ok {
		return lo, hi, nil
	}
	meta := f.Meta.(*parquetMeta)
	ix, err := meta.rowGroupIndex(ctx, f, rg, fe.leaves)
	if err != nil || ix == nil {
		return lo, hi, err
	}
	rows := meta.starts[rg+1] - meta.starts[rg]
	type colPages struct {
		pages []pageLoc
		ci    metadata.ColumnIndex
		cs    *columnStats
		typ   arrow.DataType
	}
	cols := map[string]*colPages{}
	bounds := []int64{lo, hi}
	for _, col := range r.Filter.Columns() {
		leaves := meta.leaves[col]
		if len(leaves) != 1 || ix.pages[leaves[0]] == nil {
			continue
		}
		ci, err := meta.columnIndex(ctx, f, rg, leaves[0])
		if err != nil {
			return lo, hi, err
		}
		if ci == nil || len(ci.GetNullPages()) != len(ix.pages[leaves[0]]) {
			continue
		}
		idx := f.Schema.FieldIndices(col)
		if len(idx) != 1 {
			continue
		}
		cp := &colPages{pages: ix.pages[leaves[0]], ci: ci, cs: meta.chunkStats(f, rg, leaves[0], col), typ: f.Schema.Field(idx[0]).Type}
		if !consistent(ci, cp.pages, rows, cp.cs) {
			continue
		}
		cols[col] = cp
		for _, pg := range cp.pages {
			if pg.firstRow > lo && pg.firstRow < hi {
				bounds = append(bounds, pg.firstRow)
			}
		}
	}
	if len(cols) == 0 {
		return lo, hi, nil
	}
	bounds = sortedUnique64(bounds)
	first, last := int64(-1), int64(-1)
	for i := 0; i+1 < len(bounds); i++ {
		from := bounds[i]
		may := p.MayMatch(r.Schema, func(col string) (filter.Stats, bool) {
			cp, ok := cols[col]
			if !ok {
				return filter.Stats{}, false
			}
			k := sort.Search(len(cp.pages), func(k int) bool { return cp.pages[k].firstRow > from }) - 1
			if k < 0 {
				return filter.Stats{}, false
			}
			end := rows
			if k+1 < len(cp.pages) {
				end = cp.pages[k+1].firstRow
			}
			return pageStats(cp.ci, k, end-cp.pages[k].firstRow, cp.typ, cp.cs), true
		})
		if may {
			if first < 0 {
				first = from
			}
			last = bounds[i+1]
		}
	}
	if first < 0 {
		first, last = lo, lo
	}
	if fe.narrow == nil {
		fe.narrow = map[int][2]int64{}
	}
	fe.narrow[rg] = [2]int64{first, last}
	return first, last, nil
}

// consistent reports whether a column index can be trusted: null counts
// for every page (some writers leave -1, with every page marked null),
// a null page all nulls, and the counts adding up to the chunk's where its
// statistics have one. An index that cannot be trusted is not used.
func consistent(ci metadata.ColumnIndex, pages []pageLoc, rows int64, cs *columnStats) bool {
	if !ci.IsSetNullCounts() || len(ci.GetNullCounts()) != len(pages) {
		return false
	}
	var sum int64
	for k, n := range ci.GetNullCounts() {
		end := rows
		if k+1 < len(pages) {
			end = pages[k+1].firstRow
		}
		if n < 0 || n > end-pages[k].firstRow || ci.GetNullPages()[k] && n != end-pages[k].firstRow {
			return false
		}
		sum += n
	}
	return cs == nil || cs.stats.Nulls < 0 || cs.stats.Nulls == sum
}

// pageStats is page k's statistics from a column index, in the Go types
// filter.Stats holds, for the types whose chunk statistics are read too
// (cs says which: a page's values are typed as its chunk's).
func pageStats(ci metadata.ColumnIndex, k int, rows int64, typ arrow.DataType, cs *columnStats) filter.Stats {
	st := filter.Stats{Rows: rows, Nulls: -1}
	if ci.IsSetNullCounts() {
		st.Nulls = ci.GetNullCounts()[k]
	}
	if ci.GetNullPages()[k] {
		st.Nulls = rows
		return st
	}
	if cs == nil || cs.stats.Min == nil {
		return st // no usable chunk statistics: the type's values are not read
	}
	if d, ok := typ.(*arrow.DictionaryType); ok {
		typ = d.ValueType
	}
	unsigned := arrow.IsUnsignedInteger(typ.ID())
	switch c := ci.(type) {
	case *metadata.TypedColumnIndex[bool]:
		st.Min, st.Max = c.MinValues()[k], c.MaxValues()[k]
	case *metadata.TypedColumnIndex[int32]:
		if unsigned {
			st.Min, st.Max = uint64(uint32(c.MinValues()[k])), uint64(uint32(c.MaxValues()[k]))
		} else {
			st.Min, st.Max = int64(c.MinValues()[k]), int64(c.MaxValues()[k])
		}
	case *metadata.TypedColumnIndex[int64]:
		if unsigned {
			st.Min, st.Max = uint64(c.MinValues()[k]), uint64(c.MaxValues()[k])
		} else {
			st.Min, st.Max = c.MinValues()[k], c.MaxValues()[k]
		}
	case *metadata.TypedColumnIndex[float32]:
		st.Min, st.Max = float64(c.MinValues()[k]), float64(c.MaxValues()[k])
	case *metadata.TypedColumnIndex[float64]:
		st.Min, st.Max = c.MinValues()[k], c.MaxValues()[k]
	case *metadata.TypedColumnIndex[parquet.ByteArray]:
		st.Min, st.Max = string(c.MinValues()[k]), string(c.MaxValues()[k])
	}
	return st
}

// columnIndex returns (reading it once) the column index of leaf in row
// group rg, or nil if it has none or it is malformed.
func (m *parquetMeta) columnIndex(ctx context.Context, f *formats.Fragment, rg, leaf int) (metadata.ColumnIndex, error) {
	c := m.pruneCache()
	key := pruneKey{rg, leaf}
	c.mu.Lock()
	ci, ok := c.indexes[key]
	c.mu.Unlock()
	if ok {
		return ci, nil
	}
	loc, has := m.md.RowGroup(rg).ColumnIndexLocation(leaf)
	if has && loc.Offset >= 0 && loc.Length > 0 && loc.Length <= 16<<20 && loc.Offset+int64(loc.Length) <= f.Size {
		b := make([]byte, loc.Length)
		if _, err := f.Source.ReaderAt(ctx).ReadAt(b, loc.Offset); err != nil {
			return nil, err // not cached: a failed read is retried by the next
		}
		ci = parseColumnIndex(m.md.Schema.Column(leaf), b)
	}
	c.mu.Lock()
	c.indexes[key] = ci
	c.mu.Unlock()
	return ci, nil
}

// parseColumnIndex parses a column index; arrow-go panics on malformed
// ones, and a malformed one is none.
func parseColumnIndex(descr *pqschema.Column, b []byte) (ci metadata.ColumnIndex) {
	defer func() {
		if recover() != nil {
			ci = nil
		}
	}()
	return metadata.NewColumnIndex(descr, b, nil, nil)
}

func sortedUnique64(xs []int64) []int64 {
	slices.Sort(xs)
	return slices.Compact(xs)
}
