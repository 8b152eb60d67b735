package iceberg

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
)

// eqSet is one equality delete file, read: the keys of the rows it
// deletes, over its columns (by their current names).
type eqSet struct {
	path    string
	columns []string
	keys    map[string]struct{}
}

// loadEqualityDeletes reads every equality delete file the plan names.
// They are applied while reading, but read once, here: a data file's
// filter then only looks keys up.
func (t *Table) loadEqualityDeletes(ctx context.Context) error {
	t.eq = make([]*eqSet, len(t.plan.EqDeletes))
	seen := map[string]bool{}
	for _, e := range t.plan.EqDeletes {
		for _, id := range e.FieldIDs {
			f, ok := t.schema.FindFieldByID(id)
			if !ok {
				return fmt.Errorf("iceberg: equality delete file %s deletes by field %d, which the current schema dropped; sluice reads columns of the current schema only", e.Path, id)
			}
			if !seen[f.Name] {
				seen[f.Name] = true
				t.eqFields = append(t.eqFields, f.Name)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.opts.Concurrency)
	for i, e := range t.plan.EqDeletes {
		g.Go(func() error {
			s, err := t.readEqualityDeletes(gctx, e)
			if err != nil {
				return fmt.Errorf("iceberg: equality delete file %s: %w", e.Path, err)
			}
			t.eq[i] = s
			return nil
		})
	}
	return g.Wait()
}

func (t *Table) readEqualityDeletes(ctx context.Context, e eqDeleteFile) (*eqSet, error) {
	if len(e.FieldIDs) == 0 {
		return nil, fmt.Errorf("%w: it names no equality field", formats.ErrCorrupt)
	}
	ids := slices.Clone(e.FieldIDs)
	fields := make([]ice.NestedField, len(ids))
	s := &eqSet{path: e.Path, keys: map[string]struct{}{}}
	for i, id := range ids {
		fields[i], _ = t.schema.FindFieldByID(id) // checked by the caller
		s.columns = append(s.columns, fields[i].Name)
	}
	sub, err := table.SchemaToArrowSchema(ice.NewSchema(0, fields...), nil, true, false)
	if err != nil {
		return nil, err
	}
	file := formats.File{
		URL: t.loc.url(e.Path),
		Columns: func(file *arrow.Schema) (map[string]string, error) {
			m, err := mapByID(t.schema, t.meta.NameMapping(), file)
			if err != nil {
				return nil, err
			}
			for _, c := range s.columns {
				if _, ok := m[c]; !ok {
					return nil, fmt.Errorf("the file lacks equality column %q", c)
				}
			}
			return m, nil
		},
	}
	var key []byte
	err = t.readFiles(ctx, []formats.File{file}, e.Format, formats.PlanOptions{Schema: sub, Columns: s.columns}, func(b arrow.RecordBatch) error {
		for r := range int(b.NumRows()) {
			key = key[:0]
			for c := range int(b.NumCols()) {
				key = appendKey(key, b.Column(c), r)
			}
			s.keys[string(key)] = struct{}{}
		}
		return nil
	})
	return s, err
}

// eqFilter is the equality deletes that apply to one data file, as a row
// filter: a row is kept unless some delete file holds its key.
type eqFilter struct {
	sets    []*eqSet
	columns []string
}

func (t *Table) eqFilter(idx []int) *eqFilter {
	f := &eqFilter{}
	for _, i := range idx {
		s := t.eq[i]
		f.sets = append(f.sets, s)
		for _, c := range s.columns {
			if !slices.Contains(f.columns, c) {
				f.columns = append(f.columns, c)
			}
		}
	}
	return f
}

// Columns are the columns the deletes compare.
func (f *eqFilter) Columns() []string { return f.columns }

// String names the delete files.
func (f *eqFilter) String() string {
	var paths []string
	for _, s := range f.sets {
		paths = append(paths, s.path)
	}
	return "iceberg equality deletes " + strings.Join(paths, ", ")
}

// Keep is false for the rows a delete file holds.
func (f *eqFilter) Keep(ctx context.Context, b arrow.RecordBatch) (*array.Boolean, error) {
	n := int(b.NumRows())
	bld := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer bld.Release()
	bld.Reserve(n)
	cols := make([][]arrow.Array, len(f.sets))
	for i, s := range f.sets {
		for _, c := range s.columns {
			idx := b.Schema().FieldIndices(c)
			if len(idx) == 0 {
				return nil, fmt.Errorf("%w: the batch lacks column %q", formats.ErrSchema, c)
			}
			cols[i] = append(cols[i], b.Column(idx[0]))
		}
	}
	var key []byte
	for r := range n {
		keep := true
		for i, s := range f.sets {
			key = key[:0]
			for _, c := range cols[i] {
				key = appendKey(key, c, r)
			}
			if _, hit := s.keys[string(key)]; hit {
				keep = false
				break
			}
		}
		bld.UnsafeAppend(keep)
	}
	return bld.NewBooleanArray(), nil
}

// appendKey appends an encoding of row r of a to key in which values
// equal under Iceberg's promotions are equal bytes: integers as int64,
// floats as float64. A null matches a null, as the spec asks of equality
// deletes.
func appendKey(key []byte, a arrow.Array, r int) []byte {
	if a.IsNull(r) {
		return append(key, 0)
	}
	switch a := a.(type) {
	case *array.Int8:
		return appendInt(key, int64(a.Value(r)))
	case *array.Int16:
		return appendInt(key, int64(a.Value(r)))
	case *array.Int32:
		return appendInt(key, int64(a.Value(r)))
	case *array.Int64:
		return appendInt(key, a.Value(r))
	case *array.Uint8:
		return appendInt(key, int64(a.Value(r)))
	case *array.Uint16:
		return appendInt(key, int64(a.Value(r)))
	case *array.Uint32:
		return appendInt(key, int64(a.Value(r)))
	case *array.Float32:
		return appendFloat(key, float64(a.Value(r)))
	case *array.Float64:
		return appendFloat(key, a.Value(r))
	case *array.String:
		return appendBytes(key, []byte(a.Value(r)))
	case *array.LargeString:
		return appendBytes(key, []byte(a.Value(r)))
	case *array.Binary:
		return appendBytes(key, a.Value(r))
	case *array.LargeBinary:
		return appendBytes(key, a.Value(r))
	case *array.FixedSizeBinary:
		return appendBytes(key, a.Value(r))
	case *array.Boolean:
		if a.Value(r) {
			return append(key, 1, 1)
		}
		return append(key, 1, 0)
	case *array.Date32:
		return appendInt(key, int64(a.Value(r)))
	case *array.Timestamp:
		return appendInt(key, int64(a.Value(r)))
	case *array.Time64:
		return appendInt(key, int64(a.Value(r)))
	}
	// Other types (decimals, nested) by their canonical text.
	sc, err := scalar.GetScalar(a, r)
	if err != nil {
		return appendBytes(key, []byte("?"+strconv.Itoa(r)))
	}
	return appendBytes(key, []byte(sc.String()))
}

func appendInt(key []byte, v int64) []byte {
	key = append(key, 2)
	return binary.LittleEndian.AppendUint64(key, uint64(v))
}

func appendFloat(key []byte, v float64) []byte {
	if v == 0 {
		v = 0 // -0 equals 0
	}
	key = append(key, 3)
	return binary.LittleEndian.AppendUint64(key, math.Float64bits(v))
}

func appendBytes(key, b []byte) []byte {
	key = append(key, 4)
	key = binary.AppendUvarint(key, uint64(len(b)))
	return append(key, b...)
}
