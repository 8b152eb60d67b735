package filter

import (
	"cmp"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
)

// Stats is what a format's metadata says of one column over a unit (a row
// group, a page, a stripe): what a driver gives MayMatch so that a unit no
// row of which can pass is never fetched.
type Stats struct {
	// Rows is the number of values, nulls included; -1 if unknown.
	Rows int64
	// Nulls is the number of nulls; -1 if unknown.
	Nulls int64
	// Min and Max bound the non-null values (bounds need not be values:
	// truncated strings do), or are nil if unknown. Their Go type follows
	// the column's Arrow type: int64 for signed integers, dates (days for
	// date32, milliseconds for date64) and timestamps (in the column's
	// unit); uint64 for unsigned integers; float64 for floats; string for
	// strings and binaries; bool for booleans. A value of another type is
	// treated as unknown.
	Min, Max any
	// MayContain, if set, reports whether the unit may hold the value v
	// (of the type Min would have): a bloom filter. False must be certain.
	MayContain func(v any) bool
}

// outcome is a set of the results a predicate can have over a unit.
type outcome uint8

const (
	oTrue outcome = 1 << iota
	oFalse
	oNull
	oAny = oTrue | oFalse | oNull
)

// MayMatch reports whether a unit whose column statistics stats gives
// (ok false where nothing is known of a column) may hold a row the filter
// keeps. False is certain: the unit can be skipped. A filter that does not
// fit schema (the schema the unit is read with) cannot rule anything out.
func (f *Filter) MayMatch(schema *arrow.Schema, stats func(column string) (Stats, bool)) bool {
	root, err := f.bind(schema)
	if err != nil {
		return true
	}
	return root.may(stats)&oTrue != 0
}

// values says whether a unit can hold nulls and non-null values of a
// column.
func (s Stats) values() (nulls, nonNull bool) {
	if s.Nulls < 0 {
		return true, true
	}
	return s.Nulls > 0, s.Rows < 0 || s.Nulls < s.Rows
}

// compareAny orders a and b, two statistics or literal values; ok is false
// where they do not compare (other types, NaN).
func compareAny(a, b any) (int, bool) {
	switch a := a.(type) {
	case string:
		if b, ok := b.(string); ok {
			return cmp.Compare(a, b), true
		}
		return 0, false
	case bool:
		if b, ok := b.(bool); ok {
			return cmp.Compare(boolInt(a), boolInt(b)), true
		}
		return 0, false
	case int64:
		switch b := b.(type) {
		case int64:
			return cmp.Compare(a, b), true
		case uint64:
			if a < 0 {
				return -1, true
			}
			return cmp.Compare(uint64(a), b), true
		}
	case uint64:
		switch b := b.(type) {
		case uint64:
			return cmp.Compare(a, b), true
		case int64:
			if b < 0 {
				return 1, true
			}
			return cmp.Compare(a, uint64(b)), true
		}
	}
	x, ok1 := toFloat(a)
	y, ok2 := toFloat(b)
	if !ok1 || !ok2 || math.IsNaN(x) || math.IsNaN(y) {
		return 0, false
	}
	// An integer that float64 rounds may compare equal when it is not:
	// equal here means "cannot tell", which every caller treats as "may".
	return cmp.Compare(x, y), true
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	}
	return 0, false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// valueOutcome is what op against v can give over a unit with values in
// [min, max].
func valueOutcome(s Stats, op string, v any, float bool) outcome {
	if s.Min == nil || s.Max == nil {
		return oTrue | oFalse
	}
	lo, ok1 := compareAny(s.Min, v) // sign of min - v
	hi, ok2 := compareAny(s.Max, v) // sign of max - v
	if !ok1 || !ok2 {
		return oTrue | oFalse
	}
	var t, f bool
	switch op {
	case "=":
		t, f = lo <= 0 && hi >= 0, !(lo == 0 && hi == 0)
	case "<>":
		t, f = !(lo == 0 && hi == 0), lo <= 0 && hi >= 0
	case "<":
		t, f = lo < 0, hi >= 0
	case "<=":
		t, f = lo <= 0, hi > 0
	case ">":
		t, f = hi > 0, lo <= 0
	case ">=":
		t, f = hi >= 0, lo < 0
	}
	if s.MayContain != nil && (op == "=" || op == "<>") && !s.MayContain(v) {
		// The value is surely absent: = cannot hold, <> cannot fail.
		if op == "=" {
			t = false
		} else {
			f = false
		}
	}
	if float {
		// NaN, which statistics leave out, compares false, and <> true.
		f = true
		if op == "<>" {
			t = true
		}
	}
	var o outcome
	if t {
		o |= oTrue
	}
	if f {
		o |= oFalse
	}
	return o
}

// withNulls adds what the unit's nulls make of a value predicate: unknown.
func withNulls(s Stats, values func() outcome) outcome {
	nulls, nonNull := s.values()
	var o outcome
	if nulls {
		o |= oNull
	}
	if nonNull {
		o |= values()
	}
	return o
}

func (n *bCompare) may(st func(string) (Stats, bool)) outcome {
	s, ok := st(n.col.name)
	if !ok {
		return oAny
	}
	return withNulls(s, func() outcome { return valueOutcome(s, n.op, n.val, n.col.float) })
}

func (n *bIn) may(st func(string) (Stats, bool)) outcome {
	s, ok := st(n.col.name)
	if !ok {
		return oAny
	}
	return withNulls(s, func() outcome {
		var o outcome
		for _, v := range n.vals {
			if valueOutcome(s, "=", v, n.col.float)&oTrue != 0 {
				o |= oTrue
			}
		}
		if n.col.float || !n.allEqual(s) {
			o |= oFalse
		}
		return o
	})
}

// allEqual reports whether every value of the unit is surely in the list.
func (n *bIn) allEqual(s Stats) bool {
	if s.Min == nil || s.Max == nil {
		return false
	}
	if c, ok := compareAny(s.Min, s.Max); !ok || c != 0 {
		return false
	}
	for _, v := range n.vals {
		if c, ok := compareAny(s.Min, v); ok && c == 0 {
			return true
		}
	}
	return false
}

func (n *bIsNull) may(st func(string) (Stats, bool)) outcome {
	s, ok := st(n.col.name)
	if !ok {
		return oTrue | oFalse
	}
	nulls, nonNull := s.values()
	if n.not {
		nulls, nonNull = nonNull, nulls
	}
	var o outcome
	if nulls {
		o |= oTrue
	}
	if nonNull {
		o |= oFalse
	}
	return o
}

func (n *bBool) may(st func(string) (Stats, bool)) outcome {
	s, ok := st(n.col.name)
	if !ok {
		return oAny
	}
	return withNulls(s, func() outcome { return valueOutcome(s, "=", true, false) })
}

// kleene is SQL's three-valued AND or OR of two outcomes.
func kleene(and bool, a, b outcome) outcome {
	var o outcome
	for _, x := range []outcome{oTrue, oFalse, oNull} {
		if a&x == 0 {
			continue
		}
		for _, y := range []outcome{oTrue, oFalse, oNull} {
			if b&y == 0 {
				continue
			}
			o |= kleene1(and, x, y)
		}
	}
	return o
}

func kleene1(and bool, x, y outcome) outcome {
	if and {
		switch {
		case x == oFalse || y == oFalse:
			return oFalse
		case x == oTrue && y == oTrue:
			return oTrue
		}
		return oNull
	}
	switch {
	case x == oTrue || y == oTrue:
		return oTrue
	case x == oFalse && y == oFalse:
		return oFalse
	}
	return oNull
}

func (n *bLogical) may(st func(string) (Stats, bool)) outcome {
	return kleene(n.and, n.l.may(st), n.r.may(st))
}

func (n *bNot) may(st func(string) (Stats, bool)) outcome {
	x := n.x.may(st)
	o := x & oNull
	if x&oTrue != 0 {
		o |= oFalse
	}
	if x&oFalse != 0 {
		o |= oTrue
	}
	return o
}
