// Package valuecheck holds data whose every value is a pure function of its
// row id, writes it in every format sluice reads, and checks delivered
// batches against it value by value: the value-level property harness that
// every speed-up is checked by (see docs/testing.md, "How values are checked").
//
// A row's id is its column "id" (int64). Every other column's value at that
// row is Column.Value(id), nulls included, so a delivered batch can be
// checked with no reference to how it was read: shuffled, filtered, mixed,
// taken at random, resumed on another world size. A value that is wrong by
// one byte, a row whose values belong to another row, and a row delivered
// twice or never are all caught.
package valuecheck

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Column is one column of the data.
type Column struct {
	Name string
	Type arrow.DataType
	// Value is the column's value at row id, nil for null. Its Go type
	// follows Type: int64 for signed integers, uint64 for unsigned,
	// float32 or float64, bool, string, []byte, decimal128.Num,
	// arrow.Date32, arrow.Timestamp, []any for lists, []any of the
	// fields for structs, [][2]any of key and value for maps.
	Value func(id int64) any
}

// mix scrambles an id into 64 bits that look unrelated to their
// neighbours', so that a row's values carry its id in every bit.
func mix(id int64) uint64 {
	x := uint64(id) + 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// nullEvery makes v null on ids ≡ at (mod n).
func nullEvery(n, at int64, v func(int64) any) func(int64) any {
	return func(id int64) any {
		if id%n == at {
			return nil
		}
		return v(id)
	}
}

// Text is the string of row id (column "text"): 0 to 200 bytes, of one-, two-, three- and
// four-byte UTF-8 runes, commas, quotes and a backslash among them (what a
// CSV or JSON writer must escape), different in every row.
func Text(id int64) string {
	const runes = `aé€😀,"\ zq`
	rs := []rune(runes)
	n := int(id % 201)
	var b strings.Builder
	h := mix(id)
	for b.Len() < n {
		b.WriteRune(rs[h%uint64(len(rs))])
		h = h*6364136223846793005 + 1442695040888963407
	}
	s := b.String()
	for len(s) > n { // a multi-byte rune crossed n: drop whole runes
		_, size := lastRune(s)
		s = s[:len(s)-size]
	}
	return s
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return []rune(s[i:])[0], len(s) - i
		}
	}
	return 0, 0
}

// Tag is "s" and id mod 1000: few distinct values, dictionary-encoded by
// Parquet writers, and the filters' string column.
func Tag(id int64) string { return fmt.Sprintf("s%d", id%1000) }

// X is a finite float in [0, 1), column "unit": the filters' float column.
func X(id int64) float64 { return float64(mix(id)>>11) / (1 << 53) }

var special64 = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}

// tsBase is 2021-03-04 05:06:07.123456 UTC in microseconds.
var tsBase = time.Date(2021, 3, 4, 5, 6, 7, 123456000, time.UTC).UnixMicro()

// All is every column, id first.
var All = []Column{
	{"id", arrow.PrimitiveTypes.Int64, func(id int64) any { return id }},
	{"i8", arrow.PrimitiveTypes.Int8, nullEvery(11, 3, func(id int64) any { return int64(int8(mix(id))) })},
	{"i16", arrow.PrimitiveTypes.Int16, func(id int64) any { return int64(int16(mix(id))) }},
	{"i32", arrow.PrimitiveTypes.Int32, nullEvery(13, 4, func(id int64) any { return int64(int32(mix(id))) })},
	{"i64", arrow.PrimitiveTypes.Int64, func(id int64) any { return int64(mix(id)) }},
	{"u8", arrow.PrimitiveTypes.Uint8, func(id int64) any { return uint64(uint8(mix(id))) }},
	{"u16", arrow.PrimitiveTypes.Uint16, func(id int64) any { return uint64(uint16(mix(id))) }},
	{"u32", arrow.PrimitiveTypes.Uint32, nullEvery(7, 2, func(id int64) any { return uint64(uint32(mix(id))) })},
	{"u64", arrow.PrimitiveTypes.Uint64, func(id int64) any { return mix(id) }},
	{"f32", arrow.PrimitiveTypes.Float32, nullEvery(19, 9, func(id int64) any {
		if k := id % 23; k < int64(len(special64)) {
			return float32(special64[k])
		}
		return math.Float32frombits(uint32(mix(id))&0x3fffffff | 0x20000000)
	})},
	{"f64", arrow.PrimitiveTypes.Float64, func(id int64) any {
		if k := id % 29; k < int64(len(special64)) {
			return special64[k]
		}
		return math.Float64frombits(mix(id)&0x3fffffffffffffff | 0x2000000000000000)
	}},
	{"unit", arrow.PrimitiveTypes.Float64, func(id int64) any { return X(id) }},
	{"b", arrow.FixedWidthTypes.Boolean, nullEvery(5, 1, func(id int64) any { return mix(id)&1 == 1 })},
	{"text", arrow.BinaryTypes.String, nullEvery(17, 5, func(id int64) any { return Text(id) })},
	{"tag", arrow.BinaryTypes.String, func(id int64) any { return Tag(id) }},
	{"bin", arrow.BinaryTypes.Binary, nullEvery(31, 6, func(id int64) any {
		b := make([]byte, id%41)
		h := mix(id)
		for i := range b {
			b[i] = byte(h >> (8 * (i % 8)))
			if i%8 == 7 {
				h = mix(int64(h))
			}
		}
		return b
	})},
	{"dict", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		nullEvery(9, 8, func(id int64) any { return fmt.Sprintf("k%d", mix(id)%50) })},
	{"dec", &arrow.Decimal128Type{Precision: 18, Scale: 4}, nullEvery(37, 1, func(id int64) any {
		return decimal128.FromI64(int64(mix(id)%2_000_000_000_000) - 1_000_000_000_000)
	})},
	{"date", arrow.FixedWidthTypes.Date32, func(id int64) any { return arrow.Date32(id%40000 - 20000) }},
	{"ts", &arrow.TimestampType{Unit: arrow.Microsecond}, nullEvery(41, 2, func(id int64) any {
		return arrow.Timestamp(tsBase + id*1_000_003)
	})},
	{"tstz", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, func(id int64) any {
		return arrow.Timestamp(tsBase - id*999_983)
	}},
	{"lst", arrow.ListOf(arrow.BinaryTypes.String), nullEvery(23, 0, func(id int64) any {
		out := make([]any, id%6)
		for j := range out {
			if (id+int64(j))%10 == 3 {
				continue // a null element
			}
			out[j] = fmt.Sprintf("t%d", (id*7+int64(j))%500)
		}
		return out
	})},
	// tags: one to three strings a row, no nulls (a list column as people
	// write tags; the arrow take kernel's paths for it differ from lst's).
	{"tags", arrow.ListOf(arrow.BinaryTypes.String), func(id int64) any {
		out := make([]any, 1+id%3)
		for j := range out {
			out[j] = fmt.Sprintf("t%d", (id+int64(j))%1000)
		}
		return out
	}},
	{"st", arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	), nullEvery(29, 4, func(id int64) any {
		var b any = Tag(id * 3)
		if id%4 == 1 {
			b = nil
		}
		return []any{int64(int32(id * 3)), b}
	})},
	{"mp", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), nullEvery(43, 7, func(id int64) any {
		out := make([][2]any, id%4)
		for j := range out {
			var v any = id + int64(j)
			if j == 2 {
				v = nil
			}
			out[j] = [2]any{fmt.Sprintf("m%d", j), v}
		}
		return out
	})},
}

// Block is the ids a value of a column of Partitions holds for.
const Block = 1000

// Partitions are columns whose value is the same over each block of Block
// consecutive ids (ids [k·Block, (k+1)·Block)), of the types tables are
// partitioned by: a table partitioned by them holds a block, or part of
// one, a data file. region is null on every fifth block. They and Nested
// are apart from All, so that the files of All stay as they are.
var Partitions = []Column{
	{"region", arrow.BinaryTypes.String, func(id int64) any {
		if id/Block%5 == 3 {
			return nil
		}
		return fmt.Sprintf("r%d", id/Block)
	}},
	{"bucket", arrow.PrimitiveTypes.Int32, func(id int64) any { return id/Block*7 - 5 }},
	{"day", arrow.FixedWidthTypes.Date32, func(id int64) any { return arrow.Date32(19000 + id/Block) }},
}

// Nested are nested columns beyond All's: a map of integers to integers,
// a struct in a struct, and a list of structs, with nulls at every depth.
var Nested = []Column{
	{"mpi", arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64), nullEvery(13, 5, func(id int64) any {
		out := make([][2]any, id%4)
		for j := range out {
			var v any = id*1000 + int64(j)
			if j == 2 {
				v = nil
			}
			out[j] = [2]any{int64(int32(id*31 + int64(j))), v}
		}
		return out
	})},
	{"nest", arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "inner", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
	), nullEvery(17, 3, func(id int64) any {
		var inner any = []any{int64(int32(mix(id))), Tag(id * 5)}
		switch {
		case id%7 == 2:
			inner = nil
		case id%5 == 0:
			inner = []any{int64(int32(mix(id))), nil}
		}
		return []any{id * 3, inner}
	})},
	{"lstst", arrow.ListOf(arrow.StructOf(
		arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	)), nullEvery(19, 6, func(id int64) any {
		out := make([]any, id%3)
		for j := range out {
			if (id+int64(j))%11 == 4 {
				continue // a null element
			}
			var v any = fmt.Sprintf("v%d", id+int64(j))
			if j == 1 {
				v = nil
			}
			out[j] = []any{id + int64(j), v}
		}
		return out
	})},
}

// ByName returns the column of All, Partitions or Nested named name.
func ByName(name string) (Column, bool) {
	for _, cs := range [][]Column{All, Partitions, Nested} {
		for _, c := range cs {
			if c.Name == name {
				return c, true
			}
		}
	}
	return Column{}, false
}

// Pick returns the columns of All, Partitions or Nested with these names,
// in this order.
func Pick(names ...string) []Column {
	out := make([]Column, len(names))
	for i, n := range names {
		c, ok := ByName(n)
		if !ok {
			panic("valuecheck: no column " + n)
		}
		out[i] = c
	}
	return out
}
