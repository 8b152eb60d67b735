package parquet

import (
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
	"testing"
)

// A read's fetched chunks are its largest allocation: as many bytes as
// the row groups store, allocated (and zeroed by the runtime) for each
// fetch and then left to the garbage collector, which they make collect
// more often. A fetch whose every decode is over (formats.Fetched.Release)
// hands its buffers to the next fetches instead: Recycle.
//
// Nothing a decode builds holds fetched bytes: flatdecode copies values
// out of its pages into the batch's Arrow buffers (and copies an
// uncompressed dictionary page into a buffer of its own), and arrow-go
// reads the chunks through chunkReader.ReadAt, which copies them into
// arrow-go's buffers. So once the decodes are over no batch can see a
// buffer reused.
//
// Buffers are kept in size classes, sixteenths of powers of two (so a
// buffer is at most a sixteenth larger than asked), in sync.Pools: what is
// not reused goes with the next collections, as the buffers would have.

// Fetched buffers from 64 KiB to 256 MiB are kept; others are allocated
// and left to the collector.
const (
	minPooled = 64 << 10
	maxPooled = 256 << 20
)

var spanPools [64 * 16]sync.Pool // of *[]byte, by spanClass

// spanClass is the pool of buffers of n bytes and their capacity, or -1.
func spanClass(n int) (class, size int) {
	if n < minPooled || n > maxPooled {
		return -1, n
	}
	e := bits.Len(uint(n - 1)) // 1<<(e-1) < n <= 1<<e
	step := 1 << (e - 4)
	k := (n + step - 1) / step // in (8, 16]
	return e*16 + k - 1, k * step
}

// spanBuffer returns a buffer of n bytes, which the fetch is to fill
// wholly: a reused buffer holds the bytes of an earlier fetch.
func spanBuffer(n int) []byte {
	c, size := spanClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := spanPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, size)
}

// recycleSpan hands b, from spanBuffer, to later fetches.
func recycleSpan(b []byte) {
	c, size := spanClass(len(b))
	if c < 0 || cap(b) != size {
		return
	}
	b = b[:size]
	spanPools[c].Put(&b)
}

// readFull reads len(p) bytes at off: a read that ends early without an
// error would leave an earlier fetch's bytes in a reused buffer.
func readFull(rd io.ReaderAt, p []byte, off int64) error {
	n, err := rd.ReadAt(p, off)
	if err == nil && n < len(p) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// recycledBufs counts the buffers Recycle handed on, for the tests.
var recycledBufs atomic.Int64

// Recycle hands the fetched chunks' buffers to later fetches: the read's
// decodes are over (see formats.Recycler). The offset indexes among the
// spans are the footer cache's, and stay. In a test binary the buffers are
// overwritten first, so that a decode that read one after it was handed
// on (a batch sharing its bytes, a release too early) gets bytes that are
// no Parquet, and fails or shows wrong values to the value checks, rather
// than the right bytes by luck.
func (fe *parquetFetched) Recycle() {
	for _, b := range fe.fetchedBufs {
		if testing.Testing() {
			for i := range b {
				b[i] = 0xa5
			}
		}
		recycleSpan(b)
		recycledBufs.Add(1)
	}
	fe.fetchedBufs = nil
	// A decode that came now anyway would read from storage.
	fe.spans = nil
}
