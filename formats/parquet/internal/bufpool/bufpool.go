// Package bufpool keeps byte buffers of a read (fetched chunks, decompressed
// pages) for later reads, by size: a read allocates as many bytes as the
// row groups it reads store, and allocated anew each time they are most of
// what the garbage collector has to collect.
//
// Buffers are kept in size classes, sixteenths of powers of two (a buffer
// is at most a sixteenth larger than asked). A buffer put back is kept
// across collections while reads go on taking as many bytes (see kept);
// beyond that it goes to a sync.Pool, which drops what is not taken again
// within two collections, as the collector would have.
package bufpool

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// Buffers from 4 KiB to 256 MiB are kept; others are allocated and left to
// the collector.
const (
	minKept = 4 << 10
	maxKept = 256 << 20
)

const classes = 64 * 16

var pools [classes]sync.Pool // of *[]byte, by class

// A sync.Pool alone is emptied by every second collection. A 16-core read
// of the bench's data collects two or three times an epoch, so a third of
// its fetches found no buffer (2.9 of 8.7 GB over 30 epochs) and took
// fresh memory, whose pages fault in on first touch: kept across
// collections, the read streamed 5-7% more rows a second there
// (docs/performance.md#buffers-kept-across-collections).
//
// What is kept is bounded by use, so that a process that has stopped
// reading does not hold it: at each collection, kept keeps at most as many
// bytes as Gets took since the one before, and hands the rest to the
// sync.Pools. Once the reads stop, the next collection hands everything
// on, and the two after drop it.
var kept struct {
	mu    sync.Mutex
	free  [classes][][]byte // each len == cap == its class's size
	bytes int64             // held in free
	taken int64             // bytes Gets asked for since the last collection
}

// keptLimit bounds what kept holds at any time.
const keptLimit = 1 << 30

// class is the pool of buffers of n bytes and their capacity, or -1.
func class(n int) (c, size int) {
	if n < minKept || n > maxKept {
		return -1, n
	}
	e := bits.Len(uint(n - 1)) // 1<<(e-1) < n <= 1<<e
	step := 1 << (e - 5)       // a sixteenth of 1<<(e-1)
	k := (n + step - 1) / step // in (16, 32]
	return e*16 + k - 17, k * step
}

// Get returns a buffer of n bytes. It is not zeroed: it may hold what an
// earlier user left in it.
func Get(n int) []byte {
	c, size := class(n)
	if c < 0 {
		return unzeroed.Bytes(n)
	}
	kept.mu.Lock()
	kept.taken += int64(size)
	if l := kept.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		kept.free[c] = l[:len(l)-1]
		kept.bytes -= int64(size)
		kept.mu.Unlock()
		return b[:n]
	}
	kept.mu.Unlock()
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return unzeroed.Bytes(size)[:n]
}

// Put hands b, from Get, to later Gets. Nothing may use b after. A buffer
// that Get did not make (of another capacity) is left to the collector.
func Put(b []byte) {
	c, size := class(len(b))
	if c < 0 || cap(b) != size {
		// A slice shortened after Get: its class is that of its capacity.
		if c, size = class(cap(b)); c < 0 || cap(b) != size {
			return
		}
	}
	b = b[:size]
	kept.mu.Lock()
	if kept.bytes+int64(size) <= keptLimit {
		kept.free[c] = append(kept.free[c], b)
		kept.bytes += int64(size)
		kept.mu.Unlock()
		return
	}
	kept.mu.Unlock()
	pools[c].Put(&b)
}

// trim keeps at most the bytes taken since the last collection, the
// largest buffers first, and hands the others to the sync.Pools.
func trim() {
	defer trims.Add(1)
	kept.mu.Lock()
	defer kept.mu.Unlock()
	budget := kept.taken
	kept.taken = 0
	for c := classes - 1; c >= 0; c-- {
		l := kept.free[c]
		for i, b := range l {
			if size := int64(len(b)); size <= budget {
				budget -= size
				continue
			}
			for _, b := range l[i:] {
				kept.bytes -= int64(len(b))
				pools[c].Put(&b)
			}
			clear(l[i:])
			kept.free[c] = l[:i]
			break
		}
	}
}

// sentinel is an object nothing keeps: the cleanup attached to it runs
// once a collection has found it unreachable, and attaches itself to the
// next one, so that trim runs about once a collection.
type sentinel struct{ _ *int } // a pointer keeps it out of the tiny allocator

func watchCollections() {
	runtime.AddCleanup(&sentinel{}, func(int) {
		trim()
		watchCollections()
	}, 0)
}

func init() { watchCollections() }

// trims counts the trims run, for the tests.
var trims atomic.Int64

// keptBytes is what kept holds now, for the tests.
func keptBytes() int64 {
	kept.mu.Lock()
	defer kept.mu.Unlock()
	return kept.bytes
}
