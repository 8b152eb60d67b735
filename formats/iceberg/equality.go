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
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
)

// eqSet is one equality delete file, read: the keys of the rows it
// deletes, over its columns (by their current names). A file over one
// integer-like column (the common id key) keeps its keys as integers and
// one over one string or binary column as their bytes, which rows look up
// without building a key; other files keep the generic encoding of
// appendKey.
type eqSet struct {
	path    string
	columns []string
	kind    keyKind
	keys    map[string]struct{} // keyGeneric: appendKey's encoding; keyBytes: the bytes
	ints    intKeys             // keyInts
	null    bool                // keyInts, keyBytes: a null key deletes null rows
}

type keyKind uint8

const (
	keyGeneric keyKind = iota
	keyInts
	keyBytes
)

// kindOf is the key kind of a delete file over columns of these types.
func kindOf(types []arrow.DataType) keyKind {
	if len(types) != 1 {
		return keyGeneric
	}
	switch types[0].ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.DATE32, arrow.TIMESTAMP, arrow.TIME64:
		return keyInts
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return keyBytes
	}
	return keyGeneric
}

// add adds a key in appendKey's encoding.
func (s *eqSet) add(key []byte, ints *[]int64) {
	switch {
	case s.kind == keyGeneric:
		s.keys[string(key)] = struct{}{}
	case key[0] == 0:
		s.null = true
	case s.kind == keyInts:
		*ints = append(*ints, int64(binary.LittleEndian.Uint64(key[1:])))
	default:
		_, n := binary.Uvarint(key[1:])
		s.keys[string(key[1+n:])] = struct{}{}
	}
}

// appendInts appends the keys of a, the one column of a delete file of
// integer keys, as add would, where a's type has a path of its own; false
// where it has none.
func (s *eqSet) appendInts(a arrow.Array, ints *[]int64) bool {
	switch a := a.(type) {
	case *array.Int64:
		appendIntKeys(s, a, a.Int64Values(), ints)
	case *array.Int32:
		appendIntKeys(s, a, a.Int32Values(), ints)
	default:
		return false
	}
	return true
}

func appendIntKeys[T int32 | int64](s *eqSet, a arrow.Array, vs []T, ints *[]int64) {
	if a.NullN() == 0 {
		for _, v := range vs {
			*ints = append(*ints, int64(v))
		}
		return
	}
	for r, v := range vs {
		if a.IsNull(r) {
			s.null = true
			continue
		}
		*ints = append(*ints, int64(v))
	}
}

// hasKey reports whether the set holds a key in appendKey's encoding.
func (s *eqSet) hasKey(key []byte) bool {
	switch {
	case s.kind == keyGeneric:
		_, ok := s.keys[string(key)]
		return ok
	case key[0] == 0:
		return s.null
	case s.kind == keyInts:
		return key[0] == 2 && s.ints.has(int64(binary.LittleEndian.Uint64(key[1:])))
	case key[0] == 4:
		_, n := binary.Uvarint(key[1:])
		_, ok := s.keys[string(key[1+n:])]
		return ok
	}
	return false
}

// intKeys is a set of integers: a bitmap over their span where that is
// at most a few hundred bits a key (ids deleted here and there), else a
// map.
type intKeys struct {
	lo, hi int64
	bits   []uint64
	m      map[int64]struct{}
}

func newIntKeys(vs []int64) intKeys {
	if len(vs) == 0 {
		return intKeys{lo: 1, hi: 0} // holds nothing
	}
	k := intKeys{lo: slices.Min(vs), hi: slices.Max(vs)}
	if span := uint64(k.hi) - uint64(k.lo); span < 256*uint64(len(vs)) && span < 1<<34 {
		k.bits = make([]uint64, span/64+1)
		for _, v := range vs {
			d := uint64(v) - uint64(k.lo)
			k.bits[d/64] |= 1 << (d % 64)
		}
		return k
	}
	k.m = make(map[int64]struct{}, len(vs))
	for _, v := range vs {
		k.m[v] = struct{}{}
	}
	return k
}

func (k *intKeys) has(v int64) bool {
	if v < k.lo || v > k.hi {
		return false
	}
	if k.bits != nil {
		d := uint64(v) - uint64(k.lo)
		return k.bits[d/64]&(1<<(d%64)) != 0
	}
	_, ok := k.m[v]
	return ok
}

// loadEqualityDeletes reads every equality delete file the plan names, on
// g (Open's reads of delete files, so that these run beside the position
// deletes' within one bound): t.eq holds them once g is waited for. They
// are applied while reading, but read once, here: a data file's filter
// then only looks keys up.
func (t *Table) loadEqualityDeletes(ctx context.Context, g *errgroup.Group, files []eqDeleteFile) error {
	t.eq = make([]*eqSet, len(files))
	seen := map[string]bool{}
	for _, e := range files {
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
	for i, e := range files {
		g.Go(func() error {
			s, err := t.readEqualityDeletes(ctx, e)
			if err != nil {
				return fmt.Errorf("iceberg: equality delete file %s: %w", e.Path, err)
			}
			t.eq[i] = s
			return nil
		})
	}
	return nil
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
	var types []arrow.DataType
	for _, f := range sub.Fields() {
		types = append(types, f.Type)
	}
	s.kind = kindOf(types)
	var ints []int64
	file := formats.File{
		URL: t.loc.url(e.Path),
		Columns: func(file *arrow.Schema) (map[string]string, error) {
			m, err := mapByID(t.schema, t.names, file)
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
	if s.kind == keyInts {
		// The file's count, as its manifest says it, saves growing the
		// keys a batch at a time; bounded, since the count is the
		// metadata's word only.
		ints = make([]int64, 0, min(max(e.Records, 0), 1<<20))
	}
	var key []byte
	err = t.readFiles(ctx, []formats.File{file}, e.Format, formats.PlanOptions{Schema: sub, Columns: s.columns}, func(b arrow.RecordBatch) error {
		if s.kind == keyInts && s.appendInts(b.Column(0), &ints) {
			return nil
		}
		for r := range int(b.NumRows()) {
			key = key[:0]
			for c := range int(b.NumCols()) {
				key = appendKey(key, b.Column(c), r)
			}
			s.add(key, &ints)
		}
		return nil
	})
	if s.kind == keyInts {
		s.ints = newIntKeys(ints)
	}
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
	buf := memory.NewResizableBuffer(memory.DefaultAllocator)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	keep := buf.Bytes()
	for i := range keep {
		keep[i] = 0xff
	}
	var cols []arrow.Array
	var key []byte
	for _, s := range f.sets {
		cols = cols[:0]
		for _, c := range s.columns {
			idx := b.Schema().FieldIndices(c)
			if len(idx) == 0 {
				buf.Release()
				return nil, fmt.Errorf("%w: the batch lacks column %q", formats.ErrSchema, c)
			}
			cols = append(cols, b.Column(idx[0]))
		}
		if s.drop(cols[0], keep) {
			continue
		}
		for r := range n {
			if !bitutil.BitIsSet(keep, r) {
				continue
			}
			key = key[:0]
			for _, c := range cols {
				key = appendKey(key, c, r)
			}
			if s.hasKey(key) {
				bitutil.ClearBit(keep, r)
			}
		}
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer data.Release()
	return array.NewBooleanData(data), nil
}

// drop clears the keep bits of the rows of a (the set's one column) whose
// key the set holds, where the set's kind and a's type have a fast path;
// false where they have none.
func (s *eqSet) drop(a arrow.Array, keep []byte) bool {
	switch s.kind {
	case keyInts:
		switch a := a.(type) {
		case *array.Int64:
			dropInts(s, a, a.Int64Values(), keep)
		case *array.Int32:
			dropInts(s, a, a.Int32Values(), keep)
		case *array.Int16:
			dropInts(s, a, a.Int16Values(), keep)
		case *array.Int8:
			dropInts(s, a, a.Int8Values(), keep)
		case *array.Date32:
			dropInts(s, a, a.Date32Values(), keep)
		case *array.Timestamp:
			dropInts(s, a, a.TimestampValues(), keep)
		case *array.Time64:
			dropInts(s, a, a.Time64Values(), keep)
		default:
			return false
		}
		return true
	case keyBytes:
		switch a := a.(type) {
		case *array.String:
			for r := range a.Len() {
				if a.IsNull(r) {
					if s.null {
						bitutil.ClearBit(keep, r)
					}
				} else if _, hit := s.keys[a.Value(r)]; hit {
					bitutil.ClearBit(keep, r)
				}
			}
		case *array.Binary:
			for r := range a.Len() {
				if a.IsNull(r) {
					if s.null {
						bitutil.ClearBit(keep, r)
					}
				} else if _, hit := s.keys[string(a.Value(r))]; hit {
					bitutil.ClearBit(keep, r)
				}
			}
		default:
			return false
		}
		return true
	}
	return false
}

func dropInts[T int8 | int16 | int32 | int64 | arrow.Date32 | arrow.Timestamp | arrow.Time64](s *eqSet, a arrow.Array, vs []T, keep []byte) {
	nulls := a.NullN() > 0
	if k := &s.ints; k.bits != nil && !nulls {
		// The common case (ids, no nulls) in one unsigned compare and a
		// bit test a row, the bitmap's bounds held in registers.
		lo, span, bits := uint64(k.lo), uint64(k.hi)-uint64(k.lo), k.bits
		for r, v := range vs {
			if d := uint64(int64(v)) - lo; d <= span && bits[d/64]&(1<<(d%64)) != 0 {
				keep[r/8] &^= 1 << (r % 8)
			}
		}
		return
	}
	for r, v := range vs {
		if nulls && a.IsNull(r) {
			if s.null {
				bitutil.ClearBit(keep, r)
			}
			continue
		}
		if s.ints.has(int64(v)) {
			bitutil.ClearBit(keep, r)
		}
	}
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
