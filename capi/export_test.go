//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// TestSlicedStructsCrossAsTheirRows: batches cut from a window (slices)
// whose columns are structs, structs in structs, lists of structs and
// plain values, exported and imported back through the C data interface
// (arrow-go's importer follows the specification, as pyarrow does: a
// struct's offset applies to its children), hold every value of their
// rows, nulls where the window had them.
func TestSlicedStructsCrossAsTheirRows(t *testing.T) {
	window := nestedWindow(t, 50)
	defer window.Release()
	for _, cut := range [][2]int64{{0, 50}, {0, 7}, {7, 20}, {20, 50}, {49, 50}, {13, 13}} {
		t.Run(fmt.Sprintf("rows_%d_%d", cut[0], cut[1]), func(t *testing.T) {
			slice := window.NewSlice(cut[0], cut[1])
			want := rowsOf(slice)
			var c cdata.CArrowArray
			slice.Retain()
			if err := exportBatch(slice, unsafe.Pointer(&c)); err != nil {
				t.Fatal(err)
			}
			got, err := cdata.ImportCRecordBatchWithSchema(&c, window.Schema())
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if err := validate(got); err != nil {
				t.Fatal(err)
			}
			if g := rowsOf(got); fmt.Sprint(g) != fmt.Sprint(want) {
				t.Fatalf("rows %v cross as\n%v\nwant\n%v", cut, g, want)
			}
			slice.Release()
		})
	}
}

// TestSlicedStructsCrossWithoutACopy: columns without a struct are the
// batch's own arrays; a sliced struct's fields keep their buffers (only
// the struct's validity bitmap is new).
func TestSlicedStructsCrossWithoutACopy(t *testing.T) {
	window := nestedWindow(t, 20)
	defer window.Release()
	slice := window.NewSlice(5, 15)
	defer slice.Release()
	out, err := exportable(slice)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if out.Column(0) != slice.Column(0) {
		t.Error("column id was copied")
	}
	st, was := out.Column(1).(*array.Struct), slice.Column(1).(*array.Struct)
	if st.Data().Offset() != 0 {
		t.Errorf("the struct crosses at offset %d", st.Data().Offset())
	}
	for i := range st.NumField() {
		if got, want := st.Field(i).Data().Buffers()[1], was.Field(i).Data().Buffers()[1]; got != want {
			t.Errorf("field %d of the struct was copied", i)
		}
	}
	whole, err := exportable(window)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Release()
	if whole != window {
		t.Error("a batch without sliced structs was rebuilt")
	}
}

// nestedWindow is n rows of an id, a struct {a int64, s string} with
// nulls at both levels, a struct holding a struct, a list of structs, and
// a struct holding a dense union.
func nestedWindow(t *testing.T, n int) arrow.RecordBatch {
	t.Helper()
	inner := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true})
	union := arrow.DenseUnionOf([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, []arrow.UnionTypeCode{0, 1})
	outer := arrow.StructOf(arrow.Field{Name: "in", Type: inner, Nullable: true},
		arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "st", Type: inner, Nullable: true},
		{Name: "nest", Type: outer, Nullable: true},
		{Name: "ls", Type: arrow.ListOf(inner), Nullable: true},
		{Name: "su", Type: arrow.StructOf(arrow.Field{Name: "u", Type: union}), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	fillInner := func(sb *array.StructBuilder, i int) {
		sb.Append(true)
		if i%3 == 0 {
			sb.FieldBuilder(0).AppendNull()
		} else {
			sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i * 10))
		}
		if i%4 == 1 {
			sb.FieldBuilder(1).AppendNull()
		} else {
			sb.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i))
		}
	}
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		st := b.Field(1).(*array.StructBuilder)
		if i%5 == 2 {
			st.AppendNull()
		} else {
			fillInner(st, i)
		}
		ns := b.Field(2).(*array.StructBuilder)
		if i%7 == 3 {
			ns.AppendNull()
		} else {
			ns.Append(true)
			fillInner(ns.FieldBuilder(0).(*array.StructBuilder), i+1)
			ns.FieldBuilder(1).(*array.Float64Builder).Append(float64(i) / 4)
		}
		lb := b.Field(3).(*array.ListBuilder)
		if i%6 == 5 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for k := range i % 3 {
				fillInner(lb.ValueBuilder().(*array.StructBuilder), i+k)
			}
		}
		su := b.Field(4).(*array.StructBuilder)
		if i%4 == 3 {
			su.AppendNull()
			su.FieldBuilder(0).(*array.DenseUnionBuilder).AppendNull()
		} else {
			su.Append(true)
			ub := su.FieldBuilder(0).(*array.DenseUnionBuilder)
			if i%2 == 0 {
				ub.Append(0)
				ub.Child(0).(*array.Int64Builder).Append(int64(i) * 3)
			} else {
				ub.Append(1)
				ub.Child(1).(*array.StringBuilder).Append(fmt.Sprintf("u%d", i))
			}
		}
	}
	return b.NewRecordBatch()
}

// rowsOf is each row's values as arrow-go prints them, through its own
// readers of a struct's children (which apply the struct's offset).
func rowsOf(b arrow.RecordBatch) []string {
	rows := make([]string, b.NumRows())
	for i := range rows {
		for _, c := range b.Columns() {
			rows[i] += c.ValueStr(i) + " | "
		}
	}
	return rows
}

// validate runs arrow-go's full checks of the columns that have them.
func validate(b arrow.RecordBatch) error {
	for i, c := range b.Columns() {
		v, ok := c.(interface{ ValidateFull() error })
		if !ok {
			continue
		}
		if err := v.ValidateFull(); err != nil {
			return fmt.Errorf("column %s: %w", b.ColumnName(i), err)
		}
	}
	return nil
}

// TestCorpusBatchesCross: every batch of the shared corpus's ORC and
// Parquet files (structs, lists, maps and unions as other tools write
// them), cut at 37 rows so that batches start inside windows, crosses the
// C data interface as sluice_next exports it and is read back, by a
// consumer that follows the specification, with the values it had.
// Files that sluice refuses are other tests' business.
func TestCorpusBatchesCross(t *testing.T) {
	root := corpus.Dir(t)
	var files []string
	for _, pat := range []string{"orc/examples/*.orc", "parquet-testing/data/*.parquet"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 50 {
		t.Fatalf("%d files in the corpus at %s", len(files), root)
	}
	crossed := 0
	for _, f := range files {
		js, _ := json.Marshal(map[string]any{"urls": []string{f}, "batch_size": 37})
		id, err := openDataset(js)
		if err != nil {
			continue
		}
		h, err := lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		// The first few groups: enough to cut windows, and quick on the
		// corpus's million-row files.
		for range 4 {
			g, err := h.nextGroup(64, time.Minute)
			if err != nil || g == nil {
				break
			}
			for _, r := range g.runs {
				if err := crossesWhole(r); err != nil {
					t.Errorf("%s: %v", filepath.Base(f), err)
				}
				crossed++
			}
			g.release()
		}
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
	}
	if crossed < 100 {
		t.Fatalf("only %d runs crossed", crossed)
	}
}

// crossesWhole exports b as sluice_next does, imports it back and
// compares every value.
func crossesWhole(b arrow.RecordBatch) error {
	want := rowsOf(b)
	var c cdata.CArrowArray
	b.Retain()
	if err := exportBatch(b, unsafe.Pointer(&c)); err != nil {
		return err
	}
	got, err := cdata.ImportCRecordBatchWithSchema(&c, b.Schema())
	if err != nil {
		return err
	}
	defer got.Release()
	if err := validate(got); err != nil {
		return err
	}
	if g := rowsOf(got); !slices.Equal(g, want) {
		for i := range g {
			if g[i] != want[i] {
				return fmt.Errorf("row %d of %d crosses as\n%s\nwant\n%s", i, len(g), g[i], want[i])
			}
		}
	}
	return nil
}

// TestSlicedUnionsOfNullExportAtOnce: batches cut from one window whose
// struct holds a union with a null member are made exportable on several
// threads at once (Python's, while the pipeline cuts the next batches):
// arrow-go's Null array writes into the ArrayData it is made over, so the
// export must make its arrays over data of its own (go test -race).
func TestSlicedUnionsOfNullExportAtOnce(t *testing.T) {
	union := arrow.DenseUnionOf([]arrow.Field{
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, []arrow.UnionTypeCode{0, 1})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "su", Type: arrow.StructOf(arrow.Field{Name: "u", Type: union, Nullable: true}), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	const n = 60
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		su := b.Field(1).(*array.StructBuilder)
		su.Append(true)
		ub := su.FieldBuilder(0).(*array.DenseUnionBuilder)
		if i%3 == 0 {
			ub.Append(0)
			ub.Child(0).AppendNull()
		} else {
			ub.Append(1)
			ub.Child(1).(*array.Int64Builder).Append(int64(i * 7))
		}
	}
	window := b.NewRecordBatch()
	defer window.Release()
	cuts := [][2]int64{{3, 20}, {20, 41}, {41, 60}}
	slices := make([]arrow.RecordBatch, len(cuts))
	want := make([]string, len(cuts))
	for i, c := range cuts {
		slices[i] = window.NewSlice(c[0], c[1])
		defer slices[i].Release()
		want[i] = fmt.Sprint(rowsOf(slices[i]))
	}
	var g errgroup.Group
	for i := range cuts {
		g.Go(func() error {
			for range 50 {
				out, err := exportable(slices[i])
				if err != nil {
					return err
				}
				got := fmt.Sprint(rowsOf(out))
				out.Release()
				if got != want[i] {
					return fmt.Errorf("rows %v export as %s, want %s", cuts[i], got, want[i])
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
