package avro

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// readFile reads a whole file from its bytes as the driver does: the
// header, the walk of its blocks, and every object of every block
// decoded into Arrow builders. Errors are returned; nothing may panic,
// hang or leak Arrow memory.
func readFile(t *testing.T, data []byte) error {
	o := Format{MaxBlockBytes: 1 << 20}
	head := data[:min(len(data), headGuess)]
	h, err := parseHeader(head)
	if err != nil {
		return err
	}
	m, err := o.newMeta(h)
	if err != nil {
		return err
	}
	w := &window{r: bytes.NewReader(data), size: int64(len(data))}
	if m.blocks, err = walk(context.Background(), w, h.size, h.sync, minSize(m.root), o.limit(h.codec)); err != nil {
		return err
	}
	m.count()
	m.units = []int{0, len(m.blocks)}
	fields := make([]arrow.Field, len(m.cols))
	for i, c := range m.cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: c.typ.nullable}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := &formats.Read{Range: formats.Range{Start: 0, End: m.starts[len(m.blocks)], EndUnit: 1}, Schema: arrow.NewSchema(fields, nil), BatchRows: 64, Mem: mem}
	fe := &fetched{off: 0, data: data}
	for b, err := range o.Decode(context.Background(), &formats.Fragment{Meta: m}, fe, r) {
		if err != nil {
			if !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("a decode error without ErrCorrupt: %v", err)
			}
			return err
		}
		b.Release()
	}
	return nil
}

// FuzzValues decodes objects of a schema from arbitrary bytes, the
// schema itself fuzzed too.
func FuzzValues(f *testing.F) {
	schemas := []string{
		`{"type": "record", "name": "r", "fields": [{"name": "a", "type": ["null", "long"]}, {"name": "b", "type": {"type": "array", "items": "string"}}]}`,
		`{"type": "record", "name": "r", "fields": [{"name": "m", "type": {"type": "map", "values": ["int", "string", "null"]}}, {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}`,
		`{"type": "record", "name": "r", "fields": [{"name": "f", "type": {"type": "fixed", "name": "f", "size": 12, "logicalType": "duration"}}, {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A"]}}]}`,
		`{"type": "array", "items": {"type": "record", "name": "kv", "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "double"}]}, "logicalType": "map"}`,
	}
	for _, s := range schemas {
		f.Add(s, []byte{2, 4, 6, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	}
	f.Fuzz(func(t *testing.T, schema string, data []byte) {
		root, err := parseSchema([]byte(schema))
		if err != nil {
			return
		}
		cols := columns(root)
		fields := make([]arrow.Field, len(cols))
		m := &meta{cols: cols, byName: map[string]int{}}
		for i, c := range cols {
			fields[i] = arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: c.typ.nullable}
			m.byName[c.name] = i
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		d, err := m.newReader(&formats.Read{Schema: arrow.NewSchema(fields, nil), BatchRows: 16, Mem: mem})
		if err != nil {
			return
		}
		defer d.release()
		c := &cursor{b: data}
		for i := 0; c.p < len(c.b) && c.err == nil && i < 1000; i++ {
			if i%2 == 0 {
				d.decode(c)
			} else {
				d.skip(c)
			}
		}
		if c.err != nil {
			d.rows = 0 // a failed object leaves builders uneven: not emitted
			return
		}
		_ = d.flush(context.Background(), func(b arrow.RecordBatch) error {
			if err := array.ValidateRecordFull(b); err != nil {
				t.Errorf("decoded an invalid batch: %v", err)
			}
			b.Release()
			return nil
		})
	})
}
