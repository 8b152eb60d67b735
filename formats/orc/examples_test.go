package orc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// orcExamples is the ORC project's example files in the shared corpus.
func orcExamples(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(corpus.Dir(tb), "orc", "examples")
}

func plan(t testing.TB, paths []string, columns []string) *formats.Scan {
	t.Helper()
	ds, err := formats.Plan(context.Background(), paths, formats.PlanOptions{Formats: []formats.Format{orc.Format{}}, Columns: columns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// readAll reads fragment 0 of ds whole, calling check on each batch.
func readAll(ds *formats.Scan, batchRows int, mem memory.Allocator, check func(arrow.RecordBatch) error) error {
	f := ds.Fragments[0]
	return ds.Read(context.Background(), 0, ds.RowRange(0, 0, f.Rows), batchRows, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		return check(b)
	})
}

// TestExpectedRows streams every example file that has expected output
// to exactly those rows, value by value, in file order.
func TestExpectedRows(t *testing.T) {
	examples := orcExamples(t)
	want, err := filepath.Glob(filepath.Join(examples, "expected", "*.jsn.gz"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no expected files under %s: %v", examples, err)
	}
	for _, exp := range want {
		name := strings.TrimSuffix(filepath.Base(exp), ".jsn.gz")
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ds := plan(t, []string{filepath.Join(examples, name+".orc")}, nil)
			rows := expectedRows(t, exp)
			*hive011 = name == "orc-file-11-format"
			defer func() { *hive011 = false }()
			bare := ds.Fragments[0].Schema.NumFields() == 1 && ds.Fragments[0].Schema.Field(0).Name == "_col0" && len(rows) > 0 && rows[0][0] != '{'
			if int64(len(rows)) != ds.Rows() {
				t.Fatalf("the footer counts %d rows, the expected output has %d", ds.Rows(), len(rows))
			}
			// Under the race detector every row is read, and a sample of
			// them compared: both ends and every 37th.
			compared := func(at int) bool {
				return !raceEnabled || at < 1000 || at >= len(rows)-1000 || at%37 == 0
			}
			at := 0
			err := readAll(ds, 1000, mem, func(b arrow.RecordBatch) error {
				for i := range int(b.NumRows()) {
					if !compared(at) {
						at++
						continue
					}
					row := decodeRow(t, rows[at])
					for c, fl := range b.Schema().Fields() {
						var v any
						if bare {
							v = row
						} else {
							obj := row.(map[string]any)
							var ok bool
							if v, ok = obj[fl.Name]; !ok {
								return fmt.Errorf("row %d: column %q is not in the expected row", at, fl.Name)
							}
						}
						if msg := same(v, b.Column(c), i); msg != "" {
							return fmt.Errorf("row %d column %q: %s", at, fl.Name, msg)
						}
					}
					at++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if at != len(rows) {
				t.Fatalf("read %d rows, want %d", at, len(rows))
			}
		})
	}
}

// hive011 is set while a Hive 0.11 file (no version in its postscript)
// is compared.
var hive011 = new(bool)

// expectedRows returns the lines of an expected file, one JSON value each.
func expectedRows(t testing.TB, path string) [][]byte {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]byte
	for line := range bytes.Lines(raw) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			rows = append(rows, line)
		}
	}
	return rows
}

func decodeRow(t testing.TB, line []byte) any {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("expected row %s: %v", line, err)
	}
	return v
}

// same compares the expected JSON value want with row i of a; it returns
// what differs, or "".
func same(want any, a arrow.Array, i int) string {
	if u, ok := a.(*array.DenseUnion); ok {
		tag := int(u.TypeCode(i))
		child := u.Field(tag)
		off := int(u.ValueOffset(i))
		if want == nil {
			// Arrow unions have no nulls: a null union is a null of its
			// first variant.
			if tag != 0 || !child.IsNull(off) {
				return fmt.Sprintf("want null, got variant %d", tag)
			}
			return ""
		}
		obj := want.(map[string]any)
		if fmt.Sprint(obj["tag"]) != fmt.Sprint(tag) {
			return fmt.Sprintf("want variant %v, got %d", obj["tag"], tag)
		}
		return same(obj["value"], child, off)
	}
	if want == nil || a.IsNull(i) {
		if want == nil && a.IsNull(i) {
			return ""
		}
		return fmt.Sprintf("want %v, got %v", want, a.ValueStr(i))
	}
	switch a := a.(type) {
	case *array.Boolean:
		if want != a.Value(i) {
			return fmt.Sprintf("want %v, got %v", want, a.Value(i))
		}
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64:
		if got := a.ValueStr(i); got != want.(json.Number).String() {
			return fmt.Sprintf("want %v, got %v", want, got)
		}
	case *array.Float32:
		// The expected output prints floats widened to double, rounded.
		f, _ := want.(json.Number).Float64()
		if got := float64(a.Value(i)); math.Abs(got-f) > 1e-6*max(1, math.Abs(f)) {
			return fmt.Sprintf("want %v, got %v", want, a.Value(i))
		}
	case *array.Float64:
		// Some expected files print doubles to 14 significant digits.
		f, _ := want.(json.Number).Float64()
		if got := a.Value(i); got != f && math.Abs(got-f) > 1e-13*math.Abs(f) {
			return fmt.Sprintf("want %v, got %v", want, a.Value(i))
		}
	case *array.String:
		if want != a.Value(i) {
			return fmt.Sprintf("want %q, got %q", want, a.Value(i))
		}
	case *array.Binary:
		ws := want.([]any)
		got := a.Value(i)
		if len(ws) != len(got) {
			return fmt.Sprintf("want %v, got %v", want, got)
		}
		for j, w := range ws {
			if w.(json.Number).String() != fmt.Sprint(got[j]) {
				return fmt.Sprintf("want %v, got %v", want, got)
			}
		}
	case *array.Date32:
		if got := a.Value(i).ToTime().Format("2006-01-02"); got != want {
			return fmt.Sprintf("want %v, got %v", want, got)
		}
	case *array.Timestamp:
		w, err := time.Parse("2006-01-02 15:04:05.999999999", want.(string))
		if err != nil {
			return err.Error()
		}
		got := time.Unix(0, int64(a.Value(i))).UTC()
		if !w.Equal(got) {
			return fmt.Sprintf("want %v, got %v", want, got.Format("2006-01-02 15:04:05.999999999"))
		}
	case *array.Decimal128:
		w, ok := new(big.Rat).SetString(want.(json.Number).String())
		if !ok {
			return fmt.Sprintf("bad expected decimal %v", want)
		}
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		v := a.Value(i).BigInt()
		if *hive011 {
			// ORC's tools printed Hive 0.11's decimals, which declare no
			// scale, cut to 6 places; sluice reads them as decimal(38, 10).
			v.Quo(v, big.NewInt(10000))
			scale -= 4
		}
		got := new(big.Rat).SetFrac(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
		if w.Cmp(got) != 0 {
			return fmt.Sprintf("want %v, got %v", want, got.FloatString(int(scale)))
		}
	case *array.Map:
		ws := want.([]any)
		lo, hi := a.ValueOffsets(i)
		if int64(len(ws)) != hi-lo {
			return fmt.Sprintf("want %d entries, got %d", len(ws), hi-lo)
		}
		for j, w := range ws {
			obj := w.(map[string]any)
			if msg := same(obj["key"], a.Keys(), int(lo)+j); msg != "" {
				return fmt.Sprintf("entry %d key: %s", j, msg)
			}
			if msg := same(obj["value"], a.Items(), int(lo)+j); msg != "" {
				return fmt.Sprintf("entry %d value: %s", j, msg)
			}
		}
	case *array.List:
		ws := want.([]any)
		lo, hi := a.ValueOffsets(i)
		if int64(len(ws)) != hi-lo {
			return fmt.Sprintf("want %d elements, got %d", len(ws), hi-lo)
		}
		for j, w := range ws {
			if msg := same(w, a.ListValues(), int(lo)+j); msg != "" {
				return fmt.Sprintf("element %d: %s", j, msg)
			}
		}
	case *array.Struct:
		obj := want.(map[string]any)
		st := a.DataType().(*arrow.StructType)
		for f := range st.NumFields() {
			name := st.Field(f).Name
			if msg := same(obj[name], a.Field(f), i); msg != "" {
				return fmt.Sprintf("field %q: %s", name, msg)
			}
		}
	default:
		return fmt.Sprintf("no comparison for %s", a.DataType())
	}
	return ""
}
