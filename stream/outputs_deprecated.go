package stream

// The typed outputs moved to package typed; these names stay for one
// release so that callers move at their pace.

import (
	"context"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/stream/typed"
)

// MapAny is Map for a caller that cannot name the result type in a type
// parameter: package typed decodes its outputs through it, so that they run
// on TransformConcurrency goroutines as Map's functions do. Prefer Map.
func (d *Dataset) MapAny(ctx context.Context, fn func(context.Context, arrow.RecordBatch) (any, error)) iter.Seq2[any, error] {
	return Map(ctx, d, fn)
}

// ErrOutputMapping is typed.ErrOutputMapping.
//
// Deprecated: use typed.ErrOutputMapping.
var ErrOutputMapping = typed.ErrOutputMapping

// ErrNullValue is typed.ErrNullValue.
//
// Deprecated: use typed.ErrNullValue.
var ErrNullValue = typed.ErrNullValue

// Matrix is typed.Matrix.
//
// Deprecated: use typed.Matrix.
type Matrix = typed.Matrix

// Structs is typed.Structs over ds.
//
// Deprecated: use typed.Structs.
func Structs[T any](ctx context.Context, ds *Dataset) iter.Seq2[[]T, error] {
	return typed.Structs[T](ctx, ds)
}

// Rows is typed.Rows over ds.
//
// Deprecated: use typed.Rows.
func Rows(ctx context.Context, ds *Dataset) iter.Seq2[[]map[string]any, error] {
	return typed.Rows(ctx, ds)
}

// Matrices is typed.Matrices over ds.
//
// Deprecated: use typed.Matrices.
func Matrices(ctx context.Context, ds *Dataset, columns []string) iter.Seq2[Matrix, error] {
	return typed.Matrices(ctx, ds, columns)
}
