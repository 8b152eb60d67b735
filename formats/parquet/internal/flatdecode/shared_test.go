package flatdecode

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/snappy"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// sharedPages is three Snappy-compressed PLAIN int64 pages of rows values
// each (value i is 7i+3), shared through bodies, as the pages of a fetch
// that several Readers read parts of.
func sharedPages(rows int, bodies *Bodies) []Page {
	var pages []Page
	var at int64
	for p := range 3 {
		var raw []byte
		for i := range rows {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(7*(p*rows+i)+3))
		}
		body := snappy.Encode(nil, raw)
		b := append(pageHeaderSizes(thrift.PageDataV2, len(raw), len(body), rows, encPlain, true), body...)
		pages = append(pages, Page{Offset: at, Index: p, Bytes: b, Shared: bodies})
		at += int64(len(b))
	}
	return pages
}

// Waits says when a Reader's next read would wait for a page that another
// Reader of the fetch is decompressing, for exactly the pages the read
// takes, and the values read after the wait are those of the page.
func TestWaitsForAPageBeingDecompressed(t *testing.T) {
	const rows = 1000
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var bodies Bodies
	defer bodies.Release(true)
	pages := sharedPages(rows, &bodies)
	col := Column{Name: "id", Physical: Int64, Type: arrow.PrimitiveTypes.Int64, Codec: Snappy, Values: 3 * rows, Rows: 3 * rows, MaxPage: 1 << 20}
	open := func() *Reader {
		r, err := OpenPages(pages, col, mem)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := open(), open()
	defer a.Release()
	defer b.Release()
	if a.Waits(3 * rows) {
		t.Fatal("a Reader waits where no page is being decompressed")
	}

	// Another Reader decompresses the second page, and is held inside.
	second := pages[1]
	h, err := parseHeader(second.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	hold, made := make(chan struct{}), make(chan error)
	go func() {
		_, err := bodies.body(second.Offset, func() ([]byte, error) {
			<-hold
			buf := bufpool.Get(int(h.Uncompressed))
			return buf, decompress(Snappy, buf, second.Bytes[h.Size:])
		})
		made <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !bodies.making(second.Offset); {
		if time.Now().After(deadline) {
			t.Fatal("the second page's decompression never started")
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range []struct {
		n    int64
		want bool
	}{{0, false}, {rows, false}, {rows + 1, true}, {3 * rows, true}} {
		if got := a.Waits(c.n); got != c.want {
			t.Errorf("while the second page is decompressed, reading %d rows from the start: Waits %v, want %v", c.n, got, c.want)
		}
	}
	// b reads into its first page: the second is then the next it takes.
	check := func(r *Reader, from int64, n int) {
		t.Helper()
		arr, err := r.Next(n)
		if err != nil {
			t.Fatal(err)
		}
		defer arr.Release()
		for i, v := range arr.(*array.Int64).Int64Values() {
			if want := 7*(from+int64(i)) + 3; v != want {
				t.Fatalf("row %d: %d, want %d", from+int64(i), v, want)
			}
		}
	}
	check(b, 0, rows-10)
	if !b.Waits(11) || b.Waits(10) {
		t.Errorf("ten rows before the second page: Waits(11) %v, Waits(10) %v; want true, false", b.Waits(11), b.Waits(10))
	}
	close(hold)
	if err := <-made; err != nil {
		t.Fatal(err)
	}
	if a.Waits(3*rows) || b.Waits(rows) {
		t.Error("a Reader waits for a page already decompressed")
	}
	check(a, 0, 3*rows)
	check(b, rows-10, 2*rows+10)
}
