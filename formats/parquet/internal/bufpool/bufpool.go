// Package bufpool keeps byte buffers of a read (fetched chunks, decompressed
// pages) for later reads, by size: a read allocates as many bytes as the
// row groups it reads store, and allocated anew each time they are most of
// what the garbage collector has to collect.
//
// Buffers are kept in size classes, sixteenths of powers of two (a buffer
// is at most a sixteenth larger than asked). A buffer put back is kept
// across collections while reads go on using as many at once (see kept);
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
// what its fetches asked for found no buffer and took fresh memory, whose
// pages fault in on first touch: kept across collections, the read
// streamed 5-7% more rows a second there
// (docs/performance.md#buffers-kept-across-collections).
//
// What is kept is bounded by use, so that it is about what reads hold at
// once and a process that has stopped reading holds nothing: a buffer put
// back is kept only while kept holds less than the most bytes Gets had out
// at once between the last two collections (the peak); past that, and of
// what is kept past it at a collection, it goes to the sync.Pools. Bounded
// by the bytes taken instead, kept grew with every size class a read ever
// used, and a shuffled read of 8 files peaked 30% higher. Once reads stop,
// the second collection hands everything on, and the two after drop it.
var kept struct {
	mu    sync.Mutex
	free  [classes][][]byte // each len == cap == its class's size
	bytes int64             // held in free
	out   int64             // handed out by Get and not put back
	peak  int64             // the most out at once since the last collection
	limit int64             // what free may hold: the peak before the last collection
}

// keptLimit bounds what kept holds whatever the peak. A buffer that Get
// handed out and nobody put back (a fetch dropped without its release)
// stays counted out, and so raises later peaks; the bound keeps that from
// growing what is kept past what a read of many cores holds at once (with
// the 16-core defaults, up to 73 MiB out at once reading the bench data,
// 145 MiB shuffling its table).
const keptLimit = 256 << 20

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
	kept.out += int64(size)
	kept.peak = max(kept.peak, kept.out)
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

// Forget says that b, from Get, will not be put back: it was handed to
// something the garbage collector frees (an array that lends it), and is
// no longer counted as out.
func Forget(b []byte) {
	c, size := class(cap(b))
	if c < 0 || cap(b) != size {
		return
	}
	kept.mu.Lock()
	kept.out = max(kept.out-int64(size), 0)
	kept.mu.Unlock()
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
	kept.out = max(kept.out-int64(size), 0) // a buffer Get did not hand out, of a class size, is not counted
	if kept.bytes+int64(size) <= min(kept.limit, keptLimit) {
		kept.free[c] = append(kept.free[c], b)
		kept.bytes += int64(size)
		kept.mu.Unlock()
		return
	}
	kept.mu.Unlock()
	pools[c].Put(&b)
}

// trim keeps at most the peak of the cycle that ends, the largest buffers
// first, hands the others to the sync.Pools, and starts the next cycle's
// peak from what is out now.
func trim() {
	defer trims.Add(1)
	kept.mu.Lock()
	defer kept.mu.Unlock()
	kept.limit, kept.peak = kept.peak, kept.out
	budget := kept.limit
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
