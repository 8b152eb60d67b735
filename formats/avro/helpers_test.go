package avro_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// plan plans the files with the Avro driver.
func plan(t testing.TB, drv avro.Format, opts formats.PlanOptions, paths ...string) *formats.Scan {
	t.Helper()
	opts.Formats = []formats.Format{drv}
	ds, err := formats.Plan(context.Background(), paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// readAll reads fragment i's rows [lo, hi) as rows of Go values, in the
// shapes twmb/avro decodes into an any (see goValue), checking the batch
// bounds and that no Arrow memory is left outstanding.
//
// It reads twice: through a checked allocator, and through one that says
// its memory is the Go runtime's, which the driver's direct columns take
// (see direct): the two must give the same rows.
func readRows(t testing.TB, ds *formats.Scan, i int, lo, hi int64, batchRows int) []map[string]any {
	t.Helper()
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	out := readRowsWith(t, ds, i, lo, hi, batchRows, checked)
	runtime := runtimeMemory{memory.NewCheckedAllocator(memory.NewGoAllocator())}
	defer runtime.AssertSize(t, 0)
	if again := readRowsWith(t, ds, i, lo, hi, batchRows, runtime); !reflect.DeepEqual(again, out) {
		t.Fatalf("rows [%d, %d): the direct columns read\n%v\nwhere the builders read\n%v", lo, hi, again, out)
	}
	return out
}

// runtimeMemory is a checked allocator that says its buffers are the Go
// runtime's (unzeroed.RuntimeMemory), as the default allocator's are.
type runtimeMemory struct{ *memory.CheckedAllocator }

func (runtimeMemory) RuntimeMemory() bool { return true }

func readRowsWith(t testing.TB, ds *formats.Scan, i int, lo, hi int64, batchRows int, mem memory.Allocator) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := ds.Read(context.Background(), i, ds.RowRange(i, lo, hi), batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		if b.NumRows() > int64(batchRows) {
			t.Errorf("a batch of %d rows, more than %d", b.NumRows(), batchRows)
		}
		for r := range int(b.NumRows()) {
			row := map[string]any{}
			for c, col := range b.Columns() {
				row[b.Schema().Field(c).Name] = goValue(col, r)
			}
			out = append(out, row)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rows [%d, %d): %v", lo, hi, err)
	}
	return out
}

// goValue is a's value at i in the shape twmb/avro decodes the same Avro
// value into an any, normalized by norm.
func goValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Null:
		return nil
	case *array.Boolean:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Binary:
		return append([]byte{}, a.Value(i)...)
	case *array.String:
		return a.Value(i)
	case *extensions.UUIDArray:
		v := a.Value(i)
		return append([]byte{}, v[:]...)
	case *array.FixedSizeBinary:
		return append([]byte{}, a.Value(i)...)
	case *array.Date32:
		return norm(time.Unix(int64(a.Value(i))*86400, 0).UTC())
	case *array.Time32:
		return time.Duration(a.Value(i)) * time.Millisecond
	case *array.Time64:
		return time.Duration(a.Value(i)) * time.Microsecond
	case *array.Timestamp:
		v := int64(a.Value(i))
		switch a.DataType().(*arrow.TimestampType).Unit {
		case arrow.Millisecond:
			return norm(time.UnixMilli(v))
		case arrow.Microsecond:
			return norm(time.UnixMicro(v))
		}
		return norm(time.Unix(0, v))
	case *array.Decimal128:
		return norm(decRat(a.Value(i).BigInt(), a.DataType().(*arrow.Decimal128Type).Scale))
	case *array.Decimal256:
		return norm(decRat(a.Value(i).BigInt(), a.DataType().(*arrow.Decimal256Type).Scale))
	case *array.MonthDayNanoInterval:
		v := a.Value(i)
		return twmb.Duration{Months: uint32(v.Months), Days: uint32(v.Days), Milliseconds: uint32(v.Nanoseconds / 1e6)}
	case *array.Struct:
		m := map[string]any{}
		st := a.DataType().(*arrow.StructType)
		for f := range st.NumFields() {
			m[st.Field(f).Name] = goValue(a.Field(f), i)
		}
		return m
	case *array.Map:
		if start, end := a.ValueOffsets(i); start == end && a.Keys().DataType().ID() != arrow.STRING {
			return []any{} // as twmb/avro reads an empty array of Iceberg's key-value records
		}
		m := map[string]any{}
		keys, items := a.Keys(), a.Items()
		start, end := a.ValueOffsets(i)
		for j := start; j < end; j++ {
			m[fmt.Sprint(goValue(keys, int(j)))] = goValue(items, int(j))
		}
		return m
	case *array.List:
		l := []any{}
		start, end := a.ValueOffsets(i)
		for j := start; j < end; j++ {
			l = append(l, goValue(a.ListValues(), int(j)))
		}
		return l
	case *array.DenseUnion:
		return goValue(a.Field(a.ChildID(i)), int(a.ValueOffset(i)))
	}
	panic(fmt.Sprintf("no Go value of %T", a))
}

func decRat(v *big.Int, scale int32) *big.Rat {
	return new(big.Rat).SetFrac(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// norm makes values comparable with reflect.DeepEqual: times as their
// instants, rationals as their text, fixed arrays as slices.
func norm(v any) any {
	switch v := v.(type) {
	case time.Time:
		return v.UnixNano()
	case *big.Rat:
		return v.RatString()
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = norm(x)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = norm(x)
		}
		return l
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return b
	}
	return v
}

// reference decodes a file with twmb/avro, the other implementation.
func reference(t testing.TB, path string) []map[string]any {
	t.Helper()
	out, err := referenceErr(t, path)
	if err != nil {
		t.Fatalf("twmb/avro: %s: %v", path, err)
	}
	return out
}

// referenceErr is reference for a file twmb/avro may refuse.
func referenceErr(t testing.TB, path string) ([]map[string]any, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ocf.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for {
		var v any
		if err := r.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			m = map[string]any{"value": v}
		}
		out = append(out, norm(m).(map[string]any))
	}
	return out, nil
}

func sameRows(t testing.TB, what string, got, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			for k := range want[i] {
				if !reflect.DeepEqual(got[i][k], want[i][k]) {
					t.Fatalf("%s: row %d column %q: got %#v, want %#v", what, i, k, got[i][k], want[i][k])
				}
			}
			t.Fatalf("%s: row %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

// writeOCF writes rows with twmb/avro's writer.
func writeOCF(t testing.TB, dir, name, schema string, rows []map[string]any, opts ...ocf.WriterOpt) string {
	t.Helper()
	path := filepath.Join(dir, name)
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
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readErr plans and reads the whole of path, returning the first error.
func readErr(t testing.TB, path string) error {
	t.Helper()
	ds, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{Formats: []formats.Format{avro.Format{}}})
	if err != nil {
		return err
	}
	defer ds.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for i, f := range ds.Fragments {
		err := ds.Read(context.Background(), i, ds.RowRange(i, 0, f.Rows), 100, mem, func(b arrow.RecordBatch) error {
			b.Release()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
