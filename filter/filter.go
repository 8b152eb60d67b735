package filter

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
)

// Filter is a parsed row filter. It implements formats.Filter, and is safe
// for concurrent use: it binds itself once to each schema it meets.
type Filter struct {
	root node
	text string
	cols []string

	mu    sync.Mutex
	bound []*binding // one per schema met; datasets have one or two
}

type binding struct {
	schema *arrow.Schema
	root   bnode
}

// Parse parses a filter expression. The grammar, loosest binding first:
//
//	expr      := and { OR and }
//	and       := not { AND not }
//	not       := NOT not | predicate
//	predicate := operand [ cmp operand | [NOT] IN ( literal {, literal} )
//	             | [NOT] BETWEEN operand AND operand | IS [NOT] NULL ]
//	cmp       := = | <> | != | < | <= | > | >=
//	operand   := ( expr ) | column | literal
//	literal   := number | 'string' | TRUE | FALSE | NULL
//	             | DATE 'YYYY-MM-DD' | TIMESTAMP 'YYYY-MM-DD[ HH:MM[:SS[.f]]][Z|±HH:MM]'
//
// Keywords are case-insensitive; a column is a bare name (letters, digits,
// _ and ., not starting with a digit) or any text in double quotes ("" for
// a quote); strings are in single quotes (a quote doubled inside). Errors are
// *SyntaxError, with the offset and what was expected.
func Parse(text string) (*Filter, error) {
	root, err := parse(text)
	if err != nil {
		return nil, err
	}
	f := &Filter{root: root, text: root.String()}
	walk(root, func(n node) {
		if c, ok := n.(*column); ok && !slices.Contains(f.cols, c.name) {
			f.cols = append(f.cols, c.name)
		}
	})
	return f, nil
}

func walk(n node, fn func(node)) {
	fn(n)
	switch n := n.(type) {
	case *comparison:
		walk(n.l, fn)
		walk(n.r, fn)
	case *inList:
		walk(n.x, fn)
	case *between:
		walk(n.x, fn)
		walk(n.lo, fn)
		walk(n.hi, fn)
	case *isNull:
		walk(n.x, fn)
	case *logical:
		walk(n.l, fn)
		walk(n.r, fn)
	case *negation:
		walk(n.x, fn)
	}
}

// String is the canonical text: keywords in capitals, columns quoted, every
// operation parenthesized, literals normalized. Parsing it gives the same
// filter; it is what plan fingerprints hold.
func (f *Filter) String() string { return f.text }

// Columns are the columns the filter reads, in order of first mention.
func (f *Filter) Columns() []string { return slices.Clone(f.cols) }

// Check binds the filter to schema: every column must exist and every
// literal must be comparable with its column (a date or timestamp string
// must parse as one where the column is a date or timestamp). Errors name
// the column and the literal.
func (f *Filter) Check(schema *arrow.Schema) error {
	_, err := f.bind(schema)
	return err
}

func (f *Filter) bind(schema *arrow.Schema) (bnode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bound {
		if b.schema == schema || b.schema.Equal(schema) {
			return b.root, nil
		}
	}
	root, err := bindBool(f.root, schema)
	if err != nil {
		return nil, fmt.Errorf("filter %s: %w", f.text, err)
	}
	if len(f.bound) >= 16 {
		f.bound = f.bound[1:] // a caller cycling through schemas: keep the latest
	}
	f.bound = append(f.bound, &binding{schema: schema, root: root})
	return root, nil
}

// Keep evaluates the filter over b with compute kernels: true where a row
// passes; false or null (unknown, as SQL has it) where it does not. The
// kernels allocate with compute.GetAllocator(ctx).
func (f *Filter) Keep(ctx context.Context, b arrow.RecordBatch) (*array.Boolean, error) {
	root, err := f.bind(b.Schema())
	if err != nil {
		return nil, err
	}
	d, err := root.eval(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("filter %s: %w", f.text, err)
	}
	defer d.Release()
	switch d := d.(type) {
	case *compute.ArrayDatum:
		out := d.MakeArray().(*array.Boolean)
		return out, nil
	case *compute.ScalarDatum:
		// A predicate on no column at all cannot be built (bind refuses it),
		// but a constant subtree folds to a scalar: spread it over the rows.
		arr, err := scalarToArray(ctx, d, int(b.NumRows()))
		if err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("filter %s: evaluated to %s, not an array", f.text, d.Kind())
}
