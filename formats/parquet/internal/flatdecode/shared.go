package flatdecode

import (
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
)

// Bodies holds the decompressed bodies of pages that several Readers of
// one fetch read a part of each: where a large row group is read a
// window at a time, a window's first and last pages are most often its
// neighbours' too, and each would decompress them again (two windows of
// 65,536 rows in a page of 131,072 both decompressed the whole page). The
// first Reader to reach such a page (Page.Shared) decompresses it, the
// others wait for it and read the same bytes. A Reader about to wait says
// so (Reader.Waits), so that a caller with other columns to decode can do
// those first: two windows decoded at once that start in the same pages
// would otherwise take them in the same order, one decompressing each
// page while the other waited.
//
// The bodies are the fetch's, as its compressed bytes are: a Reader reads
// them as it reads an uncompressed page, never writes them nor builds an
// array over them, and hands them on to nothing. Release gives them back
// once no Reader of the fetch is left. The zero value is ready for use.
type Bodies struct {
	mu sync.Mutex
	m  map[int64]*sharedBody
}

type sharedBody struct {
	once sync.Once
	done atomic.Bool // once has run
	data []byte      // from bufpool
	err  error
}

// body is the decompressed body of the page at offset at, which make
// returns the first time it is asked for (in a buffer from bufpool, or
// nil and an error).
func (s *Bodies) body(at int64, make func() ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[int64]*sharedBody{}
	}
	b := s.m[at]
	if b == nil {
		b = &sharedBody{}
		s.m[at] = b
	}
	s.mu.Unlock()
	b.once.Do(func() {
		b.data, b.err = make()
		b.done.Store(true)
	})
	return b.data, b.err
}

// making reports whether a Reader is decompressing the page at offset at
// now: body would wait for it.
func (s *Bodies) making(at int64) bool {
	s.mu.Lock()
	b := s.m[at]
	s.mu.Unlock()
	return b != nil && !b.done.Load()
}

// Release hands the bodies to bufpool, each filled with poison first
// where poison is set (tests: a Reader that read one later would read
// those bytes). No Reader may read them after.
func (s *Bodies) Release(poison bool) {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.mu.Unlock()
	for _, b := range m {
		if b.data == nil {
			continue
		}
		if poison {
			for i := range b.data {
				b.data[i] = 0xa5
			}
		}
		bufpool.Put(b.data)
	}
}

// decompressedPages and decodedDictionaries count the data pages
// decompressed and the dictionary pages decoded, for the tests that check
// that neither is done more often than the reads need.
var decompressedPages, decodedDictionaries atomic.Int64

// PagesDecompressed is how many data pages Readers have decompressed.
func PagesDecompressed() int64 { return decompressedPages.Load() }

// DictionariesDecoded is how many dictionary pages Readers have decoded.
func DictionariesDecoded() int64 { return decodedDictionaries.Load() }
