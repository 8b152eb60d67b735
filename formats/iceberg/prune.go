package iceberg

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
)

// colStats is what a manifest says of one column of a data file, by field
// id: what pruning by a row filter reads.
type colStats struct {
	ID                     int
	Values, Nulls          int64 // -1: not recorded
	Lower, Upper           []byte
	LowerValid, UpperValid bool // the bounds are recorded (an empty string's are empty)
}

// partValue is one partition field's value of a data file, in Iceberg's
// single-value binary form (Null where the value is null). Unread, if set,
// says why the value the manifest holds was not understood: pruning
// passes it by, and a column read from it is refused.
type partValue struct {
	FieldID int
	Value   []byte
	Null    bool
	Unread  string
}

// fileMetrics keeps a data file's column statistics and partition for
// pruning; they go into the plan cache with the file.
func fileMetrics(df ice.DataFile, spec *ice.PartitionSpec, schema *ice.Schema) ([]colStats, []partValue) {
	values, nulls := df.ValueCounts(), df.NullValueCounts()
	lower, upper := df.LowerBoundValues(), df.UpperBoundValues()
	ids := map[int]bool{}
	for _, m := range []map[int]int64{values, nulls} {
		for id := range m {
			ids[id] = true
		}
	}
	for _, m := range []map[int][]byte{lower, upper} {
		for id := range m {
			ids[id] = true
		}
	}
	var stats []colStats
	for id := range ids {
		s := colStats{ID: id, Values: -1, Nulls: -1}
		if v, ok := values[id]; ok {
			s.Values = v
		}
		if v, ok := nulls[id]; ok {
			s.Nulls = v
		}
		s.Lower, s.LowerValid = lower[id]
		s.Upper, s.UpperValid = upper[id]
		stats = append(stats, s)
	}
	var parts []partValue
	if spec != nil {
		pv := df.Partition()
		for _, pf := range spec.Fields() {
			v, ok := pv[pf.FieldID]
			if !ok {
				continue
			}
			if v == nil {
				parts = append(parts, partValue{FieldID: pf.FieldID, Null: true})
				continue
			}
			src, ok := schema.FindFieldByID(pf.SourceID())
			if !ok {
				continue
			}
			lit, err := defaultLiteral(v, pf.Transform.ResultType(src.Type))
			var b []byte
			if err == nil {
				b, err = lit.MarshalBinary()
			}
			if err != nil {
				parts = append(parts, partValue{FieldID: pf.FieldID, Unread: fmt.Sprintf("%v (%T): %v", v, v, err)})
				continue
			}
			parts = append(parts, partValue{FieldID: pf.FieldID, Value: b})
		}
	}
	return stats, parts
}

// mayMatcher is a row filter that can rule out a file from statistics
// (package filter's).
type mayMatcher interface {
	MayMatch(schema *arrow.Schema, stats func(column string) (filter.Stats, bool)) bool
}

// prune keeps the files a row filter may keep rows of, judged from their
// column bounds and partitions; where the filter cannot judge, every
// file. A filter that rules out every file keeps none: an empty dataset
// of the table's schema (see Plan).
func (t *Table) prune(flt formats.Filter, files []plannedFile) []int {
	all := make([]int, len(files))
	for i := range all {
		all[i] = i
	}
	m, ok := flt.(mayMatcher)
	if !ok {
		return all
	}
	var keep []int
	for i := range files {
		if m.MayMatch(t.arrow, func(column string) (filter.Stats, bool) { return t.columnStats(&files[i], column) }) {
			keep = append(keep, i)
		}
	}
	return keep
}

// columnStats is what the manifest and the partition say of a column of a
// data file, in package filter's terms.
func (t *Table) columnStats(pf *plannedFile, column string) (filter.Stats, bool) {
	field, ok := t.schema.FindFieldByName(column)
	if !ok {
		return filter.Stats{}, false
	}
	typ, ok := field.Type.(ice.PrimitiveType)
	if !ok {
		return filter.Stats{}, false
	}
	s := filter.Stats{Rows: pf.Records, Nulls: -1}
	known := false
	for _, cs := range pf.Stats {
		if cs.ID != field.ID {
			continue
		}
		known = true
		if cs.Values >= 0 {
			s.Rows = cs.Values
		}
		s.Nulls = cs.Nulls
		if cs.LowerValid && cs.UpperValid {
			lo, hi := boundValue(typ, cs.Lower), boundValue(typ, cs.Upper)
			if lo != nil && hi != nil {
				s.Min, s.Max = lo, hi
			}
		}
	}
	spec := t.meta.PartitionSpecByID(int(pf.SpecID))
	if spec == nil {
		return s, known
	}
	for _, pv := range pf.Partition {
		if pv.Unread != "" {
			continue
		}
		var part *ice.PartitionField
		for _, f := range spec.Fields() {
			if f.FieldID == pv.FieldID && f.SourceID() == field.ID {
				part = &f
				break
			}
		}
		if part == nil {
			continue
		}
		if _, void := part.Transform.(ice.VoidTransform); void {
			continue
		}
		// A partition of the column: the file was written with it.
		known = true
		if pv.Null {
			// Every transform but void maps null, and only null, to null.
			s.Nulls, s.Min, s.Max, s.MayContain = s.Rows, nil, nil, nil
			return s, true
		}
		lit, err := ice.LiteralFromBytes(part.Transform.ResultType(field.Type), pv.Value)
		if err != nil {
			continue
		}
		s.Nulls = 0 // a non-null partition value: no null source value
		if lo, hi := transformRange(part.Transform, typ, lit); lo != nil {
			s.Min, s.Max = narrow(s.Min, lo, 1), narrow(s.Max, hi, -1)
		}
		tr, src := part.Transform, typ
		prev := s.MayContain
		s.MayContain = func(v any) bool {
			if prev != nil && !prev(v) {
				return false
			}
			l := sourceLiteral(src, v)
			if l == nil {
				return true
			}
			got := tr.Apply(ice.Optional[ice.Literal]{Valid: true, Val: l})
			return !got.Valid || got.Val.Equals(lit)
		}
	}
	// Without statistics or a partition of the column, nothing is known:
	// a file written before the column was added (its rows read null or
	// the initial default), or by a writer that kept no statistics.
	return s, known
}

// narrow is the tighter of a bound and b: the greater (sign 1) or lesser
// (sign -1); cur where they do not compare.
func narrow(cur, b any, sign int) any {
	if cur == nil {
		return b
	}
	c, ok := compareValues(b, cur)
	if ok && c*sign > 0 {
		return b
	}
	return cur
}

func compareValues(a, b any) (int, bool) {
	switch a := a.(type) {
	case int64:
		if b, ok := b.(int64); ok {
			return cmp.Compare(a, b), true
		}
	case float64:
		if b, ok := b.(float64); ok && !math.IsNaN(a) && !math.IsNaN(b) {
			return cmp.Compare(a, b), true
		}
	case string:
		if b, ok := b.(string); ok {
			return cmp.Compare(a, b), true
		}
	}
	return 0, false
}

// boundValue decodes a manifest bound of a column now of type typ, in
// package filter's Go types; nil where it cannot. A bound written before
// a promotion is in the older type (int for long, float for double).
func boundValue(typ ice.PrimitiveType, b []byte) any {
	switch typ.(type) {
	case ice.Int64Type:
		if len(b) == 4 {
			return int64(int32(binary.LittleEndian.Uint32(b)))
		}
	case ice.Float64Type:
		if len(b) == 4 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
	}
	lit, err := ice.LiteralFromBytes(typ, b)
	if err != nil {
		return nil
	}
	return filterValue(lit)
}

// filterValue is a literal in package filter's Go types: int64 for
// integers, dates (days) and timestamps (in their unit), float64, string
// for strings and bytes, bool; nil for others.
func filterValue(l ice.Literal) any {
	switch l := l.(type) {
	case ice.BoolLiteral:
		return bool(l)
	case ice.Int32Literal:
		return int64(l)
	case ice.Int64Literal:
		return int64(l)
	case ice.Float32Literal:
		if math.IsNaN(float64(l)) {
			return nil
		}
		return float64(l)
	case ice.Float64Literal:
		if math.IsNaN(float64(l)) {
			return nil
		}
		return float64(l)
	case ice.DateLiteral:
		return int64(l)
	case ice.TimestampLiteral:
		return int64(l)
	case ice.TimestampNsLiteral:
		return int64(l)
	case ice.StringLiteral:
		return string(l)
	case ice.BinaryLiteral:
		return string(l)
	case ice.FixedLiteral:
		return string(l)
	}
	return nil
}

// sourceLiteral is a filter value of a column of type typ as an Iceberg
// literal, for a transform to apply; nil where it cannot be.
func sourceLiteral(typ ice.PrimitiveType, v any) ice.Literal {
	switch v := v.(type) {
	case int64:
		switch typ.(type) {
		case ice.Int32Type:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil
			}
			return ice.Int32Literal(v)
		case ice.Int64Type:
			return ice.Int64Literal(v)
		case ice.DateType:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil
			}
			return ice.DateLiteral(v)
		case ice.TimestampType, ice.TimestampTzType:
			return ice.TimestampLiteral(v)
		case ice.TimestampNsType, ice.TimestampTzNsType:
			return ice.TimestampNsLiteral(v)
		}
	case string:
		switch typ.(type) {
		case ice.StringType:
			return ice.StringLiteral(v)
		case ice.BinaryType:
			return ice.BinaryLiteral(v)
		}
	}
	return nil
}

// transformRange bounds the source values (of type src) that a partition
// value of an order-preserving transform comes from; nils where it does
// not bound them.
func transformRange(tr ice.Transform, src ice.PrimitiveType, part ice.Literal) (lo, hi any) {
	unit := int64(0) // microseconds or nanoseconds a day, for timestamps
	switch src.(type) {
	case ice.TimestampType, ice.TimestampTzType:
		unit = int64(time.Microsecond)
	case ice.TimestampNsType, ice.TimestampTzNsType:
		unit = int64(time.Nanosecond)
	}
	ticks := func(d time.Duration) int64 { return int64(d) / unit } // a duration in the source's unit
	switch tr := tr.(type) {
	case ice.IdentityTransform:
		v := filterValue(part)
		if v == nil {
			return nil, nil
		}
		return v, v
	case ice.TruncateTransform:
		v, ok := filterValue(part).(int64)
		if !ok {
			if s, ok := filterValue(part).(string); ok {
				return s, nil // a prefix bounds below only
			}
			return nil, nil
		}
		return v, v + int64(tr.Width) - 1
	case ice.DayTransform:
		d, ok := filterValue(part).(int64)
		if !ok {
			return nil, nil
		}
		if unit == 0 { // a date
			return d, d
		}
		day := ticks(24 * time.Hour)
		return d * day, (d+1)*day - 1
	case ice.HourTransform:
		h, ok := filterValue(part).(int64)
		if !ok || unit == 0 {
			return nil, nil
		}
		hour := ticks(time.Hour)
		return h * hour, (h+1)*hour - 1
	case ice.MonthTransform, ice.YearTransform:
		n, ok := filterValue(part).(int64)
		if !ok {
			return nil, nil
		}
		months := n
		step := 1
		if _, year := tr.(ice.YearTransform); year {
			months, step = n*12, 12
		}
		start := time.Date(1970, time.Month(1+months), 1, 0, 0, 0, 0, time.UTC) // Date normalizes months
		end := time.Date(1970, time.Month(1+months+int64(step)), 1, 0, 0, 0, 0, time.UTC)
		if unit == 0 {
			return start.Unix() / 86400, end.Unix()/86400 - 1
		}
		return start.Unix() * ticks(time.Second), end.Unix()*ticks(time.Second) - 1
	}
	return nil, nil
}
