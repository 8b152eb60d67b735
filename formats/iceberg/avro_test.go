package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/formats/parquet"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/stream"
)

// The Avro schemas Iceberg's writers give data and delete files: field
// ids on every field, optional fields as unions with null.
const (
	avroDataSchema = `{"type": "record", "name": "r", "fields": [
		{"name": "id", "type": "long", "field-id": 1},
		{"name": "x", "type": ["null", "double"], "default": null, "field-id": 2},
		{"name": "name", "type": ["null", "string"], "default": null, "field-id": 3},
		{"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true}], "default": null, "field-id": 4},
		{"name": "st", "type": ["null", {"type": "record", "name": "r5", "fields": [{"name": "a", "type": ["null", "int"], "default": null, "field-id": 6}]}], "default": null, "field-id": 5},
		{"name": "tags", "type": ["null", {"type": "array", "items": "string", "element-id": 8}], "default": null, "field-id": 7},
		{"name": "u", "type": ["null", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}], "default": null, "field-id": 9}
	]}`
	avroPosDeleteSchema = `{"type": "record", "name": "pos", "fields": [
		{"name": "file_path", "type": "string", "field-id": 2147483546},
		{"name": "pos", "type": "long", "field-id": 2147483545}
	]}`
	avroEqDeleteSchema = `{"type": "record", "name": "eq", "fields": [{"name": "id", "type": "long", "field-id": 1}]}`
)

func avroDataRow(id int64) map[string]any {
	row := map[string]any{"id": id, "x": float64(id) / 4, "name": fmt.Sprint("n", id), "ts": time.UnixMicro(id * 1_000_003).UTC(),
		"st": map[string]any{"a": int32(id % 1000)}, "tags": []any{fmt.Sprint(id % 3), "t"},
		"u": [16]byte{byte(id >> 8), byte(id), 15: 0xee}}
	if id%11 == 0 {
		row["x"], row["name"], row["st"] = nil, nil, nil
	}
	return row
}

// writeAvro writes rows to a local path with twmb/avro's writer and
// returns its size.
func writeAvro(t *testing.T, path, schema string, rows []map[string]any, opts ...ocf.WriterOpt) int64 {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ocf.NewWriter(f, twmb.MustParse(schema), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return st.Size()
}

// TestAvroDataFiles reads a table whose data files and delete files are
// all Avro: three data files of 1,000 rows (each codec, many blocks),
// ids ≡ 7 (mod 50) deleted by position and ids ≡ 13 (mod 50) by equality,
// then a column renamed and one added. Every row left is read once, with
// its values, under the current names.
func TestAvroDataFiles(t *testing.T) {
	ctx := context.Background()
	cat := sqliteNamespace(t)
	ident := table.Identifier{"ns", "avro"}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "x", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 3, Name: "name", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 4, Name: "ts", Type: ice.PrimitiveTypes.TimestampTz},
		ice.NestedField{ID: 5, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{{ID: 6, Name: "a", Type: ice.PrimitiveTypes.Int32}}}},
		ice.NestedField{ID: 7, Name: "tags", Type: &ice.ListType{ElementID: 8, Element: ice.PrimitiveTypes.String, ElementRequired: true}},
		ice.NestedField{ID: 9, Name: "u", Type: ice.PrimitiveTypes.UUID},
	)
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(ice.Properties{"format-version": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	local := strings.TrimPrefix(tbl.Location(), "file://")
	codecs := []ocf.Codec{nil, ocf.DeflateCodec(1), ocf.SnappyCodec()}
	var dataFiles []ice.DataFile
	var posRows []map[string]any
	var eqRows []map[string]any
	var left []int64
	for f, codec := range codecs {
		loc := fmt.Sprintf("%s/data/part-%d.avro", tbl.Location(), f)
		var rows []map[string]any
		for pos := range int64(1000) {
			id := int64(f)*1000 + pos
			rows = append(rows, avroDataRow(id))
			switch id % 50 {
			case 7:
				posRows = append(posRows, map[string]any{"file_path": loc, "pos": pos})
			case 13:
				eqRows = append(eqRows, map[string]any{"id": id})
			default:
				left = append(left, id)
			}
		}
		opts := []ocf.WriterOpt{ocf.WithBlockCount(64)}
		if codec != nil {
			opts = append(opts, ocf.WithCodec(codec))
		}
		size := writeAvro(t, filepath.Join(local, "data", fmt.Sprintf("part-%d.avro", f)), avroDataSchema, rows, opts...)
		dataFiles = append(dataFiles, avroFile(t, tbl, ice.EntryContentData, loc, 1000, size, nil))
	}
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddRows(dataFiles...).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	posLoc, eqLoc := tbl.Location()+"/data/pos-deletes.avro", tbl.Location()+"/data/eq-deletes.avro"
	posSize := writeAvro(t, filepath.Join(local, "data", "pos-deletes.avro"), avroPosDeleteSchema, posRows, ocf.WithBlockCount(10))
	eqSize := writeAvro(t, filepath.Join(local, "data", "eq-deletes.avro"), avroEqDeleteSchema, eqRows)
	tx = tbl.NewTransaction()
	err = tx.NewRowDelta(nil).AddDeletes(
		avroFile(t, tbl, ice.EntryContentPosDeletes, posLoc, int64(len(posRows)), posSize, nil),
		avroFile(t, tbl, ice.EntryContentEqDeletes, eqLoc, int64(len(eqRows)), eqSize, []int{1}),
	).Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Schema evolution: x renamed (the files still call it x: read by
	// field id), a column added (null in every file).
	tx = tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).RenameColumn([]string{"x"}, "x2").AddColumn([]string{"added"}, ice.PrimitiveTypes.Int32, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Units of a few blocks, so that reads cut files.
	it, err := iceberg.OpenCatalog(ctx, cat, ident, iceberg.Options{Formats: []formats.Format{parquet.Format{}, avro.Format{UnitBytes: 8 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if st := it.Stats(); st.DataFiles != 3 || st.PositionDeleted != int64(len(posRows)) || st.EqualityDeleteFiles != 1 {
		t.Fatalf("planned %+v, want 3 data files, %d rows deleted by position and an equality delete file", st, len(posRows))
	}
	ds, err := it.Plan(ctx, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if got := strings.Join(ds.Columns, ","); got != "id,x2,name,ts,st,tags,u,added" {
		t.Fatalf("columns %s", got)
	}
	for _, f := range ds.Fragments {
		if f.Format != "avro" {
			t.Fatalf("%s read by %s", f.URL, f.Format)
		}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var ids []int64
	for i, f := range ds.Fragments {
		if f.Rows >= 0 || len(f.Units) < 3 {
			t.Fatalf("%s: %d rows in %d units, want unknown counts (equality deletes) and several units", f.URL, f.Rows, len(f.Units))
		}
		for u := range f.Units {
			err := ds.Read(ctx, i, formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}, 100, mem, func(b arrow.RecordBatch) error {
				defer b.Release()
				for r := range int(b.NumRows()) {
					id := b.Column(0).(*array.Int64).Value(r)
					ids = append(ids, id)
					if got, want := avroRowText(b, r), avroRowWant(id); got != want {
						return fmt.Errorf("id %d: got %s, want %s", id, got, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, left) {
		t.Fatalf("read %d ids, want the %d left (first %v)", len(ids), len(left), ids[:min(len(ids), 10)])
	}
	// The stream over the table: each split the same rows whatever the
	// world size, every row left once.
	vc.Elastic(t, 4, []int{1, 2, 4}, left, func(world, rank int) map[int][]int64 {
		ds, err := stream.Open(ctx, stream.Options{Plan: it.Plan, Columns: []string{"id"}, BatchSize: 50, Shuffle: true, Seed: 3,
			ShuffleWindow: 300, NumSplits: 4, WorldSize: world, Rank: rank, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		bs, _ := consume(t, ds, -1)
		got := map[int][]int64{}
		for _, b := range bs {
			got[b.split] = append(got[b.split], b.ids...)
		}
		return got
	})
}

func avroFile(t *testing.T, tbl *table.Table, content ice.ManifestEntryContent, loc string, rows, size int64, eqIDs []int) ice.DataFile {
	t.Helper()
	b, err := ice.NewDataFileBuilder(tbl.Spec(), content, loc, ice.AvroFile, nil, nil, nil, rows, size)
	if err != nil {
		t.Fatal(err)
	}
	if eqIDs != nil {
		b = b.EqualityFieldIDs(eqIDs)
	}
	return b.Build()
}

func avroRowText(b arrow.RecordBatch, r int) string {
	var parts []string
	for _, c := range b.Columns() {
		if c.IsNull(r) {
			parts = append(parts, "null")
			continue
		}
		parts = append(parts, c.ValueStr(r))
	}
	return strings.Join(parts, "|")
}

func avroRowWant(id int64) string {
	ts := time.UnixMicro(id * 1_000_003).UTC().Format("2006-01-02T15:04:05.999999Z")
	tags := fmt.Sprintf(`["%d","t"]`, id%3)
	u := fmt.Sprintf("%02x%02x0000-0000-0000-0000-0000000000ee", byte(id>>8), byte(id))
	if id%11 == 0 {
		return fmt.Sprintf("%d|null|null|%s|null|%s|%s|null", id, ts, tags, u)
	}
	return fmt.Sprintf(`%d|%v|n%d|%s|{"a":%d}|%s|%s|null`, id, float64(id)/4, id, ts, id%1000, tags, u)
}
