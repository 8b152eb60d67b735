package iceberg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	sluiceparquet "github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
	"github.com/sluicedata/sluice/stream"
)

// migratedColumns are the columns of the migrated table, as the table
// names them now.
var migratedColumns = []string{"id", "i32", "unit", "b", "text", "tag", "region", "bucket", "day", "mpi", "nest", "lstst"}

// migratedSchema is the migrated table's schema: valuecheck's columns of
// those names, by field id.
func migratedSchema() *ice.Schema {
	return ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "i32", Type: ice.PrimitiveTypes.Int32},
		ice.NestedField{ID: 3, Name: "unit", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 4, Name: "b", Type: ice.PrimitiveTypes.Bool},
		ice.NestedField{ID: 5, Name: "text", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 6, Name: "tag", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 7, Name: "region", Type: ice.PrimitiveTypes.String},
		ice.NestedField{ID: 8, Name: "bucket", Type: ice.PrimitiveTypes.Int32},
		ice.NestedField{ID: 9, Name: "day", Type: ice.PrimitiveTypes.Date},
		ice.NestedField{ID: 10, Name: "mpi", Type: &ice.MapType{KeyID: 11, KeyType: ice.PrimitiveTypes.Int32, ValueID: 12, ValueType: ice.PrimitiveTypes.Int64}},
		ice.NestedField{ID: 13, Name: "nest", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 14, Name: "x", Type: ice.PrimitiveTypes.Int64},
			{ID: 15, Name: "inner", Type: &ice.StructType{FieldList: []ice.NestedField{
				{ID: 16, Name: "a", Type: ice.PrimitiveTypes.Int32},
				{ID: 17, Name: "s", Type: ice.PrimitiveTypes.String},
			}}},
		}}},
		ice.NestedField{ID: 18, Name: "lstst", Type: &ice.ListType{ElementID: 19, Element: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 20, Name: "k", Type: ice.PrimitiveTypes.Int32},
			{ID: 21, Name: "v", Type: ice.PrimitiveTypes.String},
		}}}},
	)
}

// hiveNames are the names the Hive files give fields the table has since
// renamed, by field id: the table's name mapping lists both.
var hiveNames = map[int]string{3: "u", 15: "in", 17: "str", 21: "val"}

// migratedFile is one data file of the migrated table: ids [from, from+n)
// in a format, written by Hive (no field ids, the old names, without the
// columns of its spec's identity partitions) or by an Iceberg writer
// (field ids, every column).
type migratedFile struct {
	from, n int64
	orc     bool
	hive    bool
	spec    int
}

// migratedTable writes a table as one migrated from Hive and written on
// by Iceberg, and returns its metadata location. Spec 0 partitions by
// identity(region) and identity(bucket); Hive's files under it hold
// neither column, and rename four fields (one top-level, three nested)
// that the name mapping lists under both names. Spec 1 drops region and
// adds identity(day): a Hive file added under it lacks bucket and day but
// holds region. The Iceberg writer's files hold every column. Each file
// holds ids of one block of valuecheck.Block, so one value of each
// partition column; region is null on a block. Ids ≡ 7 (mod 50) are
// deleted by position, in an ORC delete file.
func migratedTable(t *testing.T) (string, int64) {
	t.Helper()
	ctx := context.Background()
	cat := sqliteNamespace(t)
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "migrated"}, migratedSchema(),
		catalog.WithPartitionSpec(ptr(ice.NewPartitionSpec(
			ice.PartitionField{SourceIDs: []int{7}, FieldID: 1000, Name: "region", Transform: ice.IdentityTransform{}},
			ice.PartitionField{SourceIDs: []int{8}, FieldID: 1001, Name: "bucket", Transform: ice.IdentityTransform{}},
		))),
		catalog.WithProperties(ice.Properties{"format-version": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	mapping := tbl.Schema().NameMapping()
	addNames(mapping, hiveNames)
	js, err := json.Marshal(mapping)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(ice.Properties{"schema.name-mapping.default": string(js)}); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	spec0 := tbl.Spec()
	const block = vc.Block
	files := []migratedFile{
		{from: 0, n: 600, hive: true}, {from: 600, n: 400, hive: true, orc: true},
		{from: 1 * block, n: block, hive: true, orc: true},
		{from: 2 * block, n: 700, hive: true}, {from: 2*block + 700, n: 300, hive: true, orc: true},
		{from: 3 * block, n: 500, hive: true}, // region null
	}
	add := func(spec ice.PartitionSpec, fs []migratedFile) {
		var data, deletes []ice.DataFile
		for _, f := range fs {
			df, del := writeMigrated(t, tbl, spec, f)
			data, deletes = append(data, df), append(deletes, del)
		}
		tx := tbl.NewTransaction()
		if err := tx.AddDataFiles(ctx, data, nil); err != nil {
			t.Fatal(err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		tx = tbl.NewTransaction()
		if err := tx.NewRowDelta(nil).AddDeletes(deletes...).Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	add(spec0, files)
	tx = tbl.NewTransaction()
	if err := tx.UpdateSpec(true).RemoveField("region").AddIdentity("day").Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	spec1 := tbl.Spec()
	if spec1.ID() == spec0.ID() {
		t.Fatal("the spec did not evolve")
	}
	more := []migratedFile{
		{from: 3*block + 500, n: 500, hive: true, spec: 1},
		{from: 4 * block, n: block, spec: 1},
		{from: 5 * block, n: 800, orc: true, spec: 1}, {from: 5*block + 800, n: 200, spec: 1},
	}
	add(spec1, more)
	var rows int64
	for _, f := range append(files, more...) {
		rows += f.n
	}
	return tbl.MetadataLocation(), rows
}

// writeMigrated writes data file f of the migrated table under spec, and
// an ORC position delete file of its ids ≡ 7 (mod 50), in its partition.
func writeMigrated(t *testing.T, tbl *table.Table, spec ice.PartitionSpec, f migratedFile) (data, deletes ice.DataFile) {
	t.Helper()
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	part := map[int]any{}
	inPartition := map[string]bool{}
	for _, pf := range spec.Fields() {
		src, _ := tbl.Schema().FindFieldByID(pf.SourceID())
		inPartition[src.Name] = true
		c, _ := vc.ByName(src.Name)
		switch v := c.Value(f.from).(type) {
		case nil:
			part[pf.FieldID] = nil
		case string:
			part[pf.FieldID] = v
		case int64:
			part[pf.FieldID] = int32(v)
		case arrow.Date32:
			part[pf.FieldID] = ice.Date(v)
		default:
			t.Fatalf("partition value %v (%T)", v, v)
		}
	}
	var want, file []arrow.Field
	for _, fl := range as.Fields() {
		if f.hive && inPartition[fl.Name] {
			continue // Hive keeps partition columns in the path
		}
		want = append(want, fl)
		switch {
		case f.hive:
			file = append(file, vc.EditFields(fl, func(fl arrow.Field) arrow.Field {
				v, _ := fl.Metadata.GetValue("PARQUET:field_id")
				if id, err := strconv.Atoi(v); err == nil && hiveNames[id] != "" {
					fl.Name = hiveNames[id]
				}
				fl.Metadata = arrow.Metadata{}
				return fl
			}))
		case f.orc:
			// Iceberg's ORC writer: ids as type attributes, here under
			// names the table had when the file was written and the name
			// mapping does not list, so that only the ids find them.
			file = append(file, vc.EditFields(fl, func(fl arrow.Field) arrow.Field {
				v, _ := fl.Metadata.GetValue("PARQUET:field_id")
				if v == "3" || v == "17" {
					fl.Name += "_then"
				}
				fl.Metadata = arrow.NewMetadata([]string{"iceberg.id"}, []string{v})
				return fl
			}))
		default:
			file = append(file, fl)
		}
	}
	rec, err := vc.RecordOf(memory.DefaultAllocator, arrow.NewSchema(want, nil), f.from, f.n)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	fileSchema := arrow.NewSchema(file, nil)
	cols := make([]arrow.Array, len(file))
	for i, c := range rec.Columns() {
		d := relabel(c.Data(), file[i].Type)
		cols[i] = array.MakeFromData(d)
		d.Release()
		defer cols[i].Release()
	}
	out := array.NewRecordBatch(fileSchema, cols, f.n)
	defer out.Release()

	name := fmt.Sprintf("data/spec%d-%d", spec.ID(), f.from)
	format := ice.ParquetFile
	if f.orc {
		name, format = name+".orc", ice.OrcFile
	} else {
		name += ".parquet"
	}
	local := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), name)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	if f.orc {
		ow, err := orcwrite.New(w, fileSchema, orcwrite.Options{StripeRows: 300, RowIndexStride: -1, Compression: orcwrite.Zstd})
		if err == nil {
			if err = ow.Write(out); err == nil {
				err = ow.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	} else {
		pw, err := pqarrow.NewFileWriter(fileSchema, w, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(256)), pqarrow.DefaultWriterProps())
		if err == nil {
			if err = pw.Write(out); err == nil {
				err = pw.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	st, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	loc := tbl.Location() + "/" + name
	b, err := ice.NewDataFileBuilder(spec, ice.EntryContentData, loc, format, part, nil, nil, f.n, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	data = b.Build()

	var paths []string
	var positions []int64
	for id := f.from; id < f.from+f.n; id++ {
		if id%50 == 7 {
			paths, positions = append(paths, loc), append(positions, id-f.from)
		}
	}
	delName := strings.TrimSuffix(name, filepath.Ext(name)) + "-deletes.orc"
	size := writePositionDeletesORC(t, filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), delName), paths, positions)
	b, err = ice.NewDataFileBuilder(spec, ice.EntryContentPosDeletes, tbl.Location()+"/"+delName, ice.OrcFile, part, nil, nil, int64(len(paths)), size)
	if err != nil {
		t.Fatal(err)
	}
	return data, b.Build()
}

// relabel is d as type typ, of the same layout: the same buffers under
// other field names and metadata.
func relabel(d arrow.ArrayData, typ arrow.DataType) arrow.ArrayData {
	var fields []arrow.Field
	if nt, ok := typ.(arrow.NestedType); ok {
		fields = nt.Fields()
	}
	kids := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		kids[i] = relabel(c, fields[i].Type)
		defer kids[i].Release()
	}
	return array.NewData(typ, d.Len(), d.Buffers(), kids, d.NullN(), d.Offset())
}

// writePositionDeletesORC writes a position delete file in ORC and
// returns its size.
func writePositionDeletesORC(t *testing.T, path string, paths []string, positions []int64) int64 {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "file_path", Type: arrow.BinaryTypes.String, Metadata: arrow.NewMetadata([]string{"iceberg.id"}, []string{"2147483546"})},
		{Name: "pos", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"iceberg.id"}, []string{"2147483545"})},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, p := range paths {
		b.Field(0).(*array.StringBuilder).Append(p)
		b.Field(1).(*array.Int64Builder).Append(positions[i])
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := orcwrite.New(f, schema, orcwrite.Options{StripeRows: 5})
	if err == nil {
		if err = w.Write(rec); err == nil {
			err = w.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// addNames adds the names by id to the mapping's fields, at any depth.
func addNames(fields []ice.MappedField, names map[int]string) {
	for i := range fields {
		if n, ok := names[fields[i].ID()]; ok {
			fields[i].Names = append(fields[i].Names, n)
		}
		addNames(fields[i].Fields, names)
	}
}

func ptr[T any](v T) *T { return &v }

// TestMigratedTable reads the migrated table (see migratedTable) value by
// value: partition columns the Hive files do not hold come from their
// files' identity partitions, in the spec each file was written with
// (region from spec 0 after spec 1 dropped it), null where the partition
// value is; fields of files without field ids are found through the name
// mapping at every depth (a map of ints, a struct in a struct, a list of
// structs, renamed fields); ORC files, Iceberg's with field ids too, and
// ORC position deletes are read whatever drivers the caller passed. Then
// a few cases of the value matrix over it.
func TestMigratedTable(t *testing.T) {
	ctx := context.Background()
	loc, rows := migratedTable(t)
	deleted := func(id int64) bool { return id%50 == 7 }
	var want []int64
	for id := range rows {
		if !deleted(id) {
			want = append(want, id)
		}
	}
	// Only a Parquet driver given: the table's ORC data and delete files
	// are read by sluice's ORC driver all the same.
	tbl, err := iceberg.Open(ctx, loc, iceberg.Options{Formats: []formats.Format{sluiceparquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if st := tbl.Stats(); st.DataFiles != 10 || st.PositionDeleteFiles != 10 || st.PositionDeleted != rows-int64(len(want)) {
		t.Fatalf("planned %+v, want 10 data files and 10 position delete files deleting %d rows", st, rows-int64(len(want)))
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	streamChecked(t, stream.Options{Plan: tbl.Plan, Columns: migratedColumns, Formats: []formats.Format{sluiceparquet.Format{}}, BatchSize: 333, Allocator: mem}, want)
	// A filter on a partition column the Hive files lack: pruned by the
	// partitions, and kept or dropped by the values read.
	got, read := filteredIDs(t, tbl.Plan, "region = 'r2' OR bucket = 2")
	var wantF []string
	for _, id := range want {
		if id/vc.Block == 2 || id/vc.Block*7-5 == 2 {
			wantF = append(wantF, strconv.FormatInt(id, 10))
		}
	}
	slices.Sort(wantF)
	if strings.Join(got, ",") != strings.Join(wantF, ",") {
		t.Fatalf("filtered: %d ids, want %d", len(got), len(wantF))
	}
	// Spec 0's files of blocks 0 and 3 are ruled out by their partitions;
	// spec 1's, whose region no partition or statistic tells, are read.
	if read != 7 {
		t.Errorf("the filter read %d data files, want 7", read)
	}

	set := matrix.Set{Datasets: []matrix.Dataset{{
		Name: "iceberg-migrated", Plan: tbl.Plan, Columns: migratedColumns, Rows: rows, Deleted: deleted, Known: true,
	}}}
	// More cases over it run in TestValueMatrixWithDeletes.
	for seed := uint64(1); seed <= 6; seed++ {
		c := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := c.Run(ctx); err != nil {
			t.Fatalf("case seed %d (%s): %v", seed, c, err)
		}
	}
}
