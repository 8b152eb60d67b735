package valuecheck

import (
	"encoding/hex"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// A value is compared as text: a canonical rendering of the expected Go
// value in the delivered column's type against the same rendering of the
// delivered Arrow value. Integers of any width compare as decimal numbers
// (a CSV reader delivers int64 where int32 was written), floats bit for bit
// in the width delivered (every NaN alike), timestamps as instants in
// nanoseconds with whether they carry a zone, dictionaries as their values.

// expected renders v, the value a column's function gave, as a column of
// type dt would hold it.
func expected(v any, dt arrow.DataType) string {
	if v == nil {
		return "null"
	}
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return expected(v, t.ValueType)
	case *arrow.Float32Type:
		switch f := v.(type) {
		case float32:
			return renderFloat(float64(f), 32)
		case float64:
			return renderFloat(f, 32)
		}
	case *arrow.Float64Type:
		switch f := v.(type) {
		case float32:
			return renderFloat(float64(f), 64)
		case float64:
			return renderFloat(f, 64)
		}
	case *arrow.TimestampType:
		if ts, ok := v.(arrow.Timestamp); ok {
			return renderTime(time.UnixMicro(int64(ts)), t.TimeZone != "")
		}
	case *arrow.Date32Type:
		if d, ok := v.(arrow.Date32); ok {
			return d.FormattedString()
		}
	case *arrow.Decimal128Type:
		if d, ok := v.(decimal128.Num); ok {
			return d.ToString(t.Scale)
		}
	case *arrow.ListType:
		if l, ok := v.([]any); ok {
			parts := make([]string, len(l))
			for i, e := range l {
				parts[i] = expected(e, t.Elem())
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
	case *arrow.MapType:
		if m, ok := v.([][2]any); ok {
			parts := make([]string, len(m))
			for i, kv := range m {
				parts[i] = expected(kv[0], t.KeyType()) + "=>" + expected(kv[1], t.ItemType())
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	case *arrow.StructType:
		if fs, ok := v.([]any); ok && len(fs) == t.NumFields() {
			parts := make([]string, len(fs))
			for i, f := range fs {
				parts[i] = t.Field(i).Name + ":" + expected(f, t.Field(i).Type)
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return strconv.Quote(x)
	case []byte:
		return "0x" + hex.EncodeToString(x)
	}
	return fmt.Sprintf("%T %v (no rendering as %s)", v, v, dt)
}

func renderFloat(f float64, bits int) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	if f == 0 && math.Signbit(f) {
		return "-0"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

func renderTime(t time.Time, zoned bool) string {
	s := t.UTC().Format("2006-01-02T15:04:05.000000000")
	if zoned {
		return s + "Z"
	}
	return s
}

// delivered renders row i of a as expected renders a value.
func delivered(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch c := a.(type) {
	case *array.Int8:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int16:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int32:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int64:
		return strconv.FormatInt(c.Value(i), 10)
	case *array.Uint8:
		return strconv.FormatUint(uint64(c.Value(i)), 10)
	case *array.Uint16:
		return strconv.FormatUint(uint64(c.Value(i)), 10)
	case *array.Uint32:
		return strconv.FormatUint(uint64(c.Value(i)), 10)
	case *array.Uint64:
		return strconv.FormatUint(c.Value(i), 10)
	case *array.Float32:
		return renderFloat(float64(c.Value(i)), 32)
	case *array.Float64:
		return renderFloat(c.Value(i), 64)
	case *array.Boolean:
		return strconv.FormatBool(c.Value(i))
	case *array.String:
		return strconv.Quote(c.Value(i))
	case *array.LargeString:
		return strconv.Quote(c.Value(i))
	case *array.StringView:
		return strconv.Quote(c.Value(i))
	case *array.Binary:
		return "0x" + hex.EncodeToString(c.Value(i))
	case *array.LargeBinary:
		return "0x" + hex.EncodeToString(c.Value(i))
	case *array.BinaryView:
		return "0x" + hex.EncodeToString(c.Value(i))
	case *array.Decimal128:
		return c.Value(i).ToString(c.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Date32:
		return c.Value(i).FormattedString()
	case *array.Timestamp:
		t := c.DataType().(*arrow.TimestampType)
		return renderTime(c.Value(i).ToTime(t.Unit), t.TimeZone != "")
	case *array.Dictionary:
		return delivered(c.Dictionary(), c.GetValueIndex(i))
	case *array.Map:
		start, end := c.ValueOffsets(i)
		keys, items := c.Keys(), c.Items()
		parts := make([]string, 0, end-start)
		for j := start; j < end; j++ {
			parts = append(parts, delivered(keys, int(j))+"=>"+delivered(items, int(j)))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case array.ListLike:
		start, end := c.ValueOffsets(i)
		vals := c.ListValues()
		parts := make([]string, 0, end-start)
		for j := start; j < end; j++ {
			parts = append(parts, delivered(vals, int(j)))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *array.Struct:
		t := c.DataType().(*arrow.StructType)
		parts := make([]string, c.NumField())
		for f := range c.NumField() {
			parts[f] = t.Field(f).Name + ":" + delivered(c.Field(f), i)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return fmt.Sprintf("(%s: no rendering)", a.DataType())
}

// Mismatch is a delivered value that is not its row's.
type Mismatch struct {
	Column    string
	ID        int64
	Row       int // in the batch
	Got, Want string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("valuecheck: column %q of id %d (row %d of its batch): got %s, want %s", m.Column, m.ID, m.Row, clip(m.Got), clip(m.Want))
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// Batch checks every value of every row of b against its row's id, and
// returns the ids in order. b must have an int64 "id" column; every other
// column must be a column of All (by name). want, if not nil, names the
// columns b must carry, in order.
func Batch(b arrow.RecordBatch, want []string) ([]int64, error) {
	sc := b.Schema()
	if want != nil {
		got := make([]string, sc.NumFields())
		for i, f := range sc.Fields() {
			got[i] = f.Name
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return nil, fmt.Errorf("valuecheck: batch has columns %v, want %v", got, want)
		}
	}
	idx := sc.FieldIndices("id")
	if len(idx) != 1 {
		return nil, fmt.Errorf("valuecheck: batch has no id column (%v)", sc)
	}
	idCol, ok := b.Column(idx[0]).(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("valuecheck: id column is %s, want int64", b.Column(idx[0]).DataType())
	}
	if idCol.NullN() > 0 {
		return nil, fmt.Errorf("valuecheck: %d null ids", idCol.NullN())
	}
	ids := make([]int64, idCol.Len())
	copy(ids, idCol.Int64Values())
	for c, f := range sc.Fields() {
		if c == idx[0] {
			continue
		}
		col, ok := ByName(f.Name)
		if !ok {
			return nil, fmt.Errorf("valuecheck: batch column %q is not a column of the data", f.Name)
		}
		arr := b.Column(c)
		if arr.Len() != len(ids) {
			return nil, fmt.Errorf("valuecheck: column %q has %d rows, id %d", f.Name, arr.Len(), len(ids))
		}
		for r, id := range ids {
			got, want := delivered(arr, r), expected(col.Value(id), arr.DataType())
			if got != want {
				return ids, &Mismatch{Column: f.Name, ID: id, Row: r, Got: got, Want: want}
			}
		}
	}
	return ids, nil
}

// Once counts the ids delivered, to check each wanted id came exactly once.
type Once struct {
	seen map[int64]int
}

// NewOnce returns an empty count.
func NewOnce() *Once { return &Once{seen: map[int64]int{}} }

// Add counts ids.
func (o *Once) Add(ids []int64) {
	for _, id := range ids {
		o.seen[id]++
	}
}

// Len is the number of ids counted, repeats included.
func (o *Once) Len() int {
	n := 0
	for _, c := range o.seen {
		n += c
	}
	return n
}

// Exactly checks that the ids counted are want, each once.
func (o *Once) Exactly(want []int64) error {
	wanted := make(map[int64]bool, len(want))
	for _, id := range want {
		wanted[id] = true
	}
	for _, id := range want {
		if c := o.seen[id]; c != 1 {
			return fmt.Errorf("valuecheck: id %d delivered %d times (%d ids wanted, %d delivered)", id, c, len(want), o.Len())
		}
	}
	for id, c := range o.seen {
		if !wanted[id] {
			return fmt.Errorf("valuecheck: id %d delivered %d times, not wanted (a filtered-out or foreign row)", id, c)
		}
	}
	return nil
}

// Exactly reads every batch of batches, checks every value of every row
// (Batch, with want naming the columns) and that the ids delivered are ids,
// each once: the loop of most end-to-end checks.
func Exactly(batches iter.Seq2[arrow.RecordBatch, error], want []string, ids []int64) error {
	once := NewOnce()
	for b, err := range batches {
		if err != nil {
			return err
		}
		got, err := Batch(b, want)
		if err != nil {
			return err
		}
		once.Add(got)
	}
	return once.Exactly(ids)
}

// Count is how many times id was counted.
func (o *Once) Count(id int64) int { return o.seen[id] }

// Max is the most times any id was counted.
func (o *Once) Max() int {
	m := 0
	for _, c := range o.seen {
		m = max(m, c)
	}
	return m
}

// GoValue checks v, the value a typed output (typed.Rows, Structs,
// Matrices) gave for column name of row id, against the column's value:
// integers as int64 or uint64, floats as float32 or float64, time.Time for
// dates and timestamps, []byte for binaries, nil for null.
func GoValue(name string, id int64, v any) error {
	col, ok := ByName(name)
	if !ok {
		return fmt.Errorf("valuecheck: %q is not a column of the data", name)
	}
	want := expected(col.Value(id), col.Type)
	var got string
	switch x := v.(type) {
	case nil:
		got = "null"
	case int64:
		got = strconv.FormatInt(x, 10)
	case uint64:
		got = strconv.FormatUint(x, 10)
	case float64:
		got = renderFloat(x, 64)
		want = expected(col.Value(id), arrow.PrimitiveTypes.Float64)
	case float32:
		got = renderFloat(float64(x), 32)
		want = expected(col.Value(id), arrow.PrimitiveTypes.Float32)
	case bool:
		got = strconv.FormatBool(x)
	case string:
		got = strconv.Quote(x)
	case []byte:
		got = "0x" + hex.EncodeToString(x)
	case time.Time:
		switch t := col.Type.(type) {
		case *arrow.TimestampType:
			got = renderTime(x, t.TimeZone != "")
		case *arrow.Date32Type:
			got = x.UTC().Format("2006-01-02")
		}
	default:
		got = fmt.Sprintf("%T %v", v, v)
	}
	if got != want {
		return &Mismatch{Column: name, ID: id, Row: -1, Got: got, Want: want}
	}
	return nil
}
