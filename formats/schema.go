package formats

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// unify computes the projected schema and checks every file against it.
// Types may differ only where they widen safely (see widen); nullability is
// the union.
func unify(frags []*Fragment, columns []string) (*arrow.Schema, error) {
	if len(frags) == 0 {
		return nil, fmt.Errorf("formats: %w", ErrEmpty)
	}
	first := frags[0]
	if columns == nil {
		for _, f := range first.Schema.Fields() {
			columns = append(columns, f.Name)
		}
	}
	fields := make([]arrow.Field, len(columns))
	from := make([]string, len(columns)) // which file set each field's type
	for i, name := range columns {
		idx := first.Schema.FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("formats: %w: column %q is not in %s (it has %s)", ErrSchema, name, first.URL, fieldNames(first.Schema))
		}
		fields[i] = first.Schema.Field(idx[0])
		from[i] = first.URL
	}
	for _, f := range frags[1:] {
		for i, name := range columns {
			idx := f.Schema.FieldIndices(name)
			if len(idx) == 0 {
				return nil, fmt.Errorf("formats: %w: column %q is in %s but not in %s", ErrSchema, name, from[i], f.URL)
			}
			got := f.Schema.Field(idx[0])
			wide, ok := widen(fields[i].Type, got.Type)
			if !ok {
				return nil, fmt.Errorf("formats: %w: column %q is %s in %s but %s in %s", ErrSchema, name, fields[i].Type, from[i], got.Type, f.URL)
			}
			if !arrow.TypeEqual(wide, fields[i].Type) {
				from[i] = f.URL
			}
			fields[i].Type = wide
			fields[i].Nullable = fields[i].Nullable || got.Nullable
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// Widen returns col as the type of field, the dataset's column it reads,
// where planning unified the files' types to a wider one (see widen): col
// itself where it has that type already. It takes col. Drivers call it on
// every column they decode.
func Widen(ctx context.Context, col arrow.Array, field arrow.Field, mem memory.Allocator) (arrow.Array, error) {
	if arrow.TypeEqual(col.DataType(), field.Type) {
		return col, nil
	}
	cast, err := compute.CastArray(compute.WithAllocator(ctx, mem), col, compute.SafeCastOptions(field.Type))
	col.Release()
	if err != nil {
		return nil, fmt.Errorf("%w: widen column %q to %s: %w", ErrSchema, field.Name, field.Type, err)
	}
	return cast, nil
}

// widen returns the type both a and b convert to without loss, if any:
// integers to a wider integer of the same signedness, unsigned integers to a
// wider signed one, float32 to float64, and string/binary to their large
// forms.
func widen(a, b arrow.DataType) (arrow.DataType, bool) {
	if arrow.TypeEqual(a, b) {
		return a, true
	}
	if w, ok := widerOf(a, b); ok {
		return w, true
	}
	return widerOf(b, a)
}

func widerOf(narrow, wide arrow.DataType) (arrow.DataType, bool) {
	rank := func(t arrow.DataType) (signed, unsigned, float int) {
		switch t.ID() {
		case arrow.INT8:
			return 8, 0, 0
		case arrow.INT16:
			return 16, 0, 0
		case arrow.INT32:
			return 32, 0, 0
		case arrow.INT64:
			return 64, 0, 0
		case arrow.UINT8:
			return 0, 8, 0
		case arrow.UINT16:
			return 0, 16, 0
		case arrow.UINT32:
			return 0, 32, 0
		case arrow.UINT64:
			return 0, 64, 0
		case arrow.FLOAT32:
			return 0, 0, 32
		case arrow.FLOAT64:
			return 0, 0, 64
		}
		return 0, 0, 0
	}
	ns, nu, nf := rank(narrow)
	ws, wu, wf := rank(wide)
	switch {
	case ns > 0 && ws > ns:
		return wide, true
	case nu > 0 && (ws > nu || wu > nu):
		return wide, true
	case nf > 0 && wf > nf:
		return wide, true
	case isDecimalPromotion(narrow, wide):
		return wide, true
	case narrow.ID() == arrow.STRING && wide.ID() == arrow.LARGE_STRING,
		narrow.ID() == arrow.BINARY && wide.ID() == arrow.LARGE_BINARY:
		return wide, true
	}
	return nil, false
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return strings.Join(names, ", ")
}

// isDecimalPromotion reports whether wide holds every value of narrow: a
// decimal of the same scale and a greater precision (Iceberg's decimal
// promotion), in as many bytes or more.
func isDecimalPromotion(narrow, wide arrow.DataType) bool {
	n, ok1 := narrow.(arrow.DecimalType)
	w, ok2 := wide.(arrow.DecimalType)
	if !ok1 || !ok2 {
		return false
	}
	nw, _ := narrow.(arrow.FixedWidthDataType)
	ww, _ := wide.(arrow.FixedWidthDataType)
	if nw == nil || ww == nil || ww.BitWidth() < nw.BitWidth() {
		return false
	}
	return n.GetScale() == w.GetScale() && w.GetPrecision() > n.GetPrecision()
}
