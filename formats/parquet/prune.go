package parquet

import (
	"context"
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
	mu     sync.Mutex
	stats  map[pruneKey]*columnStats
	blooms map[pruneKey]metadata.BloomFilter
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
		c.stats, c.blooms = map[pruneKey]*columnStats{}, map[pruneKey]metadata.BloomFilter{}
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

func readChunkStats(md *metadata.FileMetaData, schema *arrow.Schema, rg, leaf int, col string) *columnStats {
	none := &columnStats{}
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
	cs := &columnStats{stats: filter.Stats{Rows: g.NumRows(), Nulls: -1}}
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
