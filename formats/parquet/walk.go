package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
	"github.com/sluicedata/sluice/storage"
)

// Most writers (pyarrow by default) write no page index, so where a split
// boundary cuts a row group the reader does not know where its pages are.
// It finds out by walking the page headers of the selected column chunks:
// each header gives its page's compressed size, so where the next page
// starts, and its row count (num_values of a version 1 page of a column
// without repetition, num_rows of a version 2 page). A walk reads the
// headers only, a few dozen bytes a page, and only as far as the rows a
// read needs: each later read goes on from where the last one stopped.
//
// The pages found are handed to arrow-go as an offset index of its own: the
// Thrift bytes of an OffsetIndex per column, served by the chunkReader at
// an offset past the end of the file, and a copy of the footer's metadata
// whose column chunks point there (withOffsetIndexes). arrow-go then seeks
// and reads exactly as with an index the writer wrote, and Fetch fetches
// the same pages (expectPages), checked the same way (checkPages).
//
// Walks are kept per file for the process (the Meta) and, where the plan
// has a cache, per row group and column in it, so that a restarted job
// does not walk again; what the cache gives is checked as if read. A
// stream with a shared plan walks ahead (FindPages), on the rank that
// plans, the row groups its split boundaries cut, to the chunks' ends, and
// the walks travel to the other ranks in the plan, as the footers do.

// maxWalkHeader is the largest page header a walk reads. Headers are tens
// of bytes, up to a few KiB with long string statistics; a chunk with a
// larger one is fetched whole instead, where arrow-go and the page checks
// judge it.
const maxWalkHeader = 256 << 10

// walkMinBytes is the least a walk must be able to save, in bytes of the
// selected chunks outside the rows read, for a cut row group to be walked
// rather than fetched whole: a walk costs a request per page header, in a
// chain per column, and where chunks are small (often a single page) it
// would save nothing.
var walkMinBytes int64 = 64 << 10

// leafWalk is what is known of the pages of one column chunk.
type leafWalk struct {
	mu    sync.Mutex // held for a walk: a chunk is walked once at a time
	pages []pageLoc  // data pages, in order
	next  int64      // where the next page starts: the walk goes on there
	rows  int64      // rows of the pages found
	done  bool       // every page found
	// dictPages is the pages found up to the last whose encoding may take
	// its values from the dictionary: a read of pages past them needs no
	// dictionary page (see pageRanges).
	dictPages int
	// unusable is set where the chunk's pages cannot be read by an
	// offset index (see walkStep): it is fetched whole.
	unusable bool
	guess    int // bytes the next header read asks for
	loaded   bool
	// heading is set while a head read (planHead) fetches the chunk's
	// pages to walk them in the fetched bytes, and closed once it has:
	// a read that would walk them meanwhile waits for it rather than
	// read their headers one by one too.
	heading chan struct{}
}

// pageWalks holds a file's walks, by row group and leaf.
type pageWalks struct {
	mu    sync.Mutex
	walks map[pruneKey]*leafWalk
}

func (w *pageWalks) of(rg, leaf int) *leafWalk {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.walks == nil {
		w.walks = map[pruneKey]*leafWalk{}
	}
	k := pruneKey{rg, leaf}
	if w.walks[k] == nil {
		w.walks[k] = &leafWalk{}
	}
	return w.walks[k]
}

// walkChunk is one column chunk a walk reads, as arrow-go reads it.
type walkChunk struct {
	name       string // the column's path, for errors
	rg, leaf   int
	start, end int64 // the chunk's bytes
	dataOffset int64 // the footer's data_page_offset
	rows       int64 // the row group's
	// dictAnywhere is set where the footer gives a dictionary page but no
	// usable dictionary_page_offset: arrow-go finds such a dictionary only
	// by reading the chunk from its start.
	dictAnywhere bool
}

// walkedIndex returns an offset index of row group rg for leaves made by
// walking their page headers as far as row hi, or nil where the row group
// cannot be read by pages this way, or would gain too little (it is then
// fetched whole). at is the offset past the end of the file where the
// index's bytes are to be served.
func (m *parquetMeta) walkedIndex(ctx context.Context, f *formats.Fragment, rg int, leaves []int, lo, hi, at int64, concurrency int) (*rowGroupIndex, error) {
	g := m.md.RowGroup(rg)
	jobs, paged, err := m.walkJobs(rg, leaves)
	if err != nil || len(jobs) == 0 || m.singlePages(rg, leaves) {
		return nil, err
	}
	walked := true
	for _, j := range jobs {
		walked = walked && j.w.covers(hi)
	}
	if saved := float64(paged) * float64(g.NumRows()-(hi-lo)) / float64(g.NumRows()); !walked && saved < float64(walkMinBytes) {
		return nil, nil
	}
	if err := walkAll(ctx, f, jobs, hi, concurrency); err != nil {
		return nil, err
	}
	return indexOf(rg, jobs, at), nil
}

// indexOf is the offset index of row group rg that jobs' walks make, to be
// served at at, or nil where a chunk cannot be read by pages.
func indexOf(rg int, jobs []walkJob, at int64) *rowGroupIndex {
	ix := &rowGroupIndex{rg: rg, at: at, pages: map[int][]pageLoc{}, rows: map[int]int64{}, virtual: map[int]metadata.IndexLocation{}, dictPages: map[int]int{}}
	for _, j := range jobs {
		pages, rows, dictPages, ok := j.w.snapshot()
		if !ok {
			return nil
		}
		ix.dictPages[j.c.leaf] = dictPages
		from := len(ix.bytes)
		ix.bytes = appendOffsetIndex(ix.bytes, pages)
		if len(ix.bytes) > math.MaxInt32 {
			return nil // arrow-go's locations are 32-bit
		}
		loc := metadata.IndexLocation{Offset: at + int64(from), Length: int32(len(ix.bytes) - from)}
		ix.pages[j.c.leaf], ix.rows[j.c.leaf], ix.virtual[j.c.leaf] = pages, rows, loc
	}
	return ix
}

// A read that runs from row lo to a row group's end (the second fetch of
// a row group that a stream reads cut into chunks) needs, of each chunk,
// the bytes from the page row lo lies in to the chunk's end: a walk of the
// rest would read, one request a page, headers that this fetch brings
// anyway. So such a read is planned with a walk as far as row lo only
// (planTail: no request where an earlier read walked there), and the walk
// goes on in the fetched bytes (finishTail). A chunk that turns out not
// readable by pages, or whose pages need bytes the fetch left out (a
// dictionary page where the writer went back to the dictionary), gets
// them in a second round of requests: the values never rest on the guess.

// tailRead is a read of rows [lo, hi) of row group rg planned without
// walking as far as hi: a tail (planTail; hi its last row), or a head
// (planHead; lo its first). finishTail walks its chunks as far as row to
// in the fetched bytes.
type tailRead struct {
	rg     int
	lo, hi int64
	to     int64
	jobs   []walkJob
	head   bool // planHead's: its walks are the read's until release
}

// release lets other reads walk the chunks of a head read.
func (t *tailRead) release() {
	if t.head {
		for _, j := range t.jobs {
			j.w.releaseHead()
		}
		t.head = false
	}
}

// planTail plans a read of rows [lo, hi) of row group rg, hi its end:
// having walked as far as row lo, it returns the byte ranges to fetch,
// from that page to each chunk's end and the dictionary page where the
// pages may need it (and repeated leaves' chunks whole), or nil where the
// read is planned by walkedIndex (a chunk is not read by pages, or a walk
// would save too little: the chunks are then fetched whole). ownDecodes is parquetFetched's: the dictionary page is left out
// only where the walk found the writer's fall back from the dictionary
// before row lo's page (a writer that falls back does not return).
func (m *parquetMeta) planTail(ctx context.Context, f *formats.Fragment, rg int, leaves []int, lo, hi int64, ownDecodes bool, concurrency int) (*tailRead, []byteRange, error) {
	g := m.md.RowGroup(rg)
	if lo <= 0 || hi != g.NumRows() {
		return nil, nil, nil
	}
	jobs, paged, err := m.walkJobs(rg, leaves)
	if err != nil || len(jobs) == 0 || m.singlePages(rg, leaves) {
		return nil, nil, err
	}
	if saved := float64(paged) * float64(lo) / float64(g.NumRows()); saved < float64(walkMinBytes) {
		return nil, nil, nil
	}
	// As far as row lo's page: no request where an earlier read of the
	// row group walked there (or is walking there now).
	if err := walkAll(ctx, f, jobs, lo+1, concurrency); err != nil {
		return nil, nil, err
	}
	var out []byteRange
	for _, j := range jobs {
		from, data, head, ok := j.w.tailFrom(lo, ownDecodes)
		if !ok {
			return nil, nil, nil
		}
		if head && data > j.c.start {
			out = append(out, byteRange{j.c.start, data})
		}
		out = append(out, byteRange{from, j.c.end})
	}
	for _, leaf := range leaves {
		if m.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			// Read from its start (see expectPages).
			cc, err := g.ColumnChunk(leaf)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: row group %d column %d: %w", formats.ErrCorrupt, rg, leaf, err)
			}
			start, end := chunkSpan(cc)
			out = append(out, byteRange{start, end})
		}
	}
	return &tailRead{rg: rg, lo: lo, hi: hi, to: hi, jobs: jobs}, out, nil
}

// planPart plans a read of rows [lo, hi) of row group rg, which has no
// offset index, without walking as far as hi: a tail (planTail) or a head
// (planHead), with the ranges to fetch and, by the end of each, the room
// a second round may fill after it; nil where neither fits (the read is
// planned by walkedIndex).
func (m *parquetMeta) planPart(ctx context.Context, f *formats.Fragment, rg int, leaves []int, lo, hi int64, ownDecodes bool, concurrency int) (*tailRead, []byteRange, map[int64]int64, error) {
	t, rs, err := m.planTail(ctx, f, rg, leaves, lo, hi, ownDecodes, concurrency)
	if t != nil || err != nil {
		return t, rs, nil, err
	}
	return m.planHead(ctx, f, rg, leaves, lo, hi)
}

// tailFrom is where the page that row lo lies in starts, where the first
// data page does (the bytes before it are the dictionary page), and
// whether a read from row lo fetches the dictionary page: ok false where
// the walk has not found row lo's page (or not yet taken up the plan's
// cache), or the chunk is not read by pages.
func (w *leafWalk) tailFrom(lo int64, ownDecodes bool) (from, data int64, head, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.loaded || w.unusable || len(w.pages) == 0 || w.rows <= lo {
		return 0, 0, false, false
	}
	first, _ := pagesOf(w.pages, lo, lo+1)
	fellBack := w.dictPages < len(w.pages)
	return w.pages[first].offset, w.pages[0].offset, !(ownDecodes && fellBack && first >= w.dictPages), true
}

// finishTail walks t's chunks as far as row t.to in rd, the bytes
// planTail's or planHead's ranges fetched, and returns the offset index
// they make, to be served at at, or nil where a chunk cannot be read by
// pages.
func (m *parquetMeta) finishTail(ctx context.Context, f *formats.Fragment, t *tailRead, rd io.ReaderAt, at int64) (*rowGroupIndex, error) {
	for _, j := range t.jobs {
		if err := j.w.walk(ctx, f, rd, j.c, t.to); err != nil {
			return nil, err
		}
	}
	return indexOf(t.rg, t.jobs, at), nil
}

// A read from a row group's first row to a row short of its end (the
// first fetch of a row group that a stream reads cut into chunks) needs,
// of each chunk, the bytes from its start to the end of the page row hi-1
// lies in. A walk of those pages' headers first would cost a request a
// page, one after the other in each chunk, before the fetch could start.
// So such a read fetches, of each chunk, a share of its bytes a little
// under the rows' (headShare), walks the headers in what came (finishTail,
// asking storage only for a header past it), and fetches what the pages
// found need beyond it in a second round, into the room left after the
// first round's bytes (headRoom): a page's bytes stay in one buffer, and
// none is fetched twice. Where the pages are thicker at the chunk's start
// than its share says (a dictionary's indices are), the share's bytes past
// the last page needed are fetched for nothing: the share is a little
// under the rows' for that.

// headShare is the part of its rows' share of a chunk's bytes that a head
// read fetches before it has walked the pages: 15/16.
const headShare = 15.0 / 16

// planHead plans a read of rows [0, hi) of row group rg, hi short of its
// end, where the walk has not found row hi's page yet: it returns the byte
// ranges to fetch first (headShare of each chunk's bytes as far as hi, and
// repeated leaves' chunks whole) with, by the end of each, the room to
// leave after it for the second round, or nil where the read is planned by
// walkedIndex (its walk costs no request, a chunk is not read by pages, or
// a walk would save too little). The chunks' walks are the read's until
// it calls release (see leafWalk.heading): a read is a run of rows, so a
// head is the last row group a read plans, and no read waits for a walk
// while holding one of them.
func (m *parquetMeta) planHead(ctx context.Context, f *formats.Fragment, rg int, leaves []int, lo, hi int64) (*tailRead, []byteRange, map[int64]int64, error) {
	g := m.md.RowGroup(rg)
	rows := g.NumRows()
	if lo != 0 || hi <= 0 || hi >= rows {
		return nil, nil, nil, nil
	}
	jobs, paged, err := m.walkJobs(rg, leaves)
	if err != nil || len(jobs) == 0 || m.singlePages(rg, leaves) {
		return nil, nil, nil, err
	}
	if saved := float64(paged) * float64(rows-hi) / float64(rows); saved < float64(walkMinBytes) {
		return nil, nil, nil, nil
	}
	// Take up what the plan's cache holds (no request): where it has the
	// pages, walkedIndex plans the read as well as it can be.
	if err := walkAll(ctx, f, jobs, 0, 1); err != nil {
		return nil, nil, nil, err
	}
	walked := true
	for _, j := range jobs {
		walked = walked && j.w.covers(hi)
	}
	if walked {
		return nil, nil, nil, nil
	}
	for i, j := range jobs {
		if !j.w.claimHead() {
			// Another head read is at it: walkedIndex waits for it.
			for _, j := range jobs[:i] {
				j.w.releaseHead()
			}
			return nil, nil, nil, nil
		}
	}
	var out []byteRange
	room := map[int64]int64{}
	for _, j := range jobs {
		c := j.c
		if to, ok := j.w.endOf(hi); ok {
			// Walked past hi already (another read walked on, or the
			// plan's cache holds its walk): the pages needed are known.
			out = append(out, byteRange{c.start, to})
			continue
		}
		size := c.end - c.start
		to := c.start + int64(float64(size)*float64(hi)/float64(rows)*headShare)
		to = min(max(to, j.w.found(), c.start+1), c.end)
		out = append(out, byteRange{c.start, to})
		// The rest of a page or two, and the share's shortfall.
		pages, _ := m.dataPages(rg, c.leaf)
		room[to] = min(c.end-to, 2*size/max(pages, 1)+(to-c.start)/8)
	}
	for _, leaf := range leaves {
		if m.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			// Read from its start (see expectPages).
			cc, err := g.ColumnChunk(leaf)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%w: row group %d column %d: %w", formats.ErrCorrupt, rg, leaf, err)
			}
			start, end := chunkSpan(cc)
			out = append(out, byteRange{start, end})
		}
	}
	return &tailRead{rg: rg, lo: 0, hi: hi, to: hi, jobs: jobs, head: true}, out, room, nil
}

// found is where the pages the walk has found end: the bytes a read by
// them is known to need, where they hold no more than its rows.
func (w *leafWalk) found() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// endOf is where the page that row hi-1 lies in ends, where the walk has
// found it: a read of rows [0, hi) needs no byte of the chunk past it.
func (w *leafWalk) endOf(hi int64) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.loaded || w.unusable || w.rows < hi || hi <= 0 {
		return 0, false
	}
	_, last := pagesOf(w.pages, hi-1, hi)
	p := w.pages[last-1]
	return p.offset + p.size, true
}

// fetchedOr reads the bytes a fetch brought (spans, sorted by offset), and
// from storage those it did not: a walk past the bytes a head read
// guessed. A read past the end of such a span lengthens it as far as the
// read and a block more (into the room fetchRanges left after it, or a
// larger buffer), rather than ask for a header alone: the next headers
// most often lie there too, and the pages there are the read's, which the
// second round then does not fetch again (fetchMore). Past a block the
// read's pages did not need, the bytes are fetched for nothing.
type fetchedOr struct {
	spans []span // lengthened in place
	rd    *storage.Reader
	// head holds, by offset, the spans of head reads' guesses, which a
	// walk may lengthen, and the block it lengthens each by next:
	// walkAhead, twice as much each time.
	head map[int64]int64
}

// walkAhead is the first block a walk past a head read's guess reads.
const walkAhead = 16 << 10

func (r fetchedOr) ReadAt(p []byte, off int64) (int, error) {
	if (&chunkReader{spans: r.spans}).fetched(p, off) {
		return len(p), nil
	}
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > off }) - 1
	if i < 0 || r.head[r.spans[i].off] == 0 {
		return r.rd.ReadAt(p, off)
	}
	sp := &r.spans[i]
	have := int64(len(sp.data))
	end := sp.off + have
	block := r.head[sp.off]
	r.head[sp.off] = 2 * block // far short, the blocks grow
	n := min(max(off+int64(len(p))-end, block), r.rd.Size()-end)
	if off+int64(len(p)) > end+n {
		return r.rd.ReadAt(p, off) // past the end of the file
	}
	if have+n > int64(cap(sp.data)) {
		// The guess fell far short: the span moves to a larger buffer
		// (nothing else holds the one it leaves while the walk goes on).
		b := bufpool.Get(int(max(2*int64(cap(sp.data)), have+n)))
		copy(b, sp.data)
		bufpool.Put(sp.data)
		sp.data = b[:have]
	}
	if err := readFull(r.rd, sp.data[have:have+n], end); err != nil {
		return 0, err
	}
	sp.data = sp.data[:have+n]
	return copy(p, sp.data[off-sp.off:]), nil
}

// walkJob is one column chunk to walk and what is known of its pages.
type walkJob struct {
	c walkChunk
	w *leafWalk
}

// walkJobs are the chunks of leaves in row group rg that a walk reads
// (the flat ones), and their bytes; none where the row group's chunks may
// end before their last page does.
func (m *parquetMeta) walkJobs(rg int, leaves []int) ([]walkJob, int64, error) {
	g := m.md.RowGroup(rg)
	if m.md.WriterVersion().LessThan(metadata.Parquet816FixedVersion) || g.NumRows() <= 0 {
		return nil, 0, nil
	}
	var jobs []walkJob
	var paged int64 // bytes of the chunks a walk would read by pages
	for _, leaf := range leaves {
		if m.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			continue // fetched whole, read from its start (see expectPages)
		}
		cc, err := g.ColumnChunk(leaf)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: row group %d column %d: %w", formats.ErrCorrupt, rg, leaf, err)
		}
		start, end := chunkSpan(cc)
		c := walkChunk{
			name: m.md.Schema.Column(leaf).ColumnPath().String(), rg: rg, leaf: leaf,
			start: start, end: end, dataOffset: cc.DataPageOffset(), rows: g.NumRows(),
			dictAnywhere: cc.HasDictionaryPage() && cc.DictionaryPageOffset() <= 0,
		}
		jobs = append(jobs, walkJob{c, m.walks.of(rg, leaf)})
		paged += end - start
	}
	return jobs, paged, nil
}

// walkAll walks every job's chunk as far as row hi, concurrency chunks at
// once (a chunk's headers are a chain: each gives where the next starts).
func walkAll(ctx context.Context, f *formats.Fragment, jobs []walkJob, hi int64, concurrency int) error {
	if concurrency <= 0 {
		concurrency = 8
	}
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(concurrency)
	rd := f.Source.ReaderAt(ectx)
	for _, j := range jobs {
		eg.Go(func() error {
			if err := j.w.awaitHead(ectx); err != nil {
				return err
			}
			return j.w.walk(ectx, f, rd, j.c, hi)
		})
	}
	return eg.Wait()
}

// awaitHead waits until no head read is walking the chunk in its fetch.
func (w *leafWalk) awaitHead(ctx context.Context) error {
	w.mu.Lock()
	wait := w.heading
	w.mu.Unlock()
	if wait == nil {
		return nil
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// claimHead marks the chunk as walked by a head read's fetch; false where
// another one is.
func (w *leafWalk) claimHead() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.heading != nil {
		return false
	}
	w.heading = make(chan struct{})
	return true
}

// releaseHead ends claimHead's mark, waking the reads that wait for it.
func (w *leafWalk) releaseHead() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.heading != nil {
		close(w.heading)
		w.heading = nil
	}
}

// FindPages walks, ahead of any read, the page headers of the selected
// column chunks of row group rg to their ends, where the row group has no
// offset index and is read in part by walked pages (walkable): a stream
// does this at plan time for the row groups its epoch's split boundaries
// cut, on the rank that writes a shared plan, so that the walks go into
// the plan's cache (and from there into the shared plan) and every rank
// reads the cut row groups' pages without walking them again. A row group
// that is not walked so does nothing.
func (p Format) FindPages(ctx context.Context, f *formats.Fragment, rg int) error {
	meta, ok := f.Meta.(*parquetMeta)
	if !ok {
		return fmt.Errorf("parquet: FindPages: %s was not inspected by this driver", f.URL)
	}
	if rg < 0 || rg >= meta.md.NumRowGroups() {
		return fmt.Errorf("parquet: FindPages: %s: row group %d of %d", f.URL, rg, meta.md.NumRowGroups())
	}
	g := meta.md.RowGroup(rg)
	if _, _, indexed := offsetIndexRange(g); indexed || !meta.walkable(rg, meta.selected) {
		return nil
	}
	jobs, _, err := meta.walkJobs(rg, meta.selected)
	if err != nil || len(jobs) == 0 {
		return err
	}
	return walkAll(ctx, f, jobs, g.NumRows(), p.FetchConcurrency)
}

// walkPages is how many data pages some selected chunk of a row group
// without an offset index must hold, by the footer's encoding_stats, for
// the row group to count as paged (formats.Unit.Paged): a read of part of
// it then walks the headers and fetches a few pages of each chunk, where
// fewer, larger pages would leave little out. pyarrow's 1 MiB pages give a
// row group of 1,048,576 rows several per numeric column.
const walkPages = 4

// walkable reports whether row group rg, which has no offset index, is
// read in part by walking its pages: every selected leaf is flat (repeated
// columns are fetched whole) and some chunk holds walkPages data pages or
// more, in walkMinBytes or more (a smaller one is fetched whole even where
// cut: see walkMinBytes). A chunk whose footer does not count its pages is
// not taken on trust.
func (m *parquetMeta) walkable(rg int, leaves []int) bool {
	g := m.md.RowGroup(rg)
	for _, leaf := range leaves {
		if m.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			return false
		}
		if _, ok := m.dataPages(rg, leaf); !ok {
			return false
		}
	}
	for _, leaf := range leaves {
		n, _ := m.dataPages(rg, leaf)
		cc, err := g.ColumnChunk(leaf)
		if err == nil && n >= walkPages && cc.TotalCompressedSize() >= walkMinBytes {
			return true
		}
	}
	return false
}

// singlePages reports whether the footer says that every column chunk of
// leaves (those without repetition) in row group rg holds one data page
// at most: its encoding_stats count the pages. A walk would find nothing
// to leave out. Where a chunk has no counts it may have many pages.
func (m *parquetMeta) singlePages(rg int, leaves []int) bool {
	for _, leaf := range leaves {
		if m.md.Schema.Column(leaf).MaxRepetitionLevel() > 0 {
			continue
		}
		if n, ok := m.dataPages(rg, leaf); !ok || n > 1 {
			return false
		}
	}
	return true
}

// dataPages is the data pages the chunk of leaf in row group rg holds by
// its footer's encoding_stats, ok false where it has none.
func (m *parquetMeta) dataPages(rg, leaf int) (n int64, ok bool) {
	cols := m.md.FileMetaData.RowGroups[rg].Columns
	if leaf >= len(cols) || cols[leaf] == nil || cols[leaf].MetaData == nil || len(cols[leaf].MetaData.EncodingStats) == 0 {
		return 0, false
	}
	for _, st := range cols[leaf].MetaData.EncodingStats {
		if st != nil && (int64(st.PageType) == thrift.PageData || int64(st.PageType) == thrift.PageDataV2) {
			n += int64(st.Count)
		}
	}
	return n, true
}

// covers reports whether the walk has found the pages up to row hi, or
// all there are: a read by pages then costs no request more.
func (w *leafWalk) covers(hi int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loaded && (w.done || w.unusable || w.rows >= hi)
}

// snapshot is what a read may use of the walk: its pages, the rows they
// hold and how many of them lead up to the last that may need the
// dictionary, or false where the chunk cannot be read by pages.
func (w *leafWalk) snapshot() ([]pageLoc, int64, int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unusable || len(w.pages) == 0 {
		return nil, 0, 0, false
	}
	return w.pages, w.rows, w.dictPages, true
}

// walk walks c's page headers until they hold row hi (exclusive) or the
// chunk ends, taking up what the plan's cache holds first and giving it
// what was walked.
func (w *leafWalk) walk(ctx context.Context, f *formats.Fragment, rd io.ReaderAt, c walkChunk, hi int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	cache := f.Cache()
	var key []byte
	if cache != nil {
		key = fmt.Appendf(f.CacheKey("parquet-pages"), "\x00%d\x00%d", c.rg, c.leaf)
	}
	if !w.loaded {
		w.loaded = true
		w.next = c.start
		if cache != nil {
			if b, err := cache.Get(ctx, key); err == nil {
				w.load(b, c) // checked as if read: a cache is storage too
			}
		}
	}
	before := len(w.pages)
	if err := w.walkTo(ctx, rd, c, hi); err != nil {
		return err
	}
	if cache != nil && len(w.pages) > before && !w.unusable {
		_ = cache.Set(ctx, key, w.encode()) // a cache that cannot be written costs a walk, no more
	}
	return nil
}

// walkTo reads c's page headers from w.next on until the pages found hold
// row hi (exclusive), the chunk's pages are all found, or they turn out
// unusable for reads by pages.
func (w *leafWalk) walkTo(ctx context.Context, rd io.ReaderAt, c walkChunk, hi int64) error {
	for !w.done && !w.unusable && w.rows < hi {
		if err := w.step(ctx, rd, c); err != nil {
			return err
		}
	}
	if !w.unusable && len(w.pages) > 0 && (w.pages[0].offset != c.dataOffset || (c.dictAnywhere && w.pages[0].offset > c.start)) {
		// arrow-go starts a seek's chunk at data_page_offset, and finds a
		// dictionary without an offset only by reading from the start.
		w.unusable = true
	}
	return nil
}

// step reads the header at w.next and records its page.
func (w *leafWalk) step(ctx context.Context, rd io.ReaderAt, c walkChunk) error {
	at := w.next
	h, err := w.header(rd, c, at)
	if err != nil || h == nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: row group %d: column %q: corrupt page at byte %d: %s", formats.ErrCorrupt, c.rg, c.name, at, fmt.Sprintf(format, args...))
	}
	if h.Compressed < 0 || h.Uncompressed < 0 {
		return bad("a negative page size (%d compressed, %d uncompressed)", h.Compressed, h.Uncompressed)
	}
	size := int64(h.Size) + h.Compressed
	if room := c.end - at - int64(h.Size); h.Compressed > room {
		return bad("its %d bytes run %d bytes past the end of the column chunk", h.Compressed, h.Compressed-room)
	}
	var rows int64
	switch h.Type {
	case thrift.PageDictionary:
		if at != c.start {
			w.unusable = true // arrow-go reads a dictionary only at a chunk's start after a seek
			return nil
		}
		w.next += size
		return nil
	case thrift.PageData:
		if !h.HasData {
			return bad("a data page without its data page header")
		}
		rows = h.Values
	case thrift.PageDataV2:
		if !h.HasV2 {
			return bad("a data page without its data page header")
		}
		rows = h.Rows
	case -1:
		return bad("a page header without its type")
	default:
		// Index pages and kinds arrow-go skips: an offset index cannot
		// name them, so the chunk is read whole.
		w.unusable = true
		return nil
	}
	switch {
	case rows < 0:
		return bad("a data page of %d rows", rows)
	case rows == 0:
		w.unusable = true // a page of no rows has no first row to seek to
		return nil
	case rows > c.rows-w.rows:
		return bad("the pages up to it hold %d rows, more than the row group's %d", w.rows+rows, c.rows)
	case size > math.MaxInt32:
		w.unusable = true
		return nil
	}
	w.pages = append(w.pages, pageLoc{offset: at, size: size, firstRow: w.rows})
	if mayUseDictionary(h.Encoding) {
		w.dictPages = len(w.pages)
	}
	w.rows += rows
	w.next += size
	switch {
	case w.rows == c.rows:
		w.done = true // arrow-go reads no further either
	case w.next == c.end:
		return fmt.Errorf("%w: row group %d: column %q: its pages hold %d rows, the row group %d (the chunk ends at byte %d)", formats.ErrCorrupt, c.rg, c.name, w.rows, c.rows, c.end)
	}
	return ctx.Err()
}

// mayUseDictionary reports whether a data page of encoding enc may take
// its values from the chunk's dictionary page: PLAIN_DICTIONARY and
// RLE_DICTIONARY do, and so, for all the walk knows, does an encoding it
// does not know.
func mayUseDictionary(enc int64) bool {
	switch enc {
	case encPlain, encRLE, encBitPacked, encDeltaBinaryPacked, encDeltaLengthByteArray, encDeltaByteArray, encByteStreamSplit:
		return false
	}
	return true
}

// The encodings of the Parquet format that take no dictionary (parquet.thrift's Encoding).
const (
	encPlain                = 0
	encRLE                  = 3
	encBitPacked            = 4
	encDeltaBinaryPacked    = 5
	encDeltaLengthByteArray = 6
	encDeltaByteArray       = 7
	encByteStreamSplit      = 9
)

// header reads and parses the page header at at: nil where it is larger
// than a walk reads (the chunk is then read whole).
func (w *leafWalk) header(rd io.ReaderAt, c walkChunk, at int64) (*thrift.PageHeader, error) {
	rest := c.end - at
	if rest <= 0 {
		return nil, fmt.Errorf("%w: row group %d: column %q: its pages hold %d rows, the row group %d (the chunk ends at byte %d)", formats.ErrCorrupt, c.rg, c.name, w.rows, c.rows, c.end)
	}
	// Headers of one chunk are about the same size: ask for the last
	// one's and a little more, and for the rest where that was short. The
	// first guess holds a header with statistics of short values.
	n := int64(w.guess)
	if n <= 0 {
		n = 128
	}
	var buf []byte
	for {
		n = min(n, rest, maxWalkHeader)
		have := int64(len(buf))
		buf = slices.Grow(buf, int(n-have))[:n]
		if got, err := rd.ReadAt(buf[have:], at+have); err != nil && (!errors.Is(err, io.EOF) || int64(got) != n-have) {
			return nil, err // the file could not be read, which says nothing of its contents
		}
		h, err := thrift.ParsePageHeader(buf)
		if err == nil {
			w.guess = h.Size + 2
			return &h, nil
		}
		switch {
		case n == rest:
			return nil, fmt.Errorf("%w: row group %d: column %q: corrupt page at byte %d: its header does not parse in the %d bytes left of the column chunk: %w", formats.ErrCorrupt, c.rg, c.name, at, rest, err)
		case n == maxWalkHeader:
			w.unusable = true
			return nil, nil
		}
		n *= 4
	}
}

// appendOffsetIndex appends pages as a Thrift compact OffsetIndex: its
// page_locations (field 1), each a PageLocation {1: offset, 2:
// compressed_page_size, 3: first_row_index}.
func appendOffsetIndex(b []byte, pages []pageLoc) []byte {
	b = append(b, 0x19) // field 1, a list
	if len(pages) < 15 {
		b = append(b, byte(len(pages))<<4|thrift.Struct)
	} else {
		b = append(b, 0xf0|thrift.Struct)
		b = binary.AppendUvarint(b, uint64(len(pages)))
	}
	for _, p := range pages {
		b = append(b, 0x16) // field 1, an i64
		b = binary.AppendUvarint(b, zigzagOf(p.offset))
		b = append(b, 0x15) // field 2, an i32
		b = binary.AppendUvarint(b, zigzagOf(p.size))
		b = append(b, 0x16) // field 3, an i64
		b = binary.AppendUvarint(b, zigzagOf(p.firstRow))
		b = append(b, thrift.Stop)
	}
	return append(b, thrift.Stop)
}

func zigzagOf(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// walkVersion leads a walk as the plan's cache holds it. Version 1 gave
// every page's offset, size and rows; 2 leaves the offsets out (each page
// starts where the one before ends, from data_page_offset) and gives each
// page's rows as the difference from the page before's, zero for the
// common run of equal pages: about 3 bytes a page, where the walk travels
// in a shared plan to every rank; 3 adds how many pages lead up to the
// last that may need the dictionary (leafWalk.dictPages). A walk of
// another version is walked again.
const walkVersion = 3

// encode is the walk as the plan's cache holds it: the version, whether
// it is done, the page count, the pages up to the last that may need the
// dictionary, then each page's size and its rows less the page before's
// (zigzag), as varints, and a CRC-32 of them all, so that damaged bytes
// are not taken for a walk.
func (w *leafWalk) encode() []byte {
	b := make([]byte, 0, 8+3*len(w.pages))
	b = append(b, walkVersion)
	done := uint64(0)
	if w.done {
		done = 1
	}
	b = binary.AppendUvarint(b, done)
	b = binary.AppendUvarint(b, uint64(len(w.pages)))
	b = binary.AppendUvarint(b, uint64(w.dictPages))
	var last int64
	for i, p := range w.pages {
		rows := w.rows - p.firstRow
		if i+1 < len(w.pages) {
			rows = w.pages[i+1].firstRow - p.firstRow
		}
		b = binary.AppendUvarint(b, uint64(p.size))
		b = binary.AppendUvarint(b, zigzagOf(rows-last))
		last = rows
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errWalkCache = errors.New("not a walk")

// load takes up a walk the plan's cache held, if it describes c: pages
// that follow one another from data_page_offset inside the chunk, of
// positive sizes and row counts, holding the row group's rows if done.
// Anything else is ignored, and the chunk walked again.
func (w *leafWalk) load(b []byte, c walkChunk) {
	pages, rows, dictPages, done, err := decodeWalk(b, c)
	if err != nil {
		return
	}
	w.pages, w.rows, w.dictPages, w.done = pages, rows, dictPages, done
	if len(pages) > 0 {
		last := pages[len(pages)-1]
		w.next = last.offset + last.size
	}
}

func decodeWalk(b []byte, c walkChunk) (pages []pageLoc, rows int64, dictPages int, done bool, err error) {
	if len(b) < 5 || b[0] != walkVersion || binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.ChecksumIEEE(b[:len(b)-4]) {
		return nil, 0, 0, false, errWalkCache
	}
	b = b[1 : len(b)-4]
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = errWalkCache
			return 0
		}
		b = b[n:]
		return v
	}
	done = next() == 1
	n := next()
	dict := next()
	if err != nil || n > uint64(len(b))/2 || dict > n {
		return nil, 0, 0, false, errWalkCache
	}
	dictPages = int(dict)
	at := c.dataOffset
	var last int64
	for range n {
		u, delta := next(), next()
		size, r := int64(u), last+(int64(delta>>1)^-int64(delta&1))
		if err != nil || u > math.MaxInt64 || size <= 0 || size > c.end-at || r <= 0 || r > c.rows-rows {
			return nil, 0, 0, false, errWalkCache
		}
		pages = append(pages, pageLoc{offset: at, size: size, firstRow: rows})
		rows += r
		at += size
		last = r
	}
	if len(b) != 0 || n == 0 || c.dataOffset < c.start || (done && rows != c.rows) || (!done && rows == c.rows) {
		return nil, 0, 0, false, errWalkCache
	}
	return pages, rows, dictPages, done, nil
}

// withOffsetIndexes returns a copy of md for arrow-go to read with, in
// which the columns of each row group of ixs have the offset index
// locations of ix.virtual, and no other (arrow-go reads a row group's
// offset indexes as one range, from the first column's to the last's).
// The copy shares all else with md; md is left as it is, as reads
// under way use it.
func withOffsetIndexes(md *metadata.FileMetaData, ixs []*rowGroupIndex) *metadata.FileMetaData {
	view := *md
	file := *md.FileMetaData
	file.RowGroups = slices.Clone(file.RowGroups)
	view.FileMetaData = &file
	for _, ix := range ixs {
		g := *file.RowGroups[ix.rg]
		g.Columns = slices.Clone(g.Columns)
		for c := range g.Columns {
			cc := *g.Columns[c]
			cc.OffsetIndexOffset, cc.OffsetIndexLength = nil, nil
			if loc, ok := ix.virtual[c]; ok {
				off, n := loc.Offset, loc.Length
				cc.OffsetIndexOffset, cc.OffsetIndexLength = &off, &n
			}
			g.Columns[c] = &cc
		}
		file.RowGroups[ix.rg] = &g
	}
	return &view
}
