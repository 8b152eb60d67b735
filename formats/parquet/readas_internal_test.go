package parquet

import (
	"encoding/binary"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// bigFromBytes reads big-endian two's complement with math/big, the
// reference the decimal conversions are checked against.
func bigFromBytes(v []byte) *big.Int {
	n := new(big.Int).SetBytes(v)
	if len(v) > 0 && v[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
	}
	return n
}

// FuzzDecimalBytes checks the DECIMAL conversions of byte-array values
// (untrusted bytes) against math/big: a value that fits reads exactly, one
// that does not is an error, and nothing panics.
func FuzzDecimalBytes(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0x00}, {0x01}, {0xff}, {0x80}, {0x7f, 0xff},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x85},
		{0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		make([]byte, 40),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		want := bigFromBytes(v)
		fits := func(bits uint) bool {
			lim := new(big.Int).Lsh(big.NewInt(1), bits-1)
			return want.Cmp(lim) < 0 && want.Cmp(new(big.Int).Neg(lim)) >= 0
		}
		n128, err := decimal128FromBytes(v)
		if fits(128) != (err == nil) {
			t.Fatalf("%x: fits in 128 bits %v, error %v", v, fits(128), err)
		}
		if err == nil && n128.BigInt().Cmp(want) != 0 {
			t.Fatalf("%x: decimal128 %s, want %s", v, n128.BigInt(), want)
		}
		n256, err := decimal256FromBytes(v)
		if fits(256) != (err == nil) {
			t.Fatalf("%x: fits in 256 bits %v, error %v", v, fits(256), err)
		}
		if err == nil && n256.BigInt().Cmp(want) != 0 {
			t.Fatalf("%x: decimal256 %s, want %s", v, n256.BigInt(), want)
		}
	})
}

func int96(nanos int64, day int32) []byte {
	v := make([]byte, 12)
	binary.LittleEndian.PutUint64(v, uint64(nanos))
	binary.LittleEndian.PutUint32(v[8:], uint32(day))
	return v
}

func TestInt96Micros(t *testing.T) {
	for _, c := range []struct {
		nanos int64
		day   int32
		want  int64
	}{
		{0, julianEpoch, 0},
		{1000, julianEpoch, 1},
		{86399_999_999_000, julianEpoch - 1, -1},
		{12*3600e9 + 123_456_000, julianEpoch + 1, 86400e6 + 12*3600e6 + 123_456},
		// Year 290000 as Spark writes it (int96_from_spark.parquet, row 5).
		{-32509551616000, -105862232, 9089380393200000000},
	} {
		got, err := int96Micros(int96(c.nanos, c.day))
		if err != nil || got != c.want {
			t.Errorf("nanos %d day %d: %d, %v; want %d", c.nanos, c.day, got, err, c.want)
		}
	}
	if _, err := int96Micros(int96(1, julianEpoch)); !errors.Is(err, errSubMicro) {
		t.Errorf("a nanosecond: %v", err)
	}
}

// A FIXED_LEN_BYTE_ARRAY column decoded as BYTE_ARRAY becomes its Arrow
// type again (here the UUID extension), and a value of another length is an
// error naming its row.
func TestConvertFixed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	id := []byte("0123456789abcdef")
	b.Append(id)
	b.AppendNull()
	in := b.NewArray()
	defer in.Release()
	c := conversion{kind: convFixed, to: extensions.NewUUIDType(), width: 16}
	out, err := c.convert(in, 10, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	u, ok := out.(*extensions.UUIDArray)
	if !ok || u.Len() != 2 || !u.IsNull(1) || string(u.Storage().(*array.FixedSizeBinary).Value(0)) != string(id) {
		t.Fatalf("got %v", out)
	}
	b.Append(id[:15])
	short := b.NewArray()
	defer short.Release()
	if _, err := c.convert(short, 10, mem); err == nil || !strings.Contains(err.Error(), "row 10: a value of 15 bytes") {
		t.Errorf("a short value: %v", err)
	}
}

// Footers without unknown logical types pass through unchanged (the same
// bytes); the one with an unknown type loses it and nothing else.
func TestDropUnknownLogicalTypes(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(corpus.Dir(t), "parquet-testing", "data", "*.parquet"))
	if len(paths) < 50 {
		t.Fatalf("parquet-testing incomplete (%d files)", len(paths))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 12 || string(b[len(b)-4:]) != "PAR1" {
			continue
		}
		n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
		if n > len(b)-12 {
			continue
		}
		footer := b[len(b)-8-n : len(b)-8]
		if checkFooter(footer) != nil {
			continue
		}
		out := dropUnknownLogicalTypes(footer)
		if filepath.Base(p) != "unknown-logical-type.parquet" {
			if &out[0] != &footer[0] || len(out) != len(footer) {
				t.Errorf("%s: footer rewritten", p)
			}
			continue
		}
		if len(out) >= len(footer) {
			t.Fatalf("%s: nothing dropped", p)
		}
		md, err := metadata.NewFileMetaData(out, nil)
		if err != nil {
			t.Fatal(err)
		}
		orig := []string{"column with known type", "column with unknown type"}
		for i, name := range orig {
			c := md.Schema.Column(i)
			if c.Name() != name || c.PhysicalType() != parquet.Types.ByteArray {
				t.Errorf("column %d: %s %s", i, c.Name(), c.PhysicalType())
			}
		}
		if _, ok := md.Schema.Column(0).LogicalType().(pqschema.StringLogicalType); !ok {
			t.Errorf("the known type was dropped: %s", md.Schema.Column(0).LogicalType())
		}
		if md.NumRows != 3 {
			t.Errorf("%d rows", md.NumRows)
		}
	}
}
