package flatdecode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// TestDictionaryStrings reads string dictionaries, short entries and long
// ones (whose lengths have bytes that are not ASCII), valid UTF-8 and not,
// gathered from the page they lie in: the values are the entries, and
// ValidUTF8 says what checking each entry on its own says.
func TestDictionaryStrings(t *testing.T) {
	long := strings.Repeat("ü", 100) // 200 bytes: a length byte of 0xc8
	cases := map[string][]string{
		"short":                {"a", "", "héllo", "z"},
		"short invalid":        {"a", "b\xff", "c"},
		"cut between two":      {"a\xc3", "\xa9b"}, // é split across two entries
		"long":                 {long, "x", long + "y"},
		"long invalid":         {long, "\xc3", "x"},
		"long cut between two": {long + "\xc3", "\xa9", "ok"},
		// The next entry's length, 169, is 0xa9 0 0 0: after the cut
		// character it would read as é.
		"cut before a length": {"a\xc3", strings.Repeat("x", 169)},
		"cut inside":          {long[:193], "x"},
	}
	var lengths []string // 0 to 20 bytes: copied as 16 or exactly
	for i := range 42 {
		lengths = append(lengths, strings.Repeat(string(rune('a'+i%26)), i%21))
	}
	cases["lengths 0 to 20"] = lengths
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			var dict []byte
			valid := true
			for _, e := range entries {
				dict = binary.LittleEndian.AppendUint32(dict, uint32(len(e)))
				dict = append(dict, e...)
				valid = valid && utf8.ValidString(e)
			}
			// Every entry in turn, twice: an RLE run header of width 8 for
			// a bit-packed run of groups of 8.
			n := 2 * len(entries)
			groups := (n + 7) / 8
			values := []byte{8, byte(groups<<1 | 1)}
			for i := range groups * 8 {
				values = append(values, byte(i%len(entries)))
			}
			chunk := append(pageHeaderBytes(thrift.PageDictionary, len(dict), len(entries), encPlain), dict...)
			chunk = append(chunk, pageHeaderBytes(thrift.PageDataV2, len(values), n, encRLEDictionary)...)
			chunk = append(chunk, values...)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			col := Column{Name: "s", Physical: ByteArray, Type: arrow.BinaryTypes.String, Values: int64(n), Rows: int64(n), MaxPage: 1 << 20}
			r, err := Open(chunk, col, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			// In batches of 7 rows: each batch's last values end its
			// buffer.
			for at := 0; at < n; at += 7 {
				k := min(7, n-at)
				a, err := r.Next(k)
				if err != nil {
					t.Fatal(err)
				}
				if r.ValidUTF8() != valid {
					t.Errorf("rows from %d: ValidUTF8 %v, the entries checked one by one %v", at, r.ValidUTF8(), valid)
				}
				s := a.(*array.String)
				for i := range k {
					if got, want := s.Value(i), entries[(at+i)%len(entries)]; !bytes.Equal([]byte(got), []byte(want)) {
						t.Errorf("row %d: %q, want %q", at+i, got, want)
					}
				}
				a.Release()
			}
		})
	}
}

// TestIdentityChunkLent reads a chunk whose dictionary indices count up
// in batches of every size: through an allocator of the runtime's memory
// every batch is lent, the last and shorter one too; through a checked one
// none is; and the values are the entries either way.
func TestIdentityChunkLent(t *testing.T) {
	for _, p := range []Physical{Int32, ByteArray} {
		typ := arrow.DataType(arrow.PrimitiveTypes.Int32)
		if p == ByteArray {
			typ = arrow.BinaryTypes.String
		}
		col := Column{Name: "c", Physical: p, Type: typ, Codec: Uncompressed, Values: 16, Rows: 16, MaxPage: 1 << 20}
		for batch := 1; batch <= 16; batch++ {
			for _, lend := range []bool{false, true} {
				checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
				var mem memory.Allocator = checked
				if lend {
					mem = runtimeChecked{checked}
				}
				r, err := Open(identityChunk(p, 16), col, mem)
				if err != nil {
					t.Fatal(err)
				}
				before := lentBatches.Load()
				for at := 0; at < 16; at += batch {
					a, err := r.Next(min(batch, 16-at))
					if err != nil {
						t.Fatal(err)
					}
					for i := range a.Len() {
						row := at + i
						var got, want string
						if p == ByteArray {
							got, want = a.(*array.String).Value(i), string([]byte{'a' + byte(row%26), 'A' + byte(row/26)})
						} else {
							got, want = fmt.Sprint(a.(*array.Int32).Value(i)), fmt.Sprint(row*3+1)
						}
						if got != want {
							t.Fatalf("%v, batches of %d, lend %v: row %d is %s, want %s", p, batch, lend, row, got, want)
						}
					}
					a.Release()
				}
				r.Release()
				if lent := lentBatches.Load() - before; (lent == int64((16+batch-1)/batch)) != lend {
					t.Errorf("%v, batches of %d, lend %v: %d batches lent", p, batch, lend, lent)
				}
				checked.AssertSize(t, 0)
			}
		}
	}
}
