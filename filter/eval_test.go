package filter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "u", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "g", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
	{Name: "odd name", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

// row is one row in Go values (nil for null), by column.
type row map[string]any

const day = 86400

func randomRows(r *rand.Rand, n int) []row {
	strs := []string{"a", "b", "ab", "", "it's", "z"}
	rows := make([]row, n)
	for k := range rows {
		x := row{}
		null := func() bool { return r.IntN(6) == 0 }
		if !null() {
			x["i"] = int64(r.IntN(21) - 10)
		}
		if !null() {
			x["u"] = uint64(r.IntN(256))
		}
		if !null() {
			v := float64(r.IntN(9)-4) / 2
			if r.IntN(10) == 0 {
				v = math.NaN()
			}
			x["f"] = v
		}
		if !null() {
			x["g"] = float64(float32(r.IntN(5)) / 10)
		}
		if !null() {
			x["s"] = strs[r.IntN(len(strs))]
		}
		if !null() {
			x["b"] = r.IntN(2) == 0
		}
		if !null() {
			x["d"] = int64(19723 + r.IntN(5)) // 2024-01-01 onwards
		}
		if !null() {
			x["ts"] = int64(19723*day*1000 + r.IntN(3)*3600_000)
		}
		if !null() {
			x["odd name"] = int64(r.IntN(3))
		}
		rows[k] = x
	}
	return rows
}

func buildBatch(mem memory.Allocator, rows []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	for _, x := range rows {
		for i, fl := range testSchema.Fields() {
			v, ok := x[fl.Name]
			fb := b.Field(i)
			if !ok {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int64Builder:
				fb.Append(v.(int64))
			case *array.Int32Builder:
				fb.Append(int32(v.(int64)))
			case *array.Uint8Builder:
				fb.Append(uint8(v.(uint64)))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.Float32Builder:
				fb.Append(float32(v.(float64)))
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.BooleanBuilder:
				fb.Append(v.(bool))
			case *array.Date32Builder:
				fb.Append(arrow.Date32(v.(int64)))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(v.(int64)))
			}
		}
	}
	return b.NewRecordBatch()
}

// tri is SQL's three-valued logic: 1 true, 0 false, -1 unknown.
type tri int

// ref evaluates n over one row in plain Go, as SQL would: the reference
// the kernels are checked against.
func ref(n node, x row) tri {
	switch n := n.(type) {
	case *logical:
		l, r := ref(n.l, x), ref(n.r, x)
		if n.op == "AND" {
			switch {
			case l == 0 || r == 0:
				return 0
			case l == 1 && r == 1:
				return 1
			}
			return -1
		}
		switch {
		case l == 1 || r == 1:
			return 1
		case l == 0 && r == 0:
			return 0
		}
		return -1
	case *negation:
		v := ref(n.x, x)
		if v == -1 {
			return -1
		}
		return 1 - v
	case *isNull:
		_, present := x[n.x.(*column).name]
		return boolTri(present == n.not)
	case *column:
		v, ok := x[n.name]
		if !ok {
			return -1
		}
		return boolTri(v.(bool))
	case *inList:
		v, ok := x[n.x.(*column).name]
		if !ok {
			return -1
		}
		for _, l := range n.list {
			if c, ok := refCompare(v, l, n.x.(*column).name); ok && c == 0 {
				return boolTri(!n.not)
			}
		}
		return boolTri(n.not)
	case *between:
		and := &logical{op: "AND", l: &comparison{op: ">=", l: n.x, r: n.lo}, r: &comparison{op: "<=", l: n.x, r: n.hi}}
		if n.not {
			return ref(&negation{x: and}, x)
		}
		return ref(and, x)
	case *comparison:
		col, lit, op := n.l, n.r, n.op
		if _, ok := n.l.(*literal); ok {
			col, lit, op = n.r, n.l, flip[op]
		}
		name := col.(*column).name
		v, ok := x[name]
		if !ok {
			return -1
		}
		c, ok := refCompare(v, lit.(*literal), name)
		if !ok { // NaN
			return boolTri(op == "<>")
		}
		switch op {
		case "=":
			return boolTri(c == 0)
		case "<>":
			return boolTri(c != 0)
		case "<":
			return boolTri(c < 0)
		case "<=":
			return boolTri(c <= 0)
		case ">":
			return boolTri(c > 0)
		case ">=":
			return boolTri(c >= 0)
		}
	}
	panic(fmt.Sprintf("ref: %T", n))
}

func boolTri(b bool) tri {
	if b {
		return 1
	}
	return 0
}

// refCompare orders a row's value and a literal the way SQL would, with
// date and timestamp strings read as such.
func refCompare(v any, l *literal, col string) (int, bool) {
	var lv any
	switch l.kind {
	case litNumber:
		lv = l.f
		if l.isInt {
			lv = l.i
		}
	case litBool:
		lv = l.b
	default:
		lv = l.s
		if col == "d" || col == "ts" {
			tm, err := parseTime(l.s, col == "d")
			if err != nil {
				panic(err)
			}
			if col == "d" {
				lv = tm.Unix() / day
			} else {
				lv = tm.UnixMilli()
			}
		}
	}
	return compareAny(v, lv)
}

// randomFilter writes a random filter over testSchema's columns that binds.
func randomFilter(r *rand.Rand, depth int) string {
	if depth > 0 && r.IntN(3) > 0 {
		switch r.IntN(3) {
		case 0:
			return "(" + randomFilter(r, depth-1) + " AND " + randomFilter(r, depth-1) + ")"
		case 1:
			return "(" + randomFilter(r, depth-1) + " OR " + randomFilter(r, depth-1) + ")"
		default:
			return "NOT (" + randomFilter(r, depth-1) + ")"
		}
	}
	ops := []string{"=", "<>", "!=", "<", "<=", ">", ">="}
	lits := map[string][]string{
		"i":        {"-3", "0", "4", "2.5", "-10", "99999999999"},
		"u":        {"0", "128", "255", "300", "-1", "7.5"},
		"f":        {"0", "0.5", "-1.5", "2", "1e1"},
		"g":        {"0.1", "0.2", "0", "0.4"},
		"s":        {"'a'", "'ab'", "''", "'it''s'", "'b'"},
		"b":        {"TRUE", "FALSE"},
		"d":        {"'2024-01-02'", "DATE '2024-01-03'", "'2023-12-31'"},
		"ts":       {"'2024-01-01 01:00'", "TIMESTAMP '2024-01-01T00:00:00Z'", "'2024-01-01T02:00:00+00:00'"},
		"odd name": {"0", "1", "2"},
	}
	cols := []string{"i", "u", "f", "g", "s", "b", "d", "ts", "odd name"}
	col := cols[r.IntN(len(cols))]
	ref := `"` + col + `"`
	op := ops[r.IntN(len(ops))]
	if col == "b" {
		op = ops[r.IntN(3)]
	}
	lit := func() string { return lits[col][r.IntN(len(lits[col]))] }
	switch r.IntN(6) {
	case 0:
		return ref + " IS NULL"
	case 1:
		return ref + " IS NOT NULL"
	case 2:
		not := []string{"", " NOT"}[r.IntN(2)]
		return ref + not + " IN (" + lit() + ", " + lit() + ")"
	case 3:
		if col == "b" {
			return ref
		}
		not := []string{"", " NOT"}[r.IntN(2)]
		return ref + not + " BETWEEN " + lit() + " AND " + lit()
	case 4:
		return lit() + " " + op + " " + ref
	}
	return ref + " " + op + " " + lit()
}

// TestKeepMatchesReference checks the compute kernels against a plain Go
// evaluation over the same rows, for random filters, and checks the
// pruning logic's soundness: a unit MayMatch rules out holds no kept row.
func TestKeepMatchesReference(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := compute.WithAllocator(context.Background(), mem)
	r := rand.New(rand.NewPCG(1, 2))
	rows := randomRows(r, 400)
	b := buildBatch(mem, rows)
	defer b.Release()
	n := 1500
	if testing.Short() {
		n = 300
	}
	pruned := 0
	for k := range n {
		text := randomFilter(r, 3)
		f, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		keep, err := f.Keep(ctx, b)
		if err != nil {
			t.Fatalf("Keep(%s): %v", f, err)
		}
		for i, x := range rows {
			want := ref(f.root, x) == 1
			got := keep.IsValid(i) && keep.Value(i)
			if got != want {
				t.Fatalf("filter %s, row %d %v: kernels keep=%v, reference %v", f, i, x, got, want)
			}
		}
		// Units of 1 to 40 rows: their stats must not rule out a kept row.
		for lo := 0; lo < len(rows); {
			hi := min(len(rows), lo+1+(k+lo)%40)
			kept := false
			for i := lo; i < hi; i++ {
				kept = kept || keep.IsValid(i) && keep.Value(i)
			}
			may := f.MayMatch(testSchema, func(c string) (Stats, bool) { return exactStats(rows[lo:hi], c), true })
			if kept && !may {
				t.Fatalf("filter %s: MayMatch false over rows [%d, %d), which hold a kept row", f, lo, hi)
			}
			if !may {
				pruned++
			}
			lo = hi
		}
		keep.Release()
	}
	if pruned == 0 {
		t.Errorf("statistics never ruled a unit out: the pruning logic is not exercised")
	}
	t.Logf("%d units ruled out", pruned)
}

// exactStats are a unit's statistics as a writer would record them: NaN
// left out of min and max, and a bloom filter that knows every value.
func exactStats(rows []row, col string) Stats {
	s := Stats{Rows: int64(len(rows))}
	seen := map[any]bool{}
	for _, x := range rows {
		v, ok := x[col]
		if !ok {
			s.Nulls++
			continue
		}
		if f, ok := v.(float64); ok && math.IsNaN(f) {
			continue
		}
		seen[v] = true
		if c, _ := compareAny(v, s.Min); s.Min == nil || c < 0 {
			s.Min = v
		}
		if c, _ := compareAny(v, s.Max); s.Max == nil || c > 0 {
			s.Max = v
		}
	}
	s.MayContain = func(v any) bool {
		for w := range seen {
			if c, ok := compareAny(w, v); !ok || c == 0 {
				return true
			}
		}
		return false
	}
	return s
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"nope = 1", `no column "nope"`},
		{"s = 1", `column "s" is utf8: the literal 1`},
		{"i = 'x'", `column "i" is int64: the literal 'x'`},
		{"d = '2024-01-01 10:00'", "YYYY-MM-DD"},
		{"ts = 'yesterday'", "a date or timestamp"},
		{"ts = '2024-01-01T00:00:00.0001'", "finer than the column's unit"},
		{"i", "not boolean"},
		{"i = NULL", "IS NULL"},
		{"i = u", "a comparison takes a column and a literal"},
		{"1 = 1", "a comparison takes a column and a literal"},
		{"TRUE", "not a condition on a column"},
		{"b = 1", "TRUE or FALSE"},
		{"b > FALSE", "= and <> only"},
	} {
		f, err := Parse(tc.text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.text, err)
		}
		err = f.Check(testSchema)
		if !errors.Is(err, ErrType) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want ErrType saying %q", tc.text, err, tc.want)
		}
	}
	f, _ := Parse(`"odd name" IN (1, 2) AND ts < '2030-01-01' AND d >= DATE '2024-01-01' AND u > 300`)
	if err := f.Check(testSchema); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestMayMatchCases(t *testing.T) {
	st := map[string]Stats{
		"i": {Rows: 10, Nulls: 0, Min: int64(5), Max: int64(9)},
		"s": {Rows: 10, Nulls: 10},
		"f": {Rows: 10, Nulls: 0, Min: 1.0, Max: 1.0},
		"u": {Rows: 10, Nulls: 0, Min: uint64(3), Max: uint64(3), MayContain: func(v any) bool { c, ok := compareAny(v, uint64(3)); return !ok || c == 0 }},
	}
	get := func(c string) (Stats, bool) { s, ok := st[c]; return s, ok }
	for _, tc := range []struct {
		text string
		may  bool
	}{
		{"i = 4", false}, {"i = 5", true}, {"i > 9", false}, {"i >= 9", true}, {"i < 5", false},
		{"i BETWEEN 1 AND 4", false}, {"i NOT BETWEEN 1 AND 100", false}, {"i IN (1, 2, 10)", false}, {"i IN (1, 7)", true},
		{"NOT (i >= 5)", false}, {"i = 4 OR i = 10", false}, {"i = 4 OR s IS NULL", true},
		{"s = 'a'", false}, {"s IS NOT NULL", false}, {"NOT (s = 'a')", false}, {"s IS NULL AND i = 7", true},
		{"f <> 1", true}, // NaN is not in the statistics and is <> 1
		{"f > 1", false}, {"NOT (f <= 1)", true},
		{"u <> 3", false}, {"u = 3", true}, {"u = 4", false}, {"u NOT IN (3)", false},
		{"b = TRUE", true}, // no statistics
	} {
		f, err := Parse(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.MayMatch(testSchema, get); got != tc.may {
			t.Errorf("MayMatch(%s) = %v, want %v", tc.text, got, tc.may)
		}
	}
}
