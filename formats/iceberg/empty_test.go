package iceberg_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// noSnapshot is the metadata of a table created and never written, as a
// catalog leaves it: a schema, no snapshot.
const noSnapshot = `{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location": "LOCATION", "last-sequence-number": 0, "last-updated-ms": 1700000000000, "last-column-id": 2,
  "current-schema-id": 0, "schemas": [{"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": true, "type": "long"},
    {"id": 2, "name": "x", "required": false, "type": "double"}]}],
  "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
  "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
  "current-snapshot-id": -1, "snapshots": []}`

// A table without a snapshot, one whose snapshot holds no data file, and
// one whose files a filter rules out all stream no rows, every epoch, on
// every rank, shuffled or not. The first was refused at Open ("the table
// has no snapshot", exit 3 in the CLI), the others at planning.
func TestEmptyTables(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "x", Type: ice.PrimitiveTypes.Float64},
	)
	create := func(name string) *table.Table {
		tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", name}, schema)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	write := func(tbl *table.Table) *table.Table {
		as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		defer b.Release()
		for i := range 100 {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(float64(i))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
		defer data.Release()
		tbl, err = tbl.AppendTable(ctx, data, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}

	create("never_written")
	deleted := write(create("all_deleted"))
	if _, err := deleted.Delete(ctx, ice.AlwaysTrue{}, nil); err != nil {
		t.Fatal(err)
	}
	write(create("filtered"))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "metadata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata", "v1.metadata.json"), []byte(strings.ReplaceAll(noSnapshot, "LOCATION", dir)), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, filter string
		open         func() (*iceberg.Table, error)
		snapshot     bool
	}{
		{"never written, by catalog", "", func() (*iceberg.Table, error) {
			return iceberg.OpenCatalog(ctx, cat, table.Identifier{"ns", "never_written"}, iceberg.Options{})
		}, false},
		{"never written, by metadata file", "", func() (*iceberg.Table, error) { return iceberg.Open(ctx, dir, iceberg.Options{}) }, false},
		{"every row deleted", "", func() (*iceberg.Table, error) {
			return iceberg.OpenCatalog(ctx, cat, table.Identifier{"ns", "all_deleted"}, iceberg.Options{})
		}, true},
		{"a filter no file can match", "id > 1000", func() (*iceberg.Table, error) {
			return iceberg.OpenCatalog(ctx, cat, table.Identifier{"ns", "filtered"}, iceberg.Options{})
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tbl, err := c.open()
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			if tbl.HasSnapshot() != c.snapshot || (!c.snapshot && tbl.SnapshotID() != 0) || (c.filter == "") != (tbl.Stats().DataFiles == 0) {
				t.Fatalf("snapshot %v (id %d), %+v", tbl.HasSnapshot(), tbl.SnapshotID(), tbl.Stats())
			}
			for _, o := range []stream.Options{
				{},
				{Shuffle: true, Seed: 3},
				{NumSplits: 4, WorldSize: 2, Rank: 1, Shuffle: true},
			} {
				o.Plan, o.Filter = tbl.Plan, c.filter
				ds, err := stream.Open(ctx, o)
				if err != nil {
					t.Fatalf("%+v: %v", o, err)
				}
				if got := ds.Schema().Field(0).Name; got != "id" || ds.Schema().NumFields() != 2 {
					t.Fatalf("schema %v", ds.Schema())
				}
				if n := len(ds.Files()); n != 0 {
					t.Fatalf("%d files planned", n) // the filter's bounds rule the one file out
				}
				for epoch := range 3 {
					for b, err := range ds.Batches(ctx) {
						if err != nil {
							t.Fatalf("epoch %d: %v", epoch, err)
						}
						t.Fatalf("epoch %d: a batch of %d rows", epoch, b.NumRows())
					}
				}
				if ds.Epoch() != 3 {
					t.Fatalf("at epoch %d after three", ds.Epoch())
				}
				ds.Close()
			}
		})
	}
}
