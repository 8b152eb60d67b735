package parquet

import (
	"slices"
	"testing"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// dataPageBytes builds a data page header holding rows rows, version 1 or 2.
func dataPageBytes(version int, rows int32) []byte {
	var c compact
	c.i32(1, map[int]int32{1: thrift.PageData, 2: thrift.PageDataV2}[version]) // type
	c.i32(2, 4096)
	c.i32(3, 1024)
	if version == 1 {
		c.field(5, thrift.Struct)
		c.i32(1, rows) // num_values
		c.i32(2, 0)    // encoding
		c.stop()
	} else {
		c.field(8, thrift.Struct)
		c.i32(1, rows) // num_values
		c.i32(2, 0)    // num_nulls
		c.i32(3, rows) // num_rows
		c.i32(4, 0)    // encoding
		c.i32(5, 0)    // definition_levels_byte_length
		c.i32(6, 0)    // repetition_levels_byte_length
		c.stop()
	}
	c.stop()
	return append(c.Bytes(), make([]byte, 64)...) // the page's data
}

// A page whose header does not hold the rows the offset index gives it is
// refused: a seek by that index would deliver other rows without a word.
func TestCheckPagesAgainstHeaders(t *testing.T) {
	for _, version := range []int{1, 2} {
		fe := &parquetFetched{spans: []span{{off: 1000, data: dataPageBytes(version, 100)}}}
		fe.checks = []pageCheck{{offset: 1000, size: 2048, rows: 100, chunk: int32Chunk(t)}}
		if err := fe.checkPages(); err != nil {
			t.Errorf("v%d: a page that holds the rows the index says: %v", version, err)
		}
		fe.checks = []pageCheck{{offset: 1000, size: 2048, rows: 99, chunk: int32Chunk(t)}}
		if err := fe.checkPages(); err == nil {
			t.Errorf("v%d: a page of 100 rows that the index calls 99 was accepted", version)
		}
	}
	fe := &parquetFetched{spans: []span{{off: 0, data: make([]byte, 300)}}, checks: []pageCheck{{offset: 0, size: 300, rows: 1, chunk: int32Chunk(t)}}}
	if err := fe.checkPages(); err == nil {
		t.Error("zeros taken for a data page")
	}
}

// An offset index round-trips through the parser, and any bytes parse to
// an error or some pages, never a panic.
func TestParseOffsetIndex(t *testing.T) {
	want := []pageLoc{{4, 100, 0}, {104, 90, 1000}, {194, 120, 1900}}
	b := offsetIndexBytes(want)
	got, err := parseOffsetIndex(b)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseOffsetIndex = %v, %v; want %v", got, err, want)
	}
	for n := range len(b) {
		parseOffsetIndex(b[:n]) // must not panic
	}
}

func offsetIndexBytes(pages []pageLoc) []byte {
	var c compact
	c.list(1, thrift.Struct, len(pages))
	for _, p := range pages {
		c.i64(1, p.offset)
		c.i32(2, int32(p.size))
		c.i64(3, p.firstRow)
		c.stop()
	}
	c.stop()
	return c.Bytes()
}

func FuzzOffsetIndex(f *testing.F) {
	f.Add(offsetIndexBytes([]pageLoc{{4, 100, 0}, {104, 90, 1000}}))
	f.Add(dataPageBytes(1, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		pages, err := parseOffsetIndex(b)
		if err == nil && len(pages) > len(b) {
			t.Fatalf("%d pages from %d bytes", len(pages), len(b))
		}
		pageRows(b) // must not panic either
	})
}
