package parquet

import (
	"io"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
)

// A read's fetched chunks are its largest allocation: as many bytes as
// the row groups store, allocated (and zeroed by the runtime) for each
// fetch and then left to the garbage collector, which they make collect
// more often. A fetch whose every decode is over (formats.Fetched.Release)
// hands its buffers to the next fetches instead (bufpool): Recycle.
//
// Nothing a decode builds holds fetched bytes: flatdecode copies values
// out of its pages into the batch's Arrow buffers (and copies an
// uncompressed dictionary page into a buffer of its own), and arrow-go
// reads the chunks through chunkReader.ReadAt, which copies them into
// arrow-go's buffers. So once the decodes are over no batch can see a
// buffer reused.

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
		bufpool.Put(b)
		recycledBufs.Add(1)
	}
	fe.fetchedBufs = nil
	fe.bodies.Release(testing.Testing())
	// A decode that came now anyway would read from storage.
	fe.spans = nil
}
