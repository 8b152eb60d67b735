package flatdecode

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
)

// lentPage is a buffer from bufpool that batches are made of
// (dictionaryStretch) where the allocator's batches are the pipeline's alone
// (unzeroed.Return): the buffer goes back to bufpool once the Reader and
// every batch buffer made of it are released, for the next chunk's pages,
// as it would have had nothing been lent. Left to the collector instead,
// every chunk's dictionary page was memory taken anew.
//
// It is the memory.Allocator of the buffers it lends, whose Free (their
// last Release) counts them back; the Reader holds one count of its own.
type lentPage struct {
	buf  []byte
	refs atomic.Int64
}

func newLentPage(buf []byte) *lentPage {
	p := &lentPage{buf: buf}
	p.refs.Store(1)
	lentPages.Add(1)
	return p
}

// lentPages counts the lentPages not yet back in bufpool, for the tests
// that check every one goes back.
var lentPages atomic.Int64

// LentPagesOut is how many pages lent to batches are not yet back in the
// pool.
func LentPagesOut() int64 { return lentPages.Load() }

// lend returns b, a part of the page, as a buffer that holds the page
// until its release.
func (p *lentPage) lend(b []byte) *memory.Buffer {
	p.refs.Add(1)
	return memory.NewBufferWithAllocator(b, p)
}

// drop gives up one count: a lent buffer's or the Reader's.
func (p *lentPage) drop() {
	if p.refs.Add(-1) == 0 {
		bufpool.Put(p.buf)
		lentPages.Add(-1)
	}
}

// Free is a lent buffer's last release.
func (p *lentPage) Free([]byte) { p.drop() }

// Allocate and Reallocate serve a lent buffer that someone grows (Arrow's
// arrays never do): with memory of its own, the page's count unchanged,
// so that the buffer's one Free still gives up its one count.
func (p *lentPage) Allocate(size int) []byte { return make([]byte, size) }

func (p *lentPage) Reallocate(size int, b []byte) []byte {
	nb := make([]byte, size)
	copy(nb, b)
	return nb
}
