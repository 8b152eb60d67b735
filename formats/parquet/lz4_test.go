package parquet_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// lz4Block compresses src into one LZ4 block: a Hadoop frame's, past its
// two sizes.
func lz4Block(t testing.TB, src []byte) []byte {
	return hadoopFrames(t, src, 1)[8:]
}

// hadoopFrames compresses src as Hadoop's Lz4Codec frames it: in parts
// parts, each one LZ4 block after its decompressed and compressed sizes
// (big-endian uint32).
func hadoopFrames(t testing.TB, src []byte, parts int) []byte {
	t.Helper()
	var out []byte
	for k := range parts {
		var err error
		if out, err = flatdecode.AppendLZ4Frame(out, src[k*len(src)/parts:(k+1)*len(src)/parts]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// lz4Framings are the ways the deprecated LZ4 codec's pages are written:
// one Hadoop frame (parquet-mr, Arrow C++ since 0.17), several (a page
// larger than Hadoop's buffer), a bare block (older Arrow C++).
var lz4Framings = []struct {
	name     string
	compress func(testing.TB, []byte) []byte
}{
	{"one Hadoop frame", func(t testing.TB, b []byte) []byte { return hadoopFrames(t, b, 1) }},
	{"three Hadoop frames", func(t testing.TB, b []byte) []byte { return hadoopFrames(t, b, 3) }},
	{"a bare block", lz4Block},
}

// lz4Row is row i of lz4File: id, s (nil: null) and v (NaN: null).
func lz4Row(i int) (id int64, s []byte, v float64) {
	id = int64(i)*7919 - 3
	if i%5 != 2 {
		s = fmt.Appendf(nil, "row %d of the LZ4 file", i%40)
	}
	v = math.NaN()
	if i%7 != 0 {
		v = float64(i) / 4
	}
	return id, s, v
}

const lz4Rows, lz4PageRows = 600, 200

// lz4File writes a file of lz4Rows rows in the deprecated LZ4 codec: a
// required INT64 "id" and an optional BYTE_ARRAY "s" in DATA_PAGE, an
// optional DOUBLE "v" in DATA_PAGE_V2 (levels outside the compressed
// values); pages of lz4PageRows rows, page k framed as lz4Framings[k].
func lz4File(t testing.TB, path string) {
	t.Helper()
	chunk := func(name string, phys int32) parquet.HandChunk {
		return parquet.HandChunk{Path: []string{name}, Phys: phys, Codec: parquet.HandLZ4, Values: lz4Rows, Encodings: []int32{parquet.HandPlain, parquet.HandRLE}}
	}
	id, s, v := chunk("id", 2), chunk("s", 6), chunk("v", 5)
	for k, fr := range lz4Framings {
		var ids, ss, vs []byte
		var sValid, vValid []bool
		for i := k * lz4PageRows; i < (k+1)*lz4PageRows; i++ {
			n, b, f := lz4Row(i)
			ids = binary.LittleEndian.AppendUint64(ids, uint64(n))
			sValid, vValid = append(sValid, b != nil), append(vValid, !math.IsNaN(f))
			if b != nil {
				ss = binary.LittleEndian.AppendUint32(ss, uint32(len(b)))
				ss = append(ss, b...)
			}
			if !math.IsNaN(f) {
				vs = binary.LittleEndian.AppendUint64(vs, math.Float64bits(f))
			}
		}
		id.Pages = append(id.Pages, parquet.HandDataPageV1(lz4PageRows, parquet.HandPlain, len(ids), fr.compress(t, ids)))
		levels := parquet.HandLevels(sValid)
		body := binary.LittleEndian.AppendUint32(nil, uint32(len(levels)))
		body = append(append(body, levels...), ss...)
		s.Pages = append(s.Pages, parquet.HandDataPageV1(lz4PageRows, parquet.HandPlain, len(body), fr.compress(t, body)))
		levels = parquet.HandLevels(vValid)
		nulls := 0
		for _, ok := range vValid {
			if !ok {
				nulls++
			}
		}
		v.Pages = append(v.Pages, parquet.HandDataPageV2(lz4PageRows, int32(nulls), parquet.HandPlain, len(levels), len(levels)+len(vs), append(levels, fr.compress(t, vs)...)))
	}
	parquet.HandFile(t, path, []parquet.HandElem{
		{Name: "schema", Phys: -1, Rep: -1, Children: 3},
		{Name: "id", Phys: 2, Rep: 0},
		{Name: "s", Phys: 6, Rep: 1},
		{Name: "v", Phys: 5, Rep: 1},
	}, lz4Rows, []parquet.HandChunk{id, s, v})
}

// checkLZ4Rows checks batches, rows [lo, ...) of lz4File, value by value.
func checkLZ4Rows(t *testing.T, what string, batches []arrow.RecordBatch, lo int) int {
	t.Helper()
	row := lo
	for _, b := range batches {
		ids, ss, vs := b.Column(0).(*array.Int64), b.Column(1).(*array.Binary), b.Column(2).(*array.Float64)
		for i := range int(b.NumRows()) {
			id, s, v := lz4Row(row)
			if ids.Value(i) != id || ss.IsNull(i) != (s == nil) || string(ss.Value(i)) != string(s) || vs.IsNull(i) != math.IsNaN(v) || !vs.IsNull(i) && vs.Value(i) != v {
				t.Fatalf("%s: row %d: %d %q (null %v) %v (null %v), want %d %q %v", what, row, ids.Value(i), ss.Value(i), ss.IsNull(i), vs.Value(i), vs.IsNull(i), id, s, v)
			}
			row++
		}
	}
	return row - lo
}

// The deprecated LZ4 codec is read as Arrow C++ reads it: Hadoop's framing
// where a page is wholly that, a bare block otherwise. arrow-go and DuckDB
// refuse such files ("compression for LZ4 unimplemented").
func TestLZ4HadoopFraming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lz4.parquet")
	lz4File(t, path)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		p      parquet.Format
		lo, hi int64
	}{
		{"own decoder", parquet.Format{}, 0, lz4Rows},
		{"arrow-go", parquet.Format{ArrowGoDecode: true}, 0, lz4Rows},
		{"own decoder, rows 150-450", parquet.Format{}, 150, 450},
		{"arrow-go, rows 150-450", parquet.Format{ArrowGoDecode: true}, 150, 450},
	} {
		before := parquet.FastChunks()
		batches, mem, err := readFormatRange(ctx, path, c.p, 64, c.lo, c.hi)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := checkLZ4Rows(t, c.name, batches, int(c.lo)); n != int(c.hi-c.lo) {
			t.Errorf("%s: %d rows, want %d", c.name, n, c.hi-c.lo)
		}
		releaseBatches(batches)
		if n := mem.CurrentAlloc(); n != 0 {
			t.Errorf("%s: %d bytes outstanding", c.name, n)
		}
		if took := parquet.FastChunks() - before; c.p.ArrowGoDecode != (took == 0) {
			t.Errorf("%s: the own decoder took %d chunks", c.name, took)
		}
	}
	// A frame that claims more than its page holds is no Hadoop frame, and
	// no LZ4 block either: an error, not a panic or made-up bytes.
	codec, err := compress.GetCodec(compress.Codecs.Lz4)
	if err != nil {
		t.Fatal(err)
	}
	bad := hadoopFrames(t, []byte("some bytes some bytes some bytes"), 1)
	binary.BigEndian.PutUint32(bad, 40)
	if out, err := compress.Decode(codec, make([]byte, 40), bad); err == nil {
		t.Errorf("a frame claiming 40 bytes of 32 decoded to %q", out)
	}
	// What the codec writes (arrow-go writers in the process ask it) is one
	// Hadoop frame, and reads back.
	src := []byte("abcabcabcabcabcabcabcabc, and then something else")
	enc := codec.Encode(nil, src)
	if binary.BigEndian.Uint32(enc) != uint32(len(src)) || int(binary.BigEndian.Uint32(enc[4:])) != len(enc)-8 {
		t.Errorf("encoded %x: not one Hadoop frame", enc)
	}
	if out, err := compress.Decode(codec, make([]byte, len(src)), enc); err != nil || string(out) != string(src) {
		t.Errorf("round trip: %q, %v", out, err)
	}
}

// parquet-testing's LZ4 files, which Arrow C++ reads and DuckDB refuses:
// two in Hadoop's framing (the larger's pages in several frames), one of
// bare blocks, as older Arrow C++ wrote them.
func TestLZ4ParquetTesting(t *testing.T) {
	dir := filepath.Join(corpus.Dir(t), "parquet-testing/data")
	// The values of the small files, as other readers' tests of them give
	// them.
	for _, name := range []string{"hadoop_lz4_compressed.parquet", "non_hadoop_lz4_compressed.parquet"} {
		_, cols := readFile(t, filepath.Join(dir, name))
		c0, c1, v11 := cols[0].(*array.Int64), cols[1].(*array.Binary), cols[2].(*array.Float64)
		want := []struct {
			c0  int64
			c1  string
			v11 float64
		}{{1593604800, "abc", 42}, {1593604800, "def", 7.7}, {1593604801, "abc", 42.125}, {1593604801, "def", 7.7}}
		if c0.Len() != len(want) {
			t.Fatalf("%s: %d rows", name, c0.Len())
		}
		for i, w := range want {
			if c0.Value(i) != w.c0 || string(c1.Value(i)) != w.c1 || v11.IsNull(i) || v11.Value(i) != w.v11 {
				t.Errorf("%s: row %d: %d %q %v, want %v", name, i, c0.Value(i), c1.Value(i), v11.Value(i), w)
			}
		}
	}
	// The larger file: 10,000 distinct UUIDs as text, whose least and
	// greatest the writer put in the footer's statistics.
	path := filepath.Join(dir, "hadoop_lz4_compressed_larger.parquet")
	_, cols := readFile(t, path)
	a := cols[0].(*array.String)
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	lo, hi := a.Value(0), a.Value(0)
	seen := map[string]bool{}
	for i := range a.Len() {
		v := a.Value(i)
		if a.IsNull(i) || !uuid.MatchString(v) || seen[v] {
			t.Fatalf("row %d: %q", i, v)
		}
		seen[v] = true
		lo, hi = min(lo, v), max(hi, v)
	}
	if a.Len() != 10000 || lo != "00087de7-10df-4979-94cf-79279f9745ce" || hi != "ffffe6a0-e0c0-4e65-a9d4-f7f4c176aea2" {
		t.Errorf("%d rows, least %q, greatest %q", a.Len(), lo, hi)
	}
	// DuckDB refuses the codec; the statistics above are what it knows.
	db := duckdb.ForTest(t)
	res, err := db.Query("SELECT stats_min_value, stats_max_value, num_values FROM parquet_metadata(" + duckdb.Quote(path) + ")")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0][0] != lo || res.Rows[0][1] != hi || fmt.Sprint(res.Rows[0][2]) != "10000" {
		t.Errorf("DuckDB's statistics: %v", res.Rows)
	}
	if _, err := db.Query("SELECT sum(length(a)) FROM " + duckdb.Quote(path)); err == nil {
		t.Logf("DuckDB now reads %s: add it to its differential comparison", path)
	}
}
