package iceberg_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/variant"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// variantRows are the variants the Trino-style files hold, as JSON; "" is
// a null variant.
var variantRows = []string{`{"a":1,"b":"x"}`, `42`, ``, `"text"`, `[1,2,{"c":null}]`, `true`, `{"nested":{"d":2.5}}`}

// plainVariantTable builds a v3 table with a variant column whose one
// data file stores it as Trino does: a plain struct of two binary fields
// without the VARIANT annotation. fields names the struct's fields and
// their types as the file writes them.
func plainVariantTable(t *testing.T, fields []arrow.Field) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat, err := sqlcat.NewCatalog("sluice", db, sqlcat.SQLite, ice.Properties{"warehouse": "file://" + filepath.Join(dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateSQLTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	// The table is created with the file's struct, so that iceberg-go's
	// AddFiles takes the file; its metadata is then rewritten to say
	// variant, as the table Trino wrote says.
	ident := table.Identifier{"ns", "trino"}
	structFields := make([]ice.NestedField, len(fields))
	for i, f := range fields {
		typ := map[arrow.Type]ice.Type{arrow.BINARY: ice.PrimitiveTypes.Binary, arrow.STRING: ice.PrimitiveTypes.String, arrow.INT64: ice.PrimitiveTypes.Int64}[f.Type.ID()]
		structFields[i] = ice.NestedField{ID: 3 + i, Name: f.Name, Type: typ, Required: true}
	}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "v", Type: &ice.StructType{FieldList: structFields}},
	)
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(ice.Properties{"format-version": "3"}))
	if err != nil {
		t.Fatal(err)
	}

	id := func(n int) arrow.Metadata {
		return arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(n)})
	}
	for i := range fields {
		fields[i].Metadata = id(3 + i)
	}
	vt := arrow.StructOf(fields...)
	as := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: id(1)},
		{Name: "v", Type: vt, Nullable: true, Metadata: id(2)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	sb := b.Field(1).(*array.StructBuilder)
	for i, js := range variantRows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if js == "" {
			sb.AppendNull() // and a null in each field
			continue
		}
		v, err := variant.ParseJSON(js, false)
		if err != nil {
			t.Fatal(err)
		}
		sb.Append(true)
		for f, bs := range [][]byte{v.Metadata().Bytes(), v.Bytes()} {
			if f >= vt.NumFields() {
				break
			}
			switch fb := sb.FieldBuilder(f).(type) {
			case *array.BinaryBuilder:
				fb.Append(bs)
			case *array.StringBuilder:
				fb.Append(string(bs))
			default:
				fb.AppendNull()
			}
		}
		for f := 2; f < vt.NumFields(); f++ {
			sb.FieldBuilder(f).AppendNull()
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	dataDir := filepath.Join(dir, "warehouse", "ns", "trino", "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dataDir, "trino-0.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(as, f, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(ctx, []string{"file://" + path}, nil, false); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return asVariant(t, tbl.MetadataLocation())
}

// asVariant writes the next metadata file of the table at loc, its column
// v typed variant, and returns its location.
func asVariant(t *testing.T, loc string) string {
	t.Helper()
	b, err := os.ReadFile(strings.TrimPrefix(loc, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	for _, s := range meta["schemas"].([]any) {
		for _, f := range s.(map[string]any)["fields"].([]any) {
			if f := f.(map[string]any); f["name"] == "v" {
				f["type"] = "variant"
			}
		}
	}
	if b, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(filepath.Dir(strings.TrimPrefix(loc, "file://")), "v99.metadata.json")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + out
}

// TestTrinoVariant reads a variant column that the data file stores as a
// plain struct<metadata: binary, value: binary>: the table says variant,
// so it reads as the Parquet driver reads an annotated VARIANT, Arrow's
// variant extension type, value for value.
func TestTrinoVariant(t *testing.T) {
	ctx := context.Background()
	loc := plainVariantTable(t, []arrow.Field{
		{Name: "metadata", Type: arrow.BinaryTypes.Binary},
		{Name: "value", Type: arrow.BinaryTypes.Binary},
	})
	tbl, err := iceberg.Open(ctx, loc, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if _, ok := tbl.Schema().Field(1).Type.(*extensions.VariantType); !ok {
		t.Fatalf("the table's column v is %s, want the variant extension type", tbl.Schema().Field(1).Type)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ds, err := stream.Open(ctx, stream.Options{Plan: tbl.Plan, Allocator: mem, BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	got := map[int64]string{}
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		ids := b.Column(0).(*array.Int64)
		va, ok := b.Column(1).(*extensions.VariantArray)
		if !ok {
			b.Release()
			t.Fatalf("column v reads as %T (%s), want *extensions.VariantArray", b.Column(1), b.Column(1).DataType())
		}
		for i := range va.Len() {
			if va.IsNull(i) {
				got[ids.Value(i)] = ""
				continue
			}
			v, err := va.Value(i)
			if err != nil {
				b.Release()
				t.Fatalf("row %d: %v", ids.Value(i), err)
			}
			js, err := v.MarshalJSON()
			if err != nil {
				b.Release()
				t.Fatal(err)
			}
			got[ids.Value(i)] = string(js)
		}
		b.Release()
	}
	if len(got) != len(variantRows) {
		t.Fatalf("%d rows, want %d", len(got), len(variantRows))
	}
	for i, js := range variantRows {
		want := ""
		if js != "" {
			v, err := variant.ParseJSON(js, false)
			if err != nil {
				t.Fatal(err)
			}
			b, err := v.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			want = string(b)
		}
		if got[int64(i)] != want {
			t.Errorf("row %d: %q, want %q", i, got[int64(i)], want)
		}
	}
}

// TestTrinoVariantMisfit refuses a file whose struct is not a variant's,
// naming the column and what does not fit.
func TestTrinoVariantMisfit(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields []arrow.Field
		want   string
	}{
		{"names", []arrow.Field{{Name: "meta", Type: arrow.BinaryTypes.Binary}, {Name: "val", Type: arrow.BinaryTypes.Binary}}, `"metadata"`},
		{"types", []arrow.Field{{Name: "metadata", Type: arrow.BinaryTypes.Binary}, {Name: "value", Type: arrow.PrimitiveTypes.Int64}}, `"value"`},
		{"extra", []arrow.Field{{Name: "metadata", Type: arrow.BinaryTypes.Binary}, {Name: "value", Type: arrow.BinaryTypes.Binary}, {Name: "typed_value", Type: arrow.PrimitiveTypes.Int64}}, `typed_value`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			tbl, err := iceberg.Open(ctx, plainVariantTable(t, c.fields), iceberg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			err = readAll(ctx, tbl)
			if err == nil {
				t.Fatal("read a variant from a struct that is not one")
			}
			msg := err.Error()
			for _, w := range []string{"trino-0.parquet", "variant", c.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %s", msg, w)
				}
			}
		})
	}
}

func readAll(ctx context.Context, tbl *iceberg.Table) error {
	ds, err := stream.Open(ctx, stream.Options{Plan: tbl.Plan})
	if err != nil {
		return err
	}
	defer ds.Close()
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return err
		}
		b.Release()
	}
	return nil
}
