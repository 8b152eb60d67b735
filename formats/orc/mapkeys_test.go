package orc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
)

// mapFile writes an uncompressed ORC file of one column m map<int,int>,
// three rows {1:10}, {k:20, 3:30}, {}, where k is null if nullKey, else 2:
// ORC has no rule against a PRESENT stream on a map's keys, Arrow has one
// against null keys.
func mapFile(t *testing.T, nullKey bool) string {
	t.Helper()
	varints := func(signed bool, vs ...int64) []byte { // RLE v1 literals
		b := []byte{byte(-len(vs))}
		for _, v := range vs {
			u := uint64(v)
			if signed {
				u = protowire.EncodeZigZag(v)
			}
			b = protowire.AppendVarint(b, u)
		}
		return b
	}
	type stream struct {
		kind, column uint64
		data         []byte
	}
	streams := []stream{
		{2, 1, varints(false, 1, 2, 0)}, // the map's LENGTH
		{1, 3, varints(true, 10, 20, 30)},
	}
	if nullKey {
		streams = append(streams, stream{0, 2, []byte{0xff, 0b1010_0000}}, stream{1, 2, varints(true, 1, 3)})
	} else {
		streams = append(streams, stream{1, 2, varints(true, 1, 2, 3)})
	}
	file := []byte("ORC")
	var sf []byte
	for _, s := range streams {
		file = append(file, s.data...)
		var m []byte
		for i, v := range []uint64{s.kind, s.column, uint64(len(s.data))} {
			m = protowire.AppendTag(m, protowire.Number(i+1), protowire.VarintType)
			m = protowire.AppendVarint(m, v)
		}
		sf = protowire.AppendTag(sf, 1, protowire.BytesType)
		sf = protowire.AppendBytes(sf, m)
	}
	dataLen := uint64(len(file) - 3)
	for range 4 {
		sf = protowire.AppendTag(sf, 2, protowire.BytesType)
		sf = protowire.AppendBytes(sf, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0)) // DIRECT
	}
	file = append(file, sf...)
	var si []byte
	for i, v := range []uint64{3, 0, dataLen, uint64(len(sf)), 3} {
		si = protowire.AppendTag(si, protowire.Number(i+1), protowire.VarintType)
		si = protowire.AppendVarint(si, v)
	}
	typ := func(kind uint64, subtypes []uint64, names ...string) []byte {
		b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), kind)
		for _, s := range subtypes {
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), s)
		}
		for _, n := range names {
			b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), n)
		}
		return b
	}
	var ft []byte
	ft = protowire.AppendVarint(protowire.AppendTag(ft, 1, protowire.VarintType), 3)
	ft = protowire.AppendVarint(protowire.AppendTag(ft, 2, protowire.VarintType), uint64(len(file)))
	ft = protowire.AppendBytes(protowire.AppendTag(ft, 3, protowire.BytesType), si)
	for _, tp := range [][]byte{typ(12, []uint64{1}, "m"), typ(11, []uint64{2, 3}), typ(3, nil), typ(3, nil)} {
		ft = protowire.AppendBytes(protowire.AppendTag(ft, 4, protowire.BytesType), tp)
	}
	ft = protowire.AppendVarint(protowire.AppendTag(ft, 6, protowire.VarintType), 3)
	file = append(file, ft...)
	var ps []byte
	ps = protowire.AppendVarint(protowire.AppendTag(ps, 1, protowire.VarintType), uint64(len(ft)))
	ps = protowire.AppendVarint(protowire.AppendTag(ps, 2, protowire.VarintType), 0)
	ps = protowire.AppendBytes(protowire.AppendTag(ps, 4, protowire.BytesType), []byte{0, 12})
	ps = protowire.AppendString(protowire.AppendTag(ps, 8000, protowire.BytesType), "ORC")
	file = append(append(file, ps...), byte(len(ps)))
	path := filepath.Join(t.TempDir(), "maps.orc")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A map with a null key is refused by name, naming the file, the stripe
// and the column, where building the Arrow map used to panic ("the decoder
// failed: arrow/array: map array keys array should have no nulls"). The
// same file with the key set reads.
func TestNullMapKey(t *testing.T) {
	ctx := context.Background()
	read := func(path string) (string, error) {
		ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{orc.Format{}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		var got []string
		err = ds.Read(ctx, 0, ds.RowRange(0, 0, ds.Fragments[0].Rows), 100, nil, func(b arrow.RecordBatch) error {
			defer b.Release()
			m := b.Column(0).(*array.Map)
			for i := range m.Len() {
				got = append(got, m.ValueStr(i))
			}
			return nil
		})
		return strings.Join(got, " "), err
	}
	got, err := read(mapFile(t, false))
	if err != nil || got != `[{"key":1,"value":10}] [{"key":2,"value":20},{"key":3,"value":30}] []` {
		t.Fatalf("without null keys: %q, %v", got, err)
	}
	path := mapFile(t, true)
	_, err = read(path)
	if err == nil {
		t.Fatal("a null map key was read")
	}
	msg := err.Error()
	for _, want := range []string{path, "stripe 0", `column "m": a map key is null`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if !errors.Is(err, formats.ErrCorrupt) || strings.Contains(msg, "decoder failed") || strings.Contains(msg, "arrow/array") {
		t.Errorf("error %q: want ErrCorrupt and no panic text", msg)
	}
}
