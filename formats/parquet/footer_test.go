package parquet

import (
	"github.com/sluicedata/sluice/formats"

	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// compact writes Thrift's compact protocol, enough to build footers by hand.
// Field ids are always written in long form, which readers must accept.
type compact struct{ bytes.Buffer }

func (c *compact) varint(v uint64) { c.Write(binary.AppendUvarint(nil, v)) }
func (c *compact) zigzag(v int64)  { c.varint(uint64(v<<1) ^ uint64(v>>63)) }
func (c *compact) field(id int16, typ byte) {
	c.WriteByte(typ)
	c.zigzag(int64(id))
}
func (c *compact) i32(id int16, v int32) { c.field(id, thrift.I32); c.zigzag(int64(v)) }
func (c *compact) i64(id int16, v int64) { c.field(id, thrift.I64); c.zigzag(v) }
func (c *compact) str(id int16, s string) {
	c.field(id, thrift.Binary)
	c.varint(uint64(len(s)))
	c.WriteString(s)
}
func (c *compact) list(id int16, elem byte, n int) {
	c.field(id, thrift.List)
	c.WriteByte(15<<4 | elem)
	c.varint(uint64(n))
}
func (c *compact) stop() { c.WriteByte(thrift.Stop) }

// schemaElem writes a SchemaElement: a group if children > 0, else a
// required INT32 leaf.
func (c *compact) schemaElem(name string, children int32) {
	if children == 0 {
		c.i32(1, 1) // type INT32
		c.i32(3, 0) // REQUIRED
	}
	c.str(4, name)
	if children != 0 {
		c.i32(5, children)
	}
	c.stop()
}

// parquetFile wraps a footer in magic and length, and writes it to a file.
func parquetFile(t *testing.T, footer []byte) string {
	t.Helper()
	b := append([]byte("PAR1"), footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	b = append(b, "PAR1"...)
	path := filepath.Join(t.TempDir(), "crafted.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFooterBombs plans files whose few-byte footers claim enormous counts.
// Before checkFooter, arrow-go and Thrift allocated what they claimed: most
// of a gigabyte for a list, a fatal (unrecoverable) out-of-memory for a
// schema group. Now each is refused by name, allocating little.
func TestFooterBombs(t *testing.T) {
	for _, c := range []struct {
		name   string
		footer func(c *compact)
		want   string
	}{
		{"row group list claims 100M entries", func(c *compact) {
			c.i32(1, 1)
			c.list(2, thrift.Struct, 1)
			c.schemaElem("root", 0)
			c.i64(3, 0)
			c.list(4, thrift.Struct, 100_000_000)
		}, "list claims"},
		{"schema group claims 2^31-1 children", func(c *compact) {
			c.i32(1, 1)
			c.list(2, thrift.Struct, 2)
			c.schemaElem("root", 1<<31-1)
			c.schemaElem("a", 0)
			c.i64(3, 0)
			c.list(4, thrift.Struct, 0)
			c.stop()
		}, "claims 2147483647 children"},
		{"schema group claims negative children", func(c *compact) {
			c.i32(1, 1)
			c.list(2, thrift.Struct, 2)
			c.schemaElem("root", -5)
			c.schemaElem("a", 0)
			c.i64(3, 0)
			c.list(4, thrift.Struct, 0)
			c.stop()
		}, "-5 children"},
		{"schema nests 200 deep", func(c *compact) {
			c.i32(1, 1)
			c.list(2, thrift.Struct, 201)
			for range 200 {
				c.schemaElem("g", 1)
			}
			c.schemaElem("leaf", 0)
			c.i64(3, 0)
			c.list(4, thrift.Struct, 0)
			c.stop()
		}, "deeper than"},
		{"structs nest 10000 deep in an unknown field", func(c *compact) {
			c.i32(1, 1)
			for range 10000 {
				c.field(100, thrift.Struct)
			}
		}, "deeper than"},
		{"binary claims more than the footer", func(c *compact) {
			c.i32(1, 1)
			c.field(6, thrift.Binary)
			c.varint(1 << 40)
		}, "binary of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var footer compact
			c.footer(&footer)
			path := parquetFile(t, footer.Bytes())
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{})
			runtime.ReadMemStats(&after)
			if err == nil {
				ds.Close()
				t.Fatal("Plan succeeded")
			}
			if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Plan = %v, want formats.ErrCorrupt naming the file and saying %q", err, c.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
				t.Errorf("planning a %d-byte footer allocated %d MiB", footer.Len(), n>>20)
			}
		})
	}
}

func TestCheckSchemaTree(t *testing.T) {
	chain := func(depth int) []int64 { // depth nested groups around one leaf
		c := make([]int64, depth+1)
		for i := range depth {
			c[i] = 1
		}
		return c
	}
	for _, c := range []struct {
		name     string
		children []int64
		ok       bool
	}{
		{"flat", []int64{3, 0, 0, 0}, true},
		{"nested", []int64{2, 2, 0, 0, 1, 0}, true},
		{"no columns", []int64{0}, true},
		{"as deep as allowed", chain(maxSchemaDepth), true},
		{"one deeper", chain(maxSchemaDepth + 1), false},
		{"more children than elements follow", []int64{2, 0}, false},
		{"claims of nested groups add up", []int64{2, 2, 0}, false},
		{"negative", []int64{1, -1}, false},
	} {
		err := checkSchemaTree(c.children)
		if (err == nil) != c.ok {
			t.Errorf("%s: checkSchemaTree(%v) = %v, want ok=%v", c.name, c.children, err, c.ok)
		}
	}
}

// rowGroupRowsAt returns where each RowGroup.num_rows value of a footer
// starts, so that a test can change it.
func rowGroupRowsAt(t *testing.T, footer []byte) []int {
	t.Helper()
	s := thrift.NewReader(footer)
	var at []int
	err := s.Fields(0, func(id int16, typ byte) error {
		if id != 4 || typ != thrift.List { // FileMetaData.row_groups
			return s.Skip(typ, 1)
		}
		n, _, err := s.ListHeader()
		if err != nil {
			return err
		}
		for range n {
			err := s.Fields(1, func(id int16, typ byte) error {
				if id == 3 && typ == thrift.I64 { // RowGroup.num_rows
					at = append(at, s.Pos())
				}
				return s.Skip(typ, 2)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestRowGroupCountMismatch changes the row count a footer gives a row group
// of 50 rows. Reading it to its end must fail rather than shift the rows of
// the range; the other row group still reads right.
func TestRowGroupCountMismatch(t *testing.T) {
	dir := t.TempDir()
	spec := synth.Spec{Files: 1, RowsPerFile: 100, RowGroupRows: 50}
	if err := synth.WriteDir(dir, spec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, synth.FileName(0))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := len(orig)
	flen := int(binary.LittleEndian.Uint32(orig[n-8:]))
	at := rowGroupRowsAt(t, orig[n-8-flen:n-8])
	if len(at) != 2 {
		t.Fatalf("found %d row group counts, want 2", len(at))
	}
	for _, c := range []struct {
		claim   int64
		bad     [2]int64 // a range that reads row group 0 to its end
		wantErr string
	}{
		{49, [2]int64{0, 49}, "more rows than the footer's 49"},
		{51, [2]int64{0, 51}, `the row group's num_rows is 51, but column "id"'s chunk has num_values 50 (the data ended after 50 rows)`},
	} {
		b := bytes.Clone(orig)
		zz := uint64(c.claim << 1)
		if zz >= 0x80 || b[n-8-flen+at[0]] != 100 {
			t.Fatal("the test expects one-byte varints")
		}
		b[n-8-flen+at[0]] = byte(zz)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		ids := func(lo, hi int64) ([]int64, error) {
			var out []int64
			err := ds.Read(context.Background(), 0, ds.RowRange(0, lo, hi), 16, nil, func(rec arrow.RecordBatch) error {
				out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
				rec.Release()
				return nil
			})
			return out, err
		}
		if _, err := ids(c.bad[0], c.bad[1]); err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "row group 0") {
			t.Errorf("claim %d: Read%v = %v, want an error saying %q", c.claim, c.bad, err, c.wantErr)
		}
		got, err := ids(c.claim, c.claim+50)
		if err != nil || len(got) != 50 || got[0] != 50 || got[49] != 99 {
			t.Errorf("claim %d: row group 1 read as %v, %v; want ids 50..99", c.claim, got, err)
		}
		got, err = ids(0, 10)
		if err != nil || len(got) != 10 || got[9] != 9 {
			t.Errorf("claim %d: rows [0, 10) read as %v, %v", c.claim, got, err)
		}
		ds.Close()
	}
}

// chunkValuesAt returns where each ColumnMetaData.num_values of the first
// row group of a footer starts, so that a test can change it.
func chunkValuesAt(t testing.TB, footer []byte) []int {
	t.Helper()
	s := thrift.NewReader(footer)
	var at []int
	inList := func(depth int, each func() error) error {
		n, _, err := s.ListHeader()
		if err != nil {
			return err
		}
		for range n {
			if err := each(); err != nil {
				return err
			}
		}
		return nil
	}
	rowGroups := 0
	err := s.Fields(0, func(id int16, typ byte) error {
		if id != 4 || typ != thrift.List { // FileMetaData.row_groups
			return s.Skip(typ, 1)
		}
		return inList(1, func() error {
			rowGroups++
			return s.Fields(1, func(id int16, typ byte) error {
				if id != 1 || typ != thrift.List || rowGroups > 1 { // RowGroup.columns
					return s.Skip(typ, 2)
				}
				return inList(2, func() error {
					return s.Fields(3, func(id int16, typ byte) error {
						if id != 3 || typ != thrift.Struct { // ColumnChunk.meta_data
							return s.Skip(typ, 4)
						}
						return s.Fields(4, func(id int16, typ byte) error {
							if id == 5 && typ == thrift.I64 { // ColumnMetaData.num_values
								at = append(at, s.Pos())
							}
							return s.Skip(typ, 5)
						})
					})
				})
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// pagedFile returns a file of one column "id" of 48 rows in pages of 8
// values, whose chunk's num_values the footer gives as values (48 is true).
func pagedFile(t testing.TB, values int64) []byte {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 48 {
		b.Append(int64(i))
	}
	ids := b.NewArray()
	defer ids.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, 48)
	defer rec.Release()
	var out bytes.Buffer
	props := pq.NewWriterProperties(pq.WithDictionaryDefault(false), pq.WithDataPageSize(64), pq.WithBatchSize(8), pq.WithStats(false))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	n := len(data)
	flen := int(binary.LittleEndian.Uint32(data[n-8:]))
	at := chunkValuesAt(t, data[n-8-flen:n-8])
	if len(at) != 1 || data[n-8-flen+at[0]] != 96 || values < 0 || values >= 64 {
		t.Fatalf("num_values at %v, want one one-byte varint of 48", at)
	}
	data[n-8-flen+at[0]] = byte(values << 1)
	return data
}

// TestChunkValuesMismatch changes the num_values the footer gives a column
// chunk of 48 rows in pages of 8 values. arrow-go reads a chunk's pages
// until their values reach num_values, so a smaller count ends the chunk a
// page or more early: the error says which count disagrees with which.
func TestChunkValuesMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "paged.parquet")
	for _, c := range []struct {
		values  int64
		wantErr string
	}{
		{20, `the row group's num_rows is 48, but column "id"'s chunk has num_values 20 (the data ended after 24 rows)`},
	} {
		if err := os.WriteFile(path, pagedFile(t, c.values), 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = ds.Read(context.Background(), 0, ds.RowRange(0, 0, 48), 16, nil, func(rec arrow.RecordBatch) error {
			rec.Release()
			return nil
		})
		if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "row group 0") {
			t.Errorf("num_values %d: Read = %v, want an error saying %q", c.values, err, c.wantErr)
		}
		ds.Close()
	}
}

func (c *compact) i32list(id int16, vs ...int32) {
	c.list(id, thrift.I32, len(vs))
	for _, v := range vs {
		c.zigzag(int64(v))
	}
}

func (c *compact) strlist(id int16, vs ...string) {
	c.list(id, thrift.Binary, len(vs))
	for _, v := range vs {
		c.varint(uint64(len(v)))
		c.WriteString(v)
	}
}

// dictFile builds, byte by byte, a file of one required BYTE_ARRAY column
// "v" holding one row in one row group: an uncompressed dictionary page that
// declares dictValues values but holds the single value "a", and a data page
// whose one dictionary index is index.
func dictFile(t *testing.T, dictValues, index int32) string {
	t.Helper()
	var file bytes.Buffer
	file.WriteString("PAR1")

	dictData := []byte{1, 0, 0, 0, 'a'} // PLAIN: length, bytes
	var dictHeader compact
	dictHeader.i32(1, 2) // DICTIONARY_PAGE
	dictHeader.i32(2, int32(len(dictData)))
	dictHeader.i32(3, int32(len(dictData)))
	dictHeader.field(7, thrift.Struct)
	dictHeader.i32(1, dictValues)
	dictHeader.i32(2, 0) // PLAIN
	dictHeader.stop()
	dictHeader.stop()

	// RLE_DICTIONARY: the bit width, then one RLE run of length 1.
	width := byte(32 - bits.LeadingZeros32(uint32(index)))
	pageData := []byte{width, 1 << 1}
	pageData = binary.LittleEndian.AppendUint32(pageData, uint32(index))[:2+(int(width)+7)/8]
	var dataHeader compact
	dataHeader.i32(1, 0) // DATA_PAGE
	dataHeader.i32(2, int32(len(pageData)))
	dataHeader.i32(3, int32(len(pageData)))
	dataHeader.field(5, thrift.Struct)
	dataHeader.i32(1, 1) // num_values
	dataHeader.i32(2, 8) // RLE_DICTIONARY
	dataHeader.i32(3, 3) // RLE levels
	dataHeader.i32(4, 3)
	dataHeader.stop()
	dataHeader.stop()

	dictOff := int64(file.Len())
	file.Write(dictHeader.Bytes())
	file.Write(dictData)
	dataOff := int64(file.Len())
	file.Write(dataHeader.Bytes())
	file.Write(pageData)
	chunkLen := int64(file.Len()) - dictOff

	var f compact
	f.i32(1, 1)
	f.list(2, thrift.Struct, 2)
	f.schemaElem("schema", 1)
	f.i32(1, 6) // BYTE_ARRAY
	f.i32(3, 0) // REQUIRED
	f.str(4, "v")
	f.stop()
	f.i64(3, 1)
	f.list(4, thrift.Struct, 1) // row groups
	f.list(1, thrift.Struct, 1) // columns
	f.i64(2, dictOff)           // file_offset
	f.field(3, thrift.Struct)   // meta_data
	f.i32(1, 6)
	f.i32list(2, 0, 8)
	f.strlist(3, "v")
	f.i32(4, 0) // UNCOMPRESSED
	f.i64(5, 1)
	f.i64(6, chunkLen)
	f.i64(7, chunkLen)
	f.i64(9, dataOff)
	f.i64(11, dictOff)
	f.stop() // meta_data
	f.stop() // column chunk
	f.i64(2, chunkLen)
	f.i64(3, 1)
	f.stop() // row group
	f.stop() // file metadata

	file.Write(f.Bytes())
	file.Write(binary.LittleEndian.AppendUint32(nil, uint32(f.Len())))
	file.WriteString("PAR1")
	path := filepath.Join(t.TempDir(), "dict.parquet")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDictionaryPageClaims reads files whose dictionary page declares more
// values than it holds. arrow-go sizes its dictionary by the largest index a
// data page uses, up to the declared count, before decoding: a 2^31 claim
// and a matching index asked for 48 GiB, a fatal out-of-memory that no
// recover catches.
func TestDictionaryPageClaims(t *testing.T) {
	read := func(path string) ([]string, error) {
		ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{})
		if err != nil {
			return nil, err
		}
		defer ds.Close()
		var out []string
		err = ds.Read(context.Background(), 0, ds.RowRange(0, 0, 1), 10, nil, func(rec arrow.RecordBatch) error {
			col := rec.Column(0).(*array.Binary)
			for i := range col.Len() {
				out = append(out, string(col.Value(i)))
			}
			rec.Release()
			return nil
		})
		return out, err
	}
	// The hand-built file is valid when its claims are true.
	if got, err := read(dictFile(t, 1, 0)); err != nil || len(got) != 1 || got[0] != "a" {
		t.Fatalf("valid dictionary file read as %q, %v", got, err)
	}
	for _, c := range []struct{ values, index int32 }{
		{2, 1},
		{1<<31 - 1, 1<<31 - 2},
	} {
		path := dictFile(t, c.values, c.index)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := read(path)
		runtime.ReadMemStats(&after)
		if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("dictionary of %d values, index %d: read %q, %v; want formats.ErrCorrupt naming the file", c.values, c.index, got, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
			t.Errorf("dictionary of %d values: allocated %d MiB", c.values, n>>20)
		}
	}
}

// TestCheckStoredSchema corrupts the lengths in the Arrow schema pqarrow
// stores in a footer. Each made arrow-go allocate what it claimed (found by
// FuzzParquetFooter: a fatal out-of-memory).
func TestCheckStoredSchema(t *testing.T) {
	mem := memory.NewGoAllocator()
	lists, _, err := array.FromJSON(mem, arrow.ListOf(arrow.PrimitiveTypes.Int64), strings.NewReader("[[1, 2], [3]]"))
	if err != nil {
		t.Fatal(err)
	}
	defer lists.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "l", Type: lists.DataType(), Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{lists}, 2)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	stored := pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
	if stored == nil {
		t.Fatal("pqarrow stored no schema")
	}
	orig, err := base64.StdEncoding.DecodeString(*stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIPCSchema(orig); err != nil {
		t.Fatalf("the schema as written: %v", err)
	}
	if binary.LittleEndian.Uint32(orig) != 0xFFFFFFFF {
		t.Fatal("expected a continuation marker")
	}

	// Where the lengths are, found with the checker's own reader.
	const off = 8
	fb := flatbuf(orig[off : off+int(binary.LittleEndian.Uint32(orig[4:]))])
	msg, err := fb.root()
	if err != nil {
		t.Fatal(err)
	}
	hp, _ := msg.field(2)
	sch, err := fb.tableAt(hp)
	if err != nil {
		t.Fatal(err)
	}
	fields, _, err := fb.vectorOf(sch, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	first, err := fb.tableAt(fields)
	if err != nil {
		t.Fatal(err)
	}
	children, ok, err := fb.vectorOf(first, 5, 4)
	if err != nil || !ok {
		t.Fatalf("the list field has no children: %v", err)
	}
	for _, c := range []struct {
		name string
		at   int
		v    uint32
	}{
		{"message length", 4, 1 << 30},
		{"field count", off + int(fields) - 4, 1<<31 - 1},
		{"child count", off + int(children) - 4, 1<<31 - 1},
	} {
		b := bytes.Clone(orig)
		binary.LittleEndian.PutUint32(b[c.at:], c.v)
		if err := checkIPCSchema(b); err == nil {
			t.Errorf("%s of %d: accepted", c.name, c.v)
		}
	}
}
