package avro_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// Files written byte by byte from the specification, for what writers
// rarely do (blocks of array items that give their size, metadata in a
// block that gives its size) and for every kind of damage.

func long(b []byte, v int64) []byte { return binary.AppendVarint(b, v) } // zig-zag, as Avro's
func str(b []byte, s string) []byte { return append(long(b, int64(len(s))), s...) }

var testSync = []byte("0123456789abcdef")

// craftedBlock is one block: its claimed object count and its bytes.
type craftedBlock struct {
	count int64
	data  []byte
}

// container writes an object container file of schema, codec null.
func container(schema string, blocks ...craftedBlock) []byte {
	return containerCodec(schema, "null", blocks...)
}

func containerCodec(schema, codec string, blocks ...craftedBlock) []byte {
	b := []byte("Obj\x01")
	// The metadata map in one block of two entries that gives its size.
	var meta []byte
	meta = str(meta, "avro.schema")
	meta = str(meta, schema)
	meta = str(meta, "avro.codec")
	meta = str(meta, codec)
	b = long(b, -2)
	b = long(b, int64(len(meta)))
	b = append(b, meta...)
	b = long(b, 0)
	b = append(b, testSync...)
	for _, bl := range blocks {
		b = long(b, bl.count)
		b = long(b, int64(len(bl.data)))
		b = append(b, bl.data...)
		b = append(b, testSync...)
	}
	return b
}

const craftedSchema = `{"type": "record", "name": "r", "fields": [
	{"name": "a", "type": "long"},
	{"name": "arr", "type": {"type": "array", "items": "int"}},
	{"name": "m", "type": {"type": "map", "values": "string"}},
	{"name": "u", "type": ["null", "string"]},
	{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
	{"name": "ok", "type": "boolean"}
]}`

// craftedRow encodes row i of craftedSchema: arrays in two blocks, the
// second giving its size; a map in one block; u null on odd rows.
func craftedRow(b []byte, i int64) []byte {
	b = long(b, i*1000-7)
	b = long(b, 2) // a block of two items
	b = long(b, i)
	b = long(b, -i)
	item := long(nil, 42)
	b = long(b, -1) // a block of one item, and its size
	b = long(b, int64(len(item)))
	b = append(b, item...)
	b = long(b, 0)
	b = long(b, 1)
	b = str(b, "k")
	b = str(b, "v"+string(rune('a'+i%26)))
	b = long(b, 0)
	if i%2 == 1 {
		b = long(b, 0)
	} else {
		b = long(b, 1)
		b = str(b, "s")
	}
	b = long(b, i%2)
	return append(b, byte(i%2))
}

func craftedBlocks(rows ...int64) []craftedBlock {
	var out []craftedBlock
	var next int64
	for _, n := range rows {
		var data []byte
		for range n {
			data = craftedRow(data, next)
			next++
		}
		out = append(out, craftedBlock{n, data})
	}
	return out
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCraftedFile reads a file written by hand, whole and in ranges, and
// checks it against twmb/avro's reading and against the values written.
func TestCraftedFile(t *testing.T) {
	path := writeFile(t, "crafted.avro", container(craftedSchema, craftedBlocks(3, 0, 5, 1, 7)...))
	want := reference(t, path)
	if len(want) != 16 {
		t.Fatalf("twmb/avro reads %d rows, want 16", len(want))
	}
	for i, w := range want {
		if w["a"] != int64(i)*1000-7 || len(w["arr"].([]any)) != 3 || (w["u"] == nil) != (i%2 == 1) {
			t.Fatalf("twmb/avro reads row %d as %v", i, w)
		}
	}
	// A unit a block: ranges cut across the empty block too.
	ds := plan(t, avro.Format{UnitBytes: 1}, formats.PlanOptions{}, path)
	if n := len(ds.Fragments[0].Units); n != 5 {
		t.Fatalf("%d units, want a unit a block (5)", n)
	}
	sameRows(t, "whole", readRows(t, ds, 0, 0, 16, 4), want)
	for lo := int64(0); lo <= 16; lo++ {
		for hi := lo; hi <= 16; hi++ {
			sameRows(t, "range", readRows(t, ds, 0, lo, hi, 2), want[lo:hi])
		}
	}
	// A selection of columns, the others skipped (blocks of array items
	// with their size passed over whole).
	ds = plan(t, avro.Format{}, formats.PlanOptions{Columns: []string{"ok", "a"}}, path)
	got := readRows(t, ds, 0, 3, 16, 5)
	for i, g := range got {
		if len(g) != 2 || g["a"] != want[i+3]["a"] || g["ok"] != want[i+3]["ok"] {
			t.Fatalf("row %d: %v, want a and ok of %v", i+3, g, want[i+3])
		}
	}
}

// TestDamage: each kind of damage is refused with ErrCorrupt and an error
// that names the file and where in it, never a panic or wrong rows.
func TestDamage(t *testing.T) {
	good := container(craftedSchema, craftedBlocks(3, 4, 5)...)
	blocks := craftedBlocks(3, 4, 5)
	// Where block 1 starts: after the header and block 0.
	headerLen := len(container(craftedSchema))
	block1 := len(container(craftedSchema, blocks[0]))
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"bad magic", append([]byte("Obj\x02"), good[4:]...), "magic"},
		{"not avro", []byte("PAR1 is not avro at all"), "magic"},
		{"empty", nil, "inside its header"},
		{"header cut", good[:headerLen-3], "inside its header"},
		{"block cut", good[:block1+10], "block 1 at byte"},
		{"last sync cut", good[:len(good)-5], "block 2 at byte"},
		{"bad sync", func() []byte {
			b := append([]byte(nil), good...)
			b[block1-1] ^= 0xff // the last byte of block 0's sync marker
			return b
		}(), "block 0 at byte"},
		{"count too high", container(craftedSchema, blocks[0], craftedBlock{5, blocks[1].data}, blocks[2]), "block 1"},
		{"count too low", container(craftedSchema, blocks[0], craftedBlock{3, blocks[1].data}, blocks[2]), "a lying object count"},
		{"count far too high", container(craftedSchema, craftedBlock{1 << 40, blocks[0].data}), "claims 1099511627776 objects"},
		{"negative count", container(craftedSchema, craftedBlock{-3, blocks[0].data}), "claims -3 objects"},
		{"bad boolean", container(craftedSchema, craftedBlock{1, append(craftedRow(nil, 0)[:len(craftedRow(nil, 0))-1], 7)}), "boolean byte 7"},
		{"bad branch", container(craftedSchema, craftedBlock{1, swapTail(craftedRow(nil, 1), 3, []byte{4, 2, 1})}), "union branch 2"},
		{"bad enum", container(craftedSchema, craftedBlock{1, swapTail(craftedRow(nil, 1), 2, []byte{10, 1})}), "enum E symbol 5"},
		{"bad utf8", container(`{"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}`, craftedBlock{1, str(nil, "\xff\xfe")}), "not valid UTF-8"},
		{"huge array", container(`{"type": "record", "name": "r", "fields": [{"name": "s", "type": {"type": "array", "items": "long"}}]}`, craftedBlock{1, long(nil, 1<<50)}), "items in the"},
		{"bad schema", container(`{"type": "record", "name": "r", "fields": [{"name": "s", "type": "nosuch"}]}`), "unknown type"},
		{"recursive schema", container(`{"type": "record", "name": "r", "fields": [{"name": "next", "type": ["null", "r"]}]}`), "recursive"},
		{"xz", containerCodec(craftedSchema, "xz"), `codec "xz" is not supported`},
		{"unknown codec", containerCodec(craftedSchema, "lzma2"), `unknown codec "lzma2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "damaged.avro", c.file)
			err := readErr(t, path)
			if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "damaged.avro") {
				t.Fatalf("got %v, want ErrCorrupt naming the file and %q", err, c.want)
			}
			t.Log(err)
		})
	}
}

// swapTail replaces the last n bytes of b with tail.
func swapTail(b []byte, n int, tail []byte) []byte {
	return append(b[:len(b)-n:len(b)-n], tail...)
}

// TestLargeHeader: a header larger than the first read (a schema with a
// long doc) is read in more requests.
func TestLargeHeader(t *testing.T) {
	schema := strings.Replace(craftedSchema, `"name": "r",`, `"name": "r", "doc": "`+strings.Repeat("d", 300<<10)+`",`, 1)
	path := writeFile(t, "big-header.avro", container(schema, craftedBlocks(4, 2)...))
	ds := plan(t, avro.Format{}, formats.PlanOptions{}, path)
	sameRows(t, "whole", readRows(t, ds, 0, 0, 6, 4), reference(t, path))
}

// TestEdgeTypes: types at the edges of the specification read as
// twmb/avro reads them, with the Arrow types the docs give.
func TestEdgeTypes(t *testing.T) {
	cases := []struct {
		name, schema string
		row          []byte // one object
		types        string
		// want is the object as read, where twmb/avro refuses the schema
		// (a decimal without precision, which the specification reads as
		// its underlying type).
		want map[string]any
	}{
		{"fixed of 0 and an empty record", `{"type": "record", "name": "r", "fields": [{"name": "z", "type": {"type": "fixed", "name": "z0", "size": 0}}, {"name": "e", "type": {"type": "record", "name": "empty", "fields": []}}, {"name": "a", "type": "int"}]}`,
			[]byte{6}, "z: fixed_size_binary[0], e: struct<>, a: int32", nil},
		{"root not a record", `"long"`, []byte{0x81, 0x01}, "value: int64", nil},
		{"root an array", `{"type": "array", "items": "string"}`, append(append([]byte{2}, str(nil, "x")...), 0), "value: list<element: utf8>", nil},
		{"union of one type", `{"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int"]}]}`, []byte{0, 8}, "u: int32", nil},
		{"union of null only", `{"type": "record", "name": "r", "fields": [{"name": "u", "type": ["null"]}]}`, []byte{0}, "u: null", nil},
		{"namespaces and references", `{"type": "record", "name": "a.b.r", "fields": [
			{"name": "x", "type": {"type": "fixed", "name": "f", "size": 1}},
			{"name": "y", "type": "a.b.f"},
			{"name": "z", "type": {"type": "record", "name": "s", "namespace": "c", "fields": [{"name": "w", "type": "a.b.f"}, {"name": "v", "type": {"type": "enum", "name": "e", "symbols": ["P", "Q"]}}]}},
			{"name": "q", "type": "c.e"}]}`, []byte{1, 2, 3, 2, 0}, "x: fixed_size_binary[1], y: fixed_size_binary[1], z: struct<w: fixed_size_binary[1], v: utf8>, q: utf8", nil},
		{"invalid and unknown logical types", `{"type": "record", "name": "r", "fields": [
			{"name": "d", "type": {"type": "bytes", "logicalType": "decimal"}},
			{"name": "t", "type": {"type": "int", "logicalType": "timestamp-millis"}},
			{"name": "k", "type": {"type": "long", "logicalType": "no-such-type"}},
			{"name": "l", "type": {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false}}]}`,
			[]byte{2, 0xff, 4, 6, 8}, "d: binary, t: int32, k: int64, l: timestamp[us]",
			map[string]any{"d": []byte{0xff}, "t": int32(2), "k": int64(3), "l": norm(time.UnixMicro(4))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "edge.avro", container(c.schema, craftedBlock{2, append(slices.Clone(c.row), c.row...)}))
			ds := plan(t, avro.Format{}, formats.PlanOptions{}, path)
			var types []string
			for _, f := range ds.Schema.Fields() {
				types = append(types, f.Name+": "+f.Type.String())
			}
			if got := strings.Join(types, ", "); got != c.types {
				t.Errorf("types %s, want %s", got, c.types)
			}
			var want []map[string]any
			if c.want != nil {
				want = []map[string]any{c.want, c.want}
			} else {
				want = reference(t, path)
			}
			sameRows(t, c.name, readRows(t, ds, 0, 0, 2, 1), want)
		})
	}
}
