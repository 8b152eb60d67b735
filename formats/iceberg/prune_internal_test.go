package iceberg

import (
	"math/rand/v2"
	"testing"

	ice "github.com/apache/iceberg-go"
)

// transformRange gives exactly the source values a partition value of an
// order-preserving transform comes from: its ends map to the value, the
// values just outside them do not.
func TestTransformRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	apply := func(tr ice.Transform, src ice.PrimitiveType, v int64) ice.Literal {
		out := tr.Apply(ice.Optional[ice.Literal]{Valid: true, Val: sourceLiteral(src, v)})
		if !out.Valid {
			t.Fatalf("%s of %d: no value", tr, v)
		}
		return out.Val
	}
	for _, c := range []struct {
		tr   ice.Transform
		src  ice.PrimitiveType
		span int64
	}{
		{ice.DayTransform{}, ice.PrimitiveTypes.Timestamp, 4e15},
		{ice.HourTransform{}, ice.PrimitiveTypes.TimestampTz, 4e15},
		{ice.MonthTransform{}, ice.PrimitiveTypes.Timestamp, 4e15},
		{ice.YearTransform{}, ice.PrimitiveTypes.Timestamp, 4e15},
		{ice.DayTransform{}, ice.PrimitiveTypes.TimestampNs, 4e18},
		{ice.MonthTransform{}, ice.PrimitiveTypes.Date, 40000},
		{ice.YearTransform{}, ice.PrimitiveTypes.Date, 40000},
		{ice.DayTransform{}, ice.PrimitiveTypes.Date, 40000},
		{ice.TruncateTransform{Width: 10}, ice.PrimitiveTypes.Int64, 1000},
		{ice.IdentityTransform{}, ice.PrimitiveTypes.Int32, 1000},
	} {
		for range 200 {
			v := rng.Int64N(2*c.span) - c.span
			part := apply(c.tr, c.src, v)
			lo, hi := transformRange(c.tr, c.src, part)
			l, ok1 := lo.(int64)
			h, ok2 := hi.(int64)
			if !ok1 || !ok2 {
				t.Fatalf("%s(%s) of %d: range %v..%v", c.tr, c.src, v, lo, hi)
			}
			if v < l || v > h || !apply(c.tr, c.src, l).Equals(part) || !apply(c.tr, c.src, h).Equals(part) ||
				apply(c.tr, c.src, l-1).Equals(part) || apply(c.tr, c.src, h+1).Equals(part) {
				t.Fatalf("%s(%s) of %d is %s: range %d..%d is not its exact preimage", c.tr, c.src, v, part, l, h)
			}
		}
	}
}
