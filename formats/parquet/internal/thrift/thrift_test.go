package thrift

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// writer writes the compact protocol as writers do: field ids as deltas
// where they fit, else in long form.
type writer struct {
	b    []byte
	last []int16 // the last field id of each open struct
}

func (w *writer) field(id int16, typ byte) {
	last := &w.last[len(w.last)-1]
	if d := id - *last; d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|typ)
	} else {
		w.b = append(w.b, typ)
		w.zigzag(int64(id))
	}
	*last = id
}

func (w *writer) zigzag(v int64)        { w.b = binary.AppendUvarint(w.b, uint64(v<<1)^uint64(v>>63)) }
func (w *writer) i32(id int16, v int64) { w.field(id, I32); w.zigzag(v) }
func (w *writer) begin(id int16)        { w.field(id, Struct); w.last = append(w.last, 0) }
func (w *writer) end()                  { w.b = append(w.b, Stop); w.last = w.last[:len(w.last)-1] }
func newWriter() *writer                { return &writer{last: []int16{0}} }

// v2Header is a DATA_PAGE_V2 header with statistics and an unknown field
// before and after its sub-header, every field of it set.
func v2Header() ([]byte, PageHeader) {
	w := newWriter()
	w.i32(1, PageDataV2)
	w.i32(2, 5000)
	w.i32(3, 4000)
	w.i32(4, 12345) // crc
	w.begin(8)
	w.i32(1, 700)
	w.i32(2, 30)
	w.i32(3, 650)
	w.i32(4, 8) // RLE_DICTIONARY
	w.i32(5, 90)
	w.i32(6, 20)
	w.field(7, False)
	w.begin(8) // statistics
	w.field(1, Binary)
	w.b = append(w.b, 3, 'a', 'b', 'c')
	w.end()
	w.end()
	w.field(40, Binary) // a field of a later format version
	w.b = append(w.b, 2, 'x', 'y')
	w.end()
	return w.b, PageHeader{
		Type: PageDataV2, Uncompressed: 5000, Compressed: 4000, Size: len(w.b),
		HasV2: true, Values: 700, Nulls: 30, Rows: 650, Encoding: 8,
		DefEnc: -1, RepEnc: -1, DefLen: 90, RepLen: 20, CompressedV2: false,
	}
}

// v1Header is a DATA_PAGE header.
func v1Header() ([]byte, PageHeader) {
	w := newWriter()
	w.i32(1, PageData)
	w.i32(2, 100)
	w.i32(3, 90)
	w.begin(5)
	w.i32(1, 10)
	w.i32(2, 0)
	w.i32(3, 3)
	w.i32(4, 4)
	w.end()
	w.end()
	return w.b, PageHeader{Type: PageData, Uncompressed: 100, Compressed: 90, Size: len(w.b), HasData: true, Values: 10, Encoding: 0, DefEnc: 3, RepEnc: 4, CompressedV2: true}
}

// twiceHeader is a dictionary page header that gives its sub-header twice
// and no sizes.
func twiceHeader() ([]byte, PageHeader) {
	w := newWriter()
	w.i32(1, PageDictionary)
	w.begin(7)
	w.i32(1, 3)
	w.i32(2, 0)
	w.end()
	w.begin(7)
	w.i32(1, 4)
	w.end()
	w.end()
	return w.b, PageHeader{Type: PageDictionary, Uncompressed: -1, Compressed: -1, Size: len(w.b), HasDict: true, Repeated: true, Values: 4, Encoding: 0, DefEnc: -1, RepEnc: -1, CompressedV2: true}
}

// Each field is read from where its sub-header puts it; a sub-header given
// twice is flagged, the later fields winning; what a header does not give
// is -1.
func TestParsePageHeader(t *testing.T) {
	for name, header := range map[string]func() ([]byte, PageHeader){"DATA_PAGE_V2": v2Header, "DATA_PAGE": v1Header, "dictionary given twice": twiceHeader} {
		b, want := header()
		body := append(b, 0xff, 0xff) // the page's body, not the header's
		if got, err := ParsePageHeader(body); err != nil || got != want {
			t.Errorf("%s: got %+v, %v\nwant %+v", name, got, err, want)
		}
	}
}

// Every header cut short is refused, and where its bytes end between
// values, as ErrShort, which the page checks tell from a header that is
// wrong. (A length or count cut from the bytes it claims is refused by
// name, as the footer's checks want.)
func TestParsePageHeaderShort(t *testing.T) {
	b, _ := v2Header()
	for n := range len(b) {
		_, err := ParsePageHeader(b[:n])
		if err == nil {
			t.Fatalf("%d of %d bytes parsed", n, len(b))
		}
		if !errors.Is(err, ErrShort) && !strings.Contains(err.Error(), "binary of ") {
			t.Fatalf("%d of %d bytes: %v, want ErrShort", n, len(b), err)
		}
	}
}

// Counts that claim more than the bytes hold are refused by name before
// anything is sized by them, and so are values nested past MaxDepth.
func TestReaderRefuses(t *testing.T) {
	nested := func(depth int) []byte {
		var b []byte
		for range depth {
			b = append(b, 1<<4|Struct)
		}
		b = append(b, 1<<4|I32, 2)
		for range depth + 1 {
			b = append(b, Stop)
		}
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string // "" for none
	}{
		{"list of 2^40", append([]byte{1<<4 | List, 0xf0 | I32}, binary.AppendUvarint(nil, 1<<40)...), "list claims 1099511627776 elements"},
		{"list cut short", []byte{1<<4 | List, 3<<4 | I32, 2, 4}, ErrShort.Error()},
		{"map of 2^40", append([]byte{1<<4 | Map}, binary.AppendUvarint(nil, 1<<40)...), "map claims"},
		{"map of more entries than half the bytes", []byte{1<<4 | Map, 4, I32<<4 | I32, 2, 2, 2, 2, Stop}, "map claims 4 entries in 6 bytes"},
		{"map of booleans", []byte{1<<4 | Map, 2, True<<4 | False, 1, 2, 1, 2, Stop}, ""},
		{"binary of 2^40", append([]byte{1<<4 | Binary}, binary.AppendUvarint(nil, 1<<40)...), "binary of 1099511627776 bytes"},
		{"varint of eleven bytes", []byte{1<<4 | I64, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1, Stop}, "varint longer than 64 bits"},
		{"unknown type", []byte{1<<4 | 14, Stop}, "unknown type 14"},
		{"as deep as allowed", nested(MaxDepth - 1), ""},
		{"one deeper", nested(MaxDepth), "deeper than 64"},
		{"double and uuid", append(append([]byte{1<<4 | Double}, make([]byte, 8)...), append([]byte{1<<4 | UUID}, append(make([]byte, 16), Stop)...)...), ""},
	} {
		r := NewReader(c.b)
		err := r.Skip(Struct, 0)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && r.Pos() != len(c.b):
			t.Errorf("%s: read %d of %d bytes", c.name, r.Pos(), len(c.b))
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Uvarint reads what encoding/binary writes, and takes the same bytes.
func TestUvarint(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 1<<32 - 1, 1 << 56, 1<<64 - 1} {
		b := binary.AppendUvarint(nil, v)
		in := append([]byte{0xff}, append(b, 0x80)...)
		got, next, err := Uvarint(in, 1)
		if err != nil || got != v || next != 1+len(b) {
			t.Errorf("%d: got %d to %d, %v; want to %d", v, got, next, err, 1+len(b))
		}
		if _, _, err := Uvarint(b[:len(b)-1], 0); !errors.Is(err, ErrShort) {
			t.Errorf("%d cut short: %v", v, err)
		}
	}
	if _, _, err := Uvarint([]byte{1}, 2); !errors.Is(err, ErrShort) {
		t.Errorf("past the end: %v", err)
	}
}
