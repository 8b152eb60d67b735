package typed

import "github.com/apache/arrow-go/v18/arrow"

// The decoders, for the tests of package typed_test: they need package
// stream for a dataset, and stream imports this package.

var (
	NewStructPlan = newStructPlan
	NewRowsPlan   = newRowsPlan
	NewMatrixPlan = newMatrixPlan
)

func DecodeStructs[T any](p *structPlan, b arrow.RecordBatch) ([]T, error) {
	return decodeStructs[T](p, b)
}

// PlanField is a field of a struct plan: the column it decodes, and its
// name dotted through embedded structs.
type PlanField struct{ Column, Name string }

func (p *structPlan) Fields() []PlanField {
	var out []PlanField
	for _, f := range p.fields {
		out = append(out, PlanField{f.column, f.name})
	}
	return out
}

func (p *rowsPlan) Decode(b arrow.RecordBatch) ([]map[string]any, error) { return p.decode(b) }

func (p *matrixPlan) Decode(b arrow.RecordBatch) (Matrix, error) { return p.decode(b) }

func (p *matrixPlan) Columns() []string { return p.columns }
