package iceberg_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// deletesTable writes ids [0, n) in files of 1,500 rows and row groups of
// 200, deletes ids ≡ 7 (mod 50) by position and ids ≡ 13 (mod 50) by
// equality, and returns the table and the ids left.
func deletesTable(t *testing.T, n int) (*iceberg.Table, []int64) {
	t.Helper()
	ctx := context.Background()
	cat := sqliteNamespace(t)
	ident := table.Identifier{"ns", "deletes"}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "x", Type: ice.PrimitiveTypes.Float64},
	)
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(ice.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
		table.ParquetRowGroupLimitKey: "200",
	}))
	if err != nil {
		t.Fatal(err)
	}
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; from < n; from += 1500 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		for i := from; i < min(from+1500, n); i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(float64(i) / 2)
		}
		rec := b.NewRecordBatch()
		b.Release()
		data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
		rec.Release()
		tbl, err = tbl.AppendTable(ctx, data, 1500, nil)
		data.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	var byPos, byEq []int64
	var left []int64
	for i := range int64(n) {
		switch i % 50 {
		case 7:
			byPos = append(byPos, i)
		case 13:
			byEq = append(byEq, i)
		default:
			left = append(left, i)
		}
	}
	return deleteAndOpen(t, cat, tbl, ident, byPos, byEq), left
}

// deleteAndOpen deletes the rows of column 1 ("id") in byPos by position
// and those in byEq by equality, and opens the table as sluice reads it.
func deleteAndOpen(t *testing.T, cat catalog.Catalog, tbl *table.Table, ident table.Identifier, byPos, byEq []int64) *iceberg.Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := tbl.Delete(ctx, ice.IsIn(ice.Reference("id"), byPos...), nil)
	if err != nil {
		t.Fatal(err)
	}
	commitEqualityDeletes(t, tbl, byEq)
	it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { it.Close() })
	if st := it.Stats(); st.PositionDeleted != int64(len(byPos)) || st.EqualityDeleteFiles == 0 {
		t.Fatalf("planned %+v, want %d rows position-deleted and equality deletes", st, len(byPos))
	}
	return it
}

// commitEqualityDeletes deletes the rows of ids by an equality delete on
// column id.
func commitEqualityDeletes(t *testing.T, tbl *table.Table, ids []int64) {
	t.Helper()
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(ids, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	var recs iter.Seq2[arrow.RecordBatch, error] = func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	tx := tbl.NewTransaction()
	if err := tx.CommitEqualityDeletes(ctx, []int{1}, recs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

type taken struct {
	split int
	ids   []int64
}

// consume takes up to limit batches (all if limit < 0), noting the split
// each came from (the one whose cursor moved).
func consume(t *testing.T, ds *stream.Dataset, limit int) ([]taken, stream.State) {
	t.Helper()
	var out []taken
	prev := ds.StateDict()
	if limit == 0 {
		return nil, prev
	}
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		st := ds.StateDict()
		moved := -1
		for s := range st.Cursors {
			if st.Cursors[s] != prev.Cursors[s] {
				moved = s
			}
		}
		prev = st
		// The stream releases the batch when the loop body returns.
		out = append(out, taken{moved, slices.Clone(b.Column(0).(*array.Int64).Int64Values())})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, ds.StateDict()
}

func ids(bs []taken) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.ids...)
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	once := vc.NewOnce()
	once.Add(got)
	if err := once.Exactly(want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestInvariantsWithDeletes checks exactly once, elastic determinism at
// world sizes 1 to 8, exact resume and merged resume on a table with both
// kinds of deletes.
func TestInvariantsWithDeletes(t *testing.T) {
	tbl, want := deletesTable(t, 6000)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the datasets' own cleanups close them
	opts := func(splits, world, rank int) stream.Options {
		return stream.Options{Plan: tbl.Plan, Columns: []string{"id"}, BatchSize: 64, Shuffle: true, Seed: 5, Epoch: 1,
			ShuffleWindow: 1024, NumSplits: splits, WorldSize: world, Rank: rank, Allocator: mem}
	}
	openDS := func(o stream.Options) *stream.Dataset {
		ds, err := stream.Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	// Elastic determinism: each split delivers the same sequence whatever
	// the world size; together the ranks deliver every row once.
	for _, splits := range []int{8, 6, 5, 7} {
		vc.Elastic(t, splits, vc.Divisors(splits, splits), want, func(world, rank int) map[int][]int64 {
			bs, _ := consume(t, openDS(opts(splits, world, rank)), -1)
			got := map[int][]int64{}
			for _, b := range bs {
				got[b.split] = append(got[b.split], b.ids...)
			}
			return got
		})
	}
	// Exact resume: a stream stopped after some batches and resumed from
	// its state delivers what an unbroken one does.
	full, _ := consume(t, openDS(opts(4, 1, 0)), -1)
	head, st := consume(t, openDS(opts(4, 1, 0)), 17)
	resumed := openDS(opts(4, 1, 0))
	if err := resumed.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	tail, _ := consume(t, resumed, -1)
	if !slices.Equal(ids(append(head, tail...)), ids(full)) {
		t.Fatal("resumed stream differs from the unbroken one")
	}
	// Merge: four ranks stop, their states merge, two ranks finish.
	var states []checkpoint.State
	var done []int64
	for rank := range 4 {
		bs, st := consume(t, openDS(opts(4, 4, rank)), 3+rank)
		done = append(done, ids(bs)...)
		states = append(states, st)
	}
	merged, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		ds := openDS(opts(4, 2, rank))
		if err := ds.LoadStateDict(merged); err != nil {
			t.Fatal(err)
		}
		bs, _ := consume(t, ds, -1)
		done = append(done, ids(bs)...)
	}
	sameIDs(t, "merged resume", done, want)
}

// TestPlanCache plans a snapshot once: a second Open takes the plan,
// masks included, from the cache and streams the same rows; a damaged
// entry is a miss.
func TestPlanCache(t *testing.T) {
	db, warehouse := openSQLite(t)
	h := buildHistory(t, db, sqlcat.SQLite, warehouse)
	ctx := context.Background()
	cache := &formats.MemoryCache{}
	var rows [][]string
	for i := range 3 {
		if i == 2 {
			for _, k := range cache.Keys() {
				if strings.HasPrefix(k, "sluice-iceberg-plan") {
					cache.Set(ctx, []byte(k), []byte("not a plan"))
				}
			}
		}
		tbl, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{SnapshotID: h.snaps[3], Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tbl.Stats().FromCache, i == 1; got != want {
			t.Errorf("open %d: from cache %t, want %t", i, got, want)
		}
		if tbl.Stats().PositionDeleted != 25 {
			t.Errorf("open %d: %d rows position-deleted, want 25", i, tbl.Stats().PositionDeleted)
		}
		var stats atomic.Int64
		so := storage.Options{Wrap: func(b storage.Bucket) storage.Bucket { return &statCounting{Bucket: b, n: &stats} }}
		rows = append(rows, streamRows(t, stream.Options{Plan: tbl.Plan, PlanCache: cache, Storage: so}))
		tbl.Close()
		// The data files' sizes and times are kept with the plan: a plan
		// from the cache asks the store nothing of them (the damaged
		// entries of the third open include them).
		if n := stats.Load(); (n == 0) != (i == 1) {
			t.Errorf("plan %d stat the data files %d times", i, n)
		}
	}
	sameRows(t, "from the cache", rows[1], rows[0])
	sameRows(t, "after a damaged entry", rows[2], rows[0])
}

// statCounting counts the stats of Parquet files.
type statCounting struct {
	storage.Bucket
	n *atomic.Int64
}

func (b *statCounting) Stat(ctx context.Context, key string) (storage.Object, error) {
	if strings.HasSuffix(key, ".parquet") {
		b.n.Add(1)
	}
	return b.Bucket.Stat(ctx, key)
}

// TestEqualBatchesWithDeletes: equality deletes hide the counts, which
// stream.Options.EqualBatches counts at Open; every rank then takes as
// many batches, at the start and after a merged resume on another world
// size, and no row comes twice.
func TestEqualBatchesWithDeletes(t *testing.T) {
	tbl, want := deletesTable(t, 6000)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	open := func(world, rank int) *stream.Dataset {
		ds, err := stream.Open(context.Background(), stream.Options{Plan: tbl.Plan, Columns: []string{"id"}, BatchSize: 50, Shuffle: true, Seed: 5,
			ShuffleWindow: 1024, NumSplits: 6, WorldSize: world, Rank: rank, EqualBatches: true, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	var states []checkpoint.State
	var done []int64
	for rank := range 3 {
		bs, st := consume(t, open(3, rank), 5)
		done = append(done, ids(bs)...)
		states = append(states, st)
	}
	merged, err := checkpoint.Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]bool{}
	for rank := range 2 {
		ds := open(2, rank)
		if err := ds.LoadStateDict(merged); err != nil {
			t.Fatal(err)
		}
		bs, _ := consume(t, ds, -1)
		counts[len(bs)] = true
		done = append(done, ids(bs)...)
	}
	if len(counts) != 1 {
		t.Fatalf("ranks resumed at world size 2 take %v batches", counts)
	}
	slices.Sort(done)
	if len(slices.Compact(slices.Clone(done))) != len(done) {
		t.Fatal("a row came twice")
	}
	for _, id := range done {
		if _, ok := slices.BinarySearch(want, id); !ok {
			t.Fatalf("id %d is deleted", id)
		}
	}
	if len(done) < len(want)-6*50 {
		t.Fatalf("%d of %d rows: more dropped than the ranks' rests can differ by", len(done), len(want))
	}
}
