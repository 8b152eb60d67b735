package iceberg_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// hiddenFilter is a row filter that cannot judge statistics: the unpruned
// run of the same predicate.
type hiddenFilter struct{ formats.Filter }

// A row filter on a partition source column skips the data files whose
// partition (identity, bucket, day, truncate) or column bounds rule it
// out: fewer files are read, and the rows are those of the same filter
// over every file, and those the predicate gives over the data written.
func TestPrunePartitions(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "cat", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 3, Name: "ts", Type: ice.PrimitiveTypes.Timestamp},
		ice.NestedField{ID: 4, Name: "n", Type: ice.PrimitiveTypes.Int32},
	)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const rows = 200
	row := func(i int) (id int64, c string, ts time.Time, n int32) {
		return int64(i), fmt.Sprintf("c%d", i%5), base.Add(time.Duration(i) * time.Hour), int32(i % 100)
	}
	for _, c := range []struct {
		name      string
		source    int
		transform ice.Transform
		filter    string
		keep      func(i int) bool
		files     int // data files of the table
		read      int // those the filter leaves
	}{
		{"identity", 2, ice.IdentityTransform{}, "cat = 'c3'", func(i int) bool { return i%5 == 3 }, 5, 1},
		{"bucket", 1, ice.BucketTransform{NumBuckets: 4}, "id = 17", func(i int) bool { return i == 17 }, 4, 1},
		{"day", 3, ice.DayTransform{}, "ts >= TIMESTAMP '2024-01-08 00:00:00Z'", func(i int) bool { return i >= 7*24 }, 9, 2},
		{"truncate", 4, ice.TruncateTransform{Width: 10}, "n BETWEEN 20 AND 29", func(i int) bool { return i%100 >= 20 && i%100 <= 29 }, 10, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := ice.NewPartitionSpec(ice.PartitionField{SourceIDs: []int{c.source}, FieldID: 1000, Name: "p", Transform: c.transform})
			ident := table.Identifier{"ns", c.name}
			tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithPartitionSpec(&spec), catalog.WithProperties(ice.Properties{"format-version": "2"}))
			if err != nil {
				t.Fatal(err)
			}
			as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
			if err != nil {
				t.Fatal(err)
			}
			b := array.NewRecordBuilder(memory.DefaultAllocator, as)
			var want []string
			for i := range rows {
				id, cv, ts, n := row(i)
				b.Field(0).(*array.Int64Builder).Append(id)
				b.Field(1).(*array.StringBuilder).Append(cv)
				b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
				b.Field(3).(*array.Int32Builder).Append(n)
				if c.keep(i) {
					want = append(want, fmt.Sprint(id))
				}
			}
			rec := b.NewRecordBatch()
			b.Release()
			data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
			rec.Release()
			if _, err = tbl.AppendTable(ctx, data, rows, nil); err != nil {
				t.Fatal(err)
			}
			data.Release()
			it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			if n := it.Stats().DataFiles; n != c.files {
				t.Fatalf("the table has %d data files, want %d", n, c.files)
			}
			pruned, readPruned := filteredIDs(t, it.Plan, c.filter)
			full, readFull := filteredIDs(t, func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error) {
				po.Filter = hiddenFilter{po.Filter}
				return it.Plan(ctx, po)
			}, c.filter)
			slices.Sort(want)
			if !slices.Equal(pruned, want) || !slices.Equal(full, want) {
				t.Fatalf("ids %v (pruned), %v (every file), want %v", pruned, full, want)
			}
			if readFull != c.files || readPruned != c.read {
				t.Fatalf("read %d data files pruned, %d unpruned; want %d and %d", readPruned, readFull, c.read, c.files)
			}
		})
	}
}

// filteredIDs streams the ids planned by plan with flt, and counts the
// data files read.
func filteredIDs(t *testing.T, plan func(context.Context, formats.PlanOptions) (*formats.Scan, error), flt string) ([]string, int) {
	t.Helper()
	var mu sync.Mutex
	read := map[string]bool{}
	so := storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		c := storage.NewCounting(b)
		c.OnRead = func(key string, _ int64, _ int) {
			if strings.Contains(key, "/data/") {
				mu.Lock()
				read[key] = true
				mu.Unlock()
			}
		}
		return c
	}}
	ids := streamRows(t, stream.Options{Plan: plan, Columns: []string{"id"}, Filter: flt, Storage: so})
	slices.Sort(ids)
	return ids, len(read)
}
