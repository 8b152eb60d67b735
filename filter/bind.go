package filter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// ErrType is wrapped when a filter does not fit a schema: an unknown
// column, a literal its column cannot be compared with, a column of a type
// filters cannot read.
var ErrType = errors.New("filter does not fit the schema")

// bnode is a node bound to a schema: columns resolved to positions,
// literals coerced to the type the comparison runs in.
type bnode interface {
	// eval computes the node's value for every row of b, a boolean array
	// with nulls for unknown. The caller releases the result.
	eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error)
	// may says which results the node can have over a unit whose
	// statistics st gives.
	may(st func(column string) (Stats, bool)) outcome
}

// colRef is a bound column: where it is in the batch and the type its
// values are compared in (cast there first when it is not theirs).
type colRef struct {
	name   string
	idx    int
	typ    arrow.DataType
	target arrow.DataType
	// float columns may hold NaN, which statistics leave out and which
	// compares false (<> true) with everything.
	float bool
}

func (c *colRef) datum(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	col := b.Column(c.idx)
	if arrow.TypeEqual(col.DataType(), c.target) {
		return compute.NewDatum(col), nil
	}
	cast, err := compute.CastArray(ctx, col, compute.UnsafeCastOptions(c.target))
	if err != nil {
		return nil, fmt.Errorf("cast column %q from %s to %s: %w", c.name, col.DataType(), c.target, err)
	}
	defer cast.Release()
	return compute.NewDatum(cast), nil
}

func bindBool(n node, s *arrow.Schema) (bnode, error) {
	switch n := n.(type) {
	case *logical:
		l, err := bindBool(n.l, s)
		if err != nil {
			return nil, err
		}
		r, err := bindBool(n.r, s)
		if err != nil {
			return nil, err
		}
		return &bLogical{and: n.op == "AND", l: l, r: r}, nil
	case *negation:
		x, err := bindBool(n.x, s)
		if err != nil {
			return nil, err
		}
		return &bNot{x: x}, nil
	case *comparison:
		return bindComparison(n, s)
	case *inList:
		c, err := bindColumn(n.x, s, "IN")
		if err != nil {
			return nil, err
		}
		if err := coerce(c, n.list...); err != nil {
			return nil, err
		}
		var bn bnode
		if c.target.ID() == arrow.BOOL {
			// arrow-go's is_in gets booleans wrong: a chain of = instead.
			for _, l := range n.list {
				sc, val, err := literalScalar(l, c.target)
				if err != nil {
					return nil, fmt.Errorf("%w: %s for column %q: %w", ErrType, l, c.name, err)
				}
				var eq bnode = &bCompare{col: c, op: "=", lit: sc, val: val}
				if bn != nil {
					eq = &bLogical{l: bn, r: eq}
				}
				bn = eq
			}
		} else {
			in := &bIn{col: c, lits: n.list}
			if err := in.build(); err != nil {
				return nil, err
			}
			bn = in
		}
		if n.not {
			bn = &bNot{x: bn}
		}
		return bn, nil
	case *between:
		lo, err := bindComparison(&comparison{op: ">=", l: n.x, r: n.lo, pos: n.pos}, s)
		if err != nil {
			return nil, err
		}
		hi, err := bindComparison(&comparison{op: "<=", l: n.x, r: n.hi, pos: n.pos}, s)
		if err != nil {
			return nil, err
		}
		var bn bnode = &bLogical{and: true, l: lo, r: hi}
		if n.not {
			bn = &bNot{x: bn}
		}
		return bn, nil
	case *isNull:
		c, err := bindColumn(n.x, s, "IS NULL")
		if err != nil {
			return nil, err
		}
		c.target = c.typ // no comparison: no cast
		return &bIsNull{col: c, not: n.not}, nil
	case *column:
		c, err := bindColumn(n, s, "")
		if err != nil {
			return nil, err
		}
		if c.typ.ID() != arrow.BOOL {
			return nil, fmt.Errorf("%w: column %q (offset %d) is %s, not boolean: compare it with something", ErrType, c.name, n.pos, c.typ)
		}
		c.target = c.typ
		return &bBool{col: c}, nil
	case *literal:
		return nil, fmt.Errorf("%w: the literal %s (offset %d) is not a condition on a column", ErrType, n, n.pos)
	}
	return nil, fmt.Errorf("%w: unexpected %T", ErrType, n)
}

func bindColumn(n node, s *arrow.Schema, what string) (*colRef, error) {
	c, ok := n.(*column)
	if !ok {
		return nil, fmt.Errorf("%w: %s applies to a column, not to %s", ErrType, what, n)
	}
	idx := s.FieldIndices(c.name)
	if len(idx) == 0 {
		return nil, fmt.Errorf("%w: no column %q (offset %d) in the schema", ErrType, c.name, c.pos)
	}
	if len(idx) > 1 {
		return nil, fmt.Errorf("%w: more than one column is named %q", ErrType, c.name)
	}
	typ := s.Field(idx[0]).Type
	switch typ.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return &colRef{name: c.name, idx: idx[0], typ: typ, float: typ.ID() != arrow.DECIMAL128 && typ.ID() != arrow.DECIMAL256}, nil
	}
	return &colRef{name: c.name, idx: idx[0], typ: typ}, nil
}

func bindComparison(n *comparison, s *arrow.Schema) (bnode, error) {
	op, colNode, litNode := n.op, n.l, n.r
	if _, ok := n.l.(*literal); ok {
		// 3 < x is x > 3.
		op, colNode, litNode = flip[op], n.r, n.l
	}
	lit, ok := litNode.(*literal)
	if _, isCol := colNode.(*column); !ok || !isCol {
		return nil, fmt.Errorf("%w: %s (offset %d) compares %s with %s: a comparison takes a column and a literal", ErrType, n, n.pos, n.l, n.r)
	}
	c, err := bindColumn(colNode, s, "a comparison")
	if err != nil {
		return nil, err
	}
	if err := coerce(c, lit); err != nil {
		return nil, err
	}
	if c.target.ID() == arrow.BOOL && op != "=" && op != "<>" {
		return nil, fmt.Errorf("%w: %s (offset %d): booleans compare with = and <> only", ErrType, n, n.pos)
	}
	sc, val, err := literalScalar(lit, c.target)
	if err != nil {
		return nil, fmt.Errorf("%w: %s for column %q: %w", ErrType, lit, c.name, err)
	}
	return &bCompare{col: c, op: op, lit: sc, val: val}, nil
}

var flip = map[string]string{"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

var compareFunc = map[string]string{"=": "equal", "<>": "not_equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}

// coerce picks the type c is compared in with lits, or says why they do
// not compare.
func coerce(c *colRef, lits ...*literal) error {
	bad := func(l *literal, want string) error {
		return fmt.Errorf("%w: column %q is %s: the literal %s (offset %d) does not compare with it (want %s)", ErrType, c.name, c.typ, l, l.pos, want)
	}
	for _, l := range lits {
		if l.kind == litNull {
			return fmt.Errorf("%w: a comparison with NULL (offset %d) is never true: use %q IS NULL", ErrType, l.pos, c.name)
		}
	}
	typ := c.typ
	if d, ok := typ.(*arrow.DictionaryType); ok {
		typ = d.ValueType // compared decoded
	}
	c.target = typ
	switch id := typ.ID(); {
	case arrow.IsInteger(id):
		for _, l := range lits {
			if l.kind != litNumber {
				return bad(l, "a number")
			}
			if !l.isInt || !fits(l.i, id) {
				c.target = arrow.PrimitiveTypes.Float64 // 2.5 or 300 against an int8
			}
		}
	case id == arrow.FLOAT16 || id == arrow.FLOAT32 || id == arrow.FLOAT64 || id == arrow.DECIMAL128 || id == arrow.DECIMAL256:
		// float32 values compare as the float64 they are exactly, so that
		// x > 0.1 means what it says; decimals compare as float64.
		c.target = arrow.PrimitiveTypes.Float64
		for _, l := range lits {
			if l.kind != litNumber {
				return bad(l, "a number")
			}
		}
	case id == arrow.STRING || id == arrow.LARGE_STRING || id == arrow.BINARY || id == arrow.LARGE_BINARY:
		for _, l := range lits {
			if l.kind != litString {
				return bad(l, "a 'string'")
			}
		}
	case id == arrow.STRING_VIEW:
		c.target = arrow.BinaryTypes.String
		for _, l := range lits {
			if l.kind != litString {
				return bad(l, "a 'string'")
			}
		}
	case id == arrow.BOOL:
		for _, l := range lits {
			if l.kind != litBool {
				return bad(l, "TRUE or FALSE")
			}
		}
	case id == arrow.DATE32 || id == arrow.DATE64:
		for _, l := range lits {
			if l.kind != litString && l.kind != litDate {
				return bad(l, "a date such as '2024-01-31'")
			}
			if _, err := parseTime(l.s, true); err != nil {
				return bad(l, err.Error())
			}
		}
	case id == arrow.TIMESTAMP:
		for _, l := range lits {
			if l.kind != litString && l.kind != litDate && l.kind != litTimestamp {
				return bad(l, "a timestamp such as '2024-01-31 12:00:00'")
			}
			if _, err := parseTime(l.s, false); err != nil {
				return bad(l, err.Error())
			}
		}
	default:
		return fmt.Errorf("%w: column %q is %s, which filters cannot compare", ErrType, c.name, c.typ)
	}
	return nil
}

func fits(i int64, id arrow.Type) bool {
	switch id {
	case arrow.INT8:
		return i >= math.MinInt8 && i <= math.MaxInt8
	case arrow.INT16:
		return i >= math.MinInt16 && i <= math.MaxInt16
	case arrow.INT32:
		return i >= math.MinInt32 && i <= math.MaxInt32
	case arrow.INT64:
		return true
	case arrow.UINT8:
		return i >= 0 && i <= math.MaxUint8
	case arrow.UINT16:
		return i >= 0 && i <= math.MaxUint16
	case arrow.UINT32:
		return i >= 0 && i <= math.MaxUint32
	case arrow.UINT64:
		return i >= 0
	}
	return false
}

// literalScalar makes l a scalar of type t, and the Go value statistics
// are compared with: int64 for integers, dates (days or milliseconds) and
// timestamps (in the column's unit), float64, string, bool.
func literalScalar(l *literal, t arrow.DataType) (scalar.Scalar, any, error) {
	switch id := t.ID(); {
	case arrow.IsInteger(id):
		sc, err := scalar.NewInt64Scalar(l.i).CastTo(t)
		return sc, l.i, err
	case id == arrow.FLOAT64:
		f := l.f
		if l.isInt {
			f = float64(l.i)
		}
		return scalar.NewFloat64Scalar(f), f, nil
	case id == arrow.STRING:
		return scalar.NewStringScalar(l.s), l.s, nil
	case id == arrow.LARGE_STRING:
		return scalar.NewLargeStringScalar(l.s), l.s, nil
	case id == arrow.BINARY:
		return scalar.NewBinaryScalar(memory.NewBufferBytes([]byte(l.s)), arrow.BinaryTypes.Binary), l.s, nil
	case id == arrow.LARGE_BINARY:
		return scalar.NewLargeBinaryScalar(memory.NewBufferBytes([]byte(l.s))), l.s, nil
	case id == arrow.BOOL:
		return scalar.NewBooleanScalar(l.b), l.b, nil
	case id == arrow.DATE32:
		tm, err := parseTime(l.s, true)
		if err != nil {
			return nil, nil, err
		}
		days := tm.Unix() / 86400
		return scalar.NewDate32Scalar(arrow.Date32(days)), days, nil
	case id == arrow.DATE64:
		tm, err := parseTime(l.s, true)
		if err != nil {
			return nil, nil, err
		}
		ms := tm.Unix() * 1000
		return scalar.NewDate64Scalar(arrow.Date64(ms)), ms, nil
	case id == arrow.TIMESTAMP:
		tm, err := parseTime(l.s, false)
		if err != nil {
			return nil, nil, err
		}
		v, err := inUnit(tm, t.(*arrow.TimestampType).Unit)
		if err != nil {
			return nil, nil, err
		}
		return scalar.NewTimestampScalar(arrow.Timestamp(v), t), v, nil
	}
	return nil, nil, fmt.Errorf("no literal of type %s", t)
}

// inUnit is tm in unit since the epoch; a literal finer than the unit is
// an error rather than a silent rounding.
func inUnit(tm time.Time, u arrow.TimeUnit) (int64, error) {
	sec, ns := tm.Unix(), int64(tm.Nanosecond())
	per := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[u]
	if ns%(1e9/per) != 0 {
		return 0, fmt.Errorf("%s is finer than the column's unit (%s)", tm.Format(time.RFC3339Nano), u)
	}
	if sec > math.MaxInt64/per || sec < math.MinInt64/per {
		return 0, fmt.Errorf("%s is out of the range of a timestamp in %s", tm.Format(time.RFC3339Nano), u)
	}
	return sec*per + ns/(1e9/per), nil
}

// parseTime parses a date ('2024-01-31') or, unless dateOnly, a timestamp
// ('2024-01-31 12:00', '2024-01-31T12:00:00.25Z', '...+02:00'); one without
// a zone is UTC.
func parseTime(s string, dateOnly bool) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if dateOnly {
		return time.Time{}, fmt.Errorf("a date as YYYY-MM-DD")
	}
	s = strings.Replace(s, " ", "T", 1)
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02T15:04Z07:00", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("a date or timestamp as YYYY-MM-DD[ HH:MM[:SS[.fraction]]][Z|±HH:MM]")
}

type bCompare struct {
	col *colRef
	op  string
	lit scalar.Scalar
	val any
}

func (n *bCompare) eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	col, err := n.col.datum(ctx, b)
	if err != nil {
		return nil, err
	}
	defer col.Release()
	return compute.CallFunction(ctx, compareFunc[n.op], nil, col, compute.NewDatum(n.lit))
}

type bIn struct {
	col  *colRef
	lits []*literal
	set  arrow.Array
	vals []any
}

// build makes the value set once: it is shared by every evaluation and
// lives as long as the filter.
func (n *bIn) build() error {
	scalars := make([]scalar.Scalar, len(n.lits))
	for i, l := range n.lits {
		sc, v, err := literalScalar(l, n.col.target)
		if err != nil {
			return fmt.Errorf("%w: %s for column %q: %w", ErrType, l, n.col.name, err)
		}
		scalars[i], n.vals = sc, append(n.vals, v)
	}
	parts := make([]arrow.Array, len(scalars))
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.Release()
			}
		}
	}()
	for i, sc := range scalars {
		p, err := scalar.MakeArrayFromScalar(sc, 1, memory.DefaultAllocator)
		if err != nil {
			return fmt.Errorf("%w: value set for column %q: %w", ErrType, n.col.name, err)
		}
		parts[i] = p
	}
	set, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%w: value set for column %q: %w", ErrType, n.col.name, err)
	}
	n.set = set
	return nil
}

func (n *bIn) eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	col, err := n.col.datum(ctx, b)
	if err != nil {
		return nil, err
	}
	defer col.Release()
	// A null tests unknown, not false, so that NOT (x IN (...)) drops it too.
	return compute.IsIn(ctx, compute.SetOptions{ValueSet: compute.NewDatumWithoutOwning(n.set), NullBehavior: compute.NullMatchingEmitNull}, col)
}

type bIsNull struct {
	col *colRef
	not bool
}

func (n *bIsNull) eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	fn := "is_null"
	if n.not {
		fn = "is_not_null"
	}
	return compute.CallFunction(ctx, fn, nil, compute.NewDatumWithoutOwning(b.Column(n.col.idx)))
}

type bBool struct{ col *colRef }

func (n *bBool) eval(_ context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	return compute.NewDatum(b.Column(n.col.idx)), nil
}

type bLogical struct {
	and  bool
	l, r bnode
}

func (n *bLogical) eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	l, err := n.l.eval(ctx, b)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	r, err := n.r.eval(ctx, b)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	fn := "or_kleene"
	if n.and {
		fn = "and_kleene"
	}
	return compute.CallFunction(ctx, fn, nil, l, r)
}

type bNot struct{ x bnode }

func (n *bNot) eval(ctx context.Context, b arrow.RecordBatch) (compute.Datum, error) {
	x, err := n.x.eval(ctx, b)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	return compute.CallFunction(ctx, "not", nil, x)
}

func scalarToArray(ctx context.Context, d *compute.ScalarDatum, rows int) (*array.Boolean, error) {
	arr, err := scalar.MakeArrayFromScalar(d.Value, rows, compute.GetAllocator(ctx))
	if err != nil {
		return nil, err
	}
	b, ok := arr.(*array.Boolean)
	if !ok {
		arr.Release()
		return nil, fmt.Errorf("evaluated to %s, not boolean", arr.DataType())
	}
	return b, nil
}
