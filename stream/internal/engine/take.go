package engine

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// Random access: Take returns the rows at given positions of an epoch's
// order as one record batch, the rows Batches delivers there.
// A position is mapped to its row by the plan alone (package split: split,
// window, the window's row order, piece, file row), so no epoch is walked.
// The rows a request needs are read grouped by unit: each row group (or,
// where the file has a page index, each block of takeBlockRows rows of it,
// which fetches only the pages holding them) is fetched and decoded once,
// concurrently, for the dataset's columns only, and kept in a cache bounded
// in bytes (Options.Limits.TakeCacheBytes) with the windows' row orders, so that
// repeated requests neither read nor shuffle again.

// takeBlockRows is the rows of a paged unit read together: about a page of
// a numeric column as writers with a page index cut them, so a position
// costs a page per column.
const takeBlockRows = 1024

// Location is where a position of an epoch's order comes from: the
// fields of stream.Location, which documents them.
type Location struct {
	Position    int64
	Split       int
	SplitOffset int64
	Window      int
	File        int
	URL         string
	Unit        int
	UnitRow     int64
	Row         int64
}

// Take returns, as one record batch in the order asked, the rows at the
// given positions of epoch's order over splits (round-robin where there
// are several, as Batches delivers them to one consumer): the work of
// stream.Dataset.Take and its kin. The caller releases the batch.
func (e *Engine) Take(ctx context.Context, epoch int64, splits []int, positions []int64) (arrow.RecordBatch, error) {
	locs, err := e.Locate(epoch, splits, positions)
	if err != nil {
		return nil, err
	}
	return e.takeLocated(ctx, locs)
}

// OrderRows is the rows of epoch's order over splits, as Take counts
// positions, or an error wrapping split.ErrUnknownRows where that is not
// known before reading.
func (e *Engine) OrderRows(epoch int64, splits []int) (int64, error) {
	ep, err := e.EpochOf(epoch)
	if err != nil {
		return 0, err
	}
	iv, err := e.interleave(ep, splits)
	if err != nil {
		return 0, err
	}
	return iv.Len(), nil
}

// taker is an engine's state for random access: recent epochs' plans and a
// cache of window orders and decoded units, bounded in bytes together.
type taker struct {
	once   sync.Once
	mu     sync.Mutex
	epochs map[int64]*split.Epoch
	recent []int64 // epochs, oldest first
	starts [][]int64
	cache  *lru
	// reading holds the units being read, closed when done, so that
	// concurrent requests read each once.
	reading map[unitKey]chan struct{}
}

func (e *Engine) taker() *taker {
	t := &e.rand
	t.once.Do(func() {
		t.epochs = map[int64]*split.Epoch{}
		t.starts = make([][]int64, len(e.data.Fragments))
		t.cache = newLRU(e.opts.Limits.TakeCacheBytes)
		t.reading = map[unitKey]chan struct{}{}
	})
	return t
}

// EpochOf is epoch n's order, of the few kept for random access (and a
// mix's split sizes), whatever epoch the position is in.
func (e *Engine) EpochOf(n int64) (*split.Epoch, error) {
	if n < 0 {
		return nil, fmt.Errorf("stream: epoch %d must not be negative", n)
	}
	t := e.taker()
	t.mu.Lock()
	defer t.mu.Unlock()
	if ep := t.epochs[n]; ep != nil {
		return ep, nil
	}
	ep, err := split.NewEpoch(e.chunks, e.opts.Order, n)
	if err != nil {
		return nil, fmt.Errorf("stream: epoch %d: %w", n, err)
	}
	if len(t.recent) == 4 {
		delete(t.epochs, t.recent[0])
		t.recent = t.recent[1:]
	}
	t.epochs[n] = ep
	t.recent = append(t.recent, n)
	return ep, nil
}

// interleave is the round-robin order of the given splits of ep.
func (e *Engine) interleave(ep *split.Epoch, splits []int) (*split.Interleave, error) {
	rows := make([]int64, len(splits))
	for i, s := range splits {
		rows[i] = ep.Splits[s].Rows
	}
	iv, err := split.NewInterleave(rows, e.opts.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("stream: epoch %d: %w", ep.Epoch, err)
	}
	return iv, nil
}

// orderKey names a window's row order in the cache.
type orderKey struct {
	epoch int64
	ref   split.WindowRef
}

// windowOrder is window r's row order, computed once and cached.
func (e *Engine) windowOrder(ep *split.Epoch, r split.WindowRef) []int32 {
	t := e.taker()
	k := orderKey{ep.Epoch, r}
	if v, ok := t.cache.get(k, nil); ok {
		return v.([]int32)
	}
	o := ep.WindowOrder(r)
	t.cache.put(k, o, int64(len(o))*4, nil)
	return o
}

// startsKey names a split's window starts in the cache.
type startsKey struct {
	epoch int64
	split int
}

// windowStarts is split s's split.WindowStarts, computed once and cached.
func (e *Engine) windowStarts(ep *split.Epoch, s int) []int64 {
	t := e.taker()
	k := startsKey{ep.Epoch, s}
	if v, ok := t.cache.get(k, nil); ok {
		return v.([]int64)
	}
	st := ep.WindowStarts(s)
	t.cache.put(k, st, int64(len(st))*8, nil)
	return st
}

// unitStarts is the first row of each unit of file f, and its rows.
func (e *Engine) unitStarts(f int) []int64 {
	t := e.taker()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.starts[f] == nil {
		units := e.data.Fragments[f].Units
		st := make([]int64, len(units)+1)
		for i, u := range units {
			st[i+1] = st[i] + max(u.Rows, 0)
		}
		t.starts[f] = st
	}
	return t.starts[f]
}

// Locate maps positions of epoch's order over splits (round-robin where
// there are several) to their rows, without reading any.
func (e *Engine) Locate(epoch int64, splits []int, positions []int64) ([]Location, error) {
	ep, err := e.EpochOf(epoch)
	if err != nil {
		return nil, err
	}
	iv, err := e.interleave(ep, splits)
	if err != nil {
		return nil, err
	}
	// Memos for this call: the positions of a request mostly share windows
	// and files, and the cache's lock and boxing cost per row add up.
	starts := map[int][]int64{}
	orders := map[split.WindowRef][]int32{}
	files := map[int][]int64{}
	out := make([]Location, len(positions))
	for i, pos := range positions {
		l := Location{Position: pos}
		var k int
		var off int64
		if len(splits) == 1 && pos >= 0 && pos < iv.Len() {
			off = pos // one split: its own order, no rounds to search
		} else if k, off, err = iv.Locate(pos); err != nil {
			if len(splits) == 1 {
				return nil, fmt.Errorf("stream: epoch %d split %d: %w", epoch, splits[0], err)
			}
			return nil, fmt.Errorf("stream: epoch %d: %w", epoch, err)
		}
		l.Split, l.SplitOffset = splits[k], off
		ws, ok := starts[l.Split]
		if !ok {
			ws = e.windowStarts(ep, l.Split)
			starts[l.Split] = ws
		}
		ref, off, err := split.SeekWindow(ws, l.Split, l.SplitOffset)
		if err != nil {
			return nil, fmt.Errorf("stream: epoch %d: %w", epoch, err)
		}
		l.Window = ref.Window
		order, ok := orders[ref]
		if !ok {
			order = e.windowOrder(ep, ref)
			orders[ref] = order
		}
		p, row, err := ep.Row(ref, order, off)
		if err != nil {
			return nil, fmt.Errorf("stream: epoch %d: %w", epoch, err)
		}
		l.File = ep.Pieces(ref)[p].Fragment
		l.URL = e.data.Fragments[l.File].URL
		l.Row = row
		st, ok := files[l.File]
		if !ok {
			st = e.unitStarts(l.File)
			files[l.File] = st
		}
		l.Unit = sort.Search(len(st)-1, func(u int) bool { return st[u+1] > row })
		l.UnitRow = row - st[l.Unit]
		out[i] = l
	}
	return out, nil
}

// unitKey names a decoded unit (or, in a paged unit, a block of it).
type unitKey struct {
	file, unit, block int
}

// unitRows is a decoded unit: its rows as record batches.
type unitRows struct {
	start  int64 // the file row of its first row
	recs   []arrow.RecordBatch
	starts []int64
	rows   int64
}

func (u *unitRows) retain() {
	for _, r := range u.recs {
		r.Retain()
	}
}

func (u *unitRows) release() {
	for _, r := range u.recs {
		r.Release()
	}
}

// span is the rows of file f that the unit key k covers.
func (e *Engine) span(k unitKey) (lo, hi int64) {
	st := e.unitStarts(k.file)
	lo, hi = st[k.unit], st[k.unit+1]
	if e.data.Fragments[k.file].Units[k.unit].Paged {
		lo += int64(k.block) * takeBlockRows
		hi = min(hi, lo+takeBlockRows)
	}
	return lo, hi
}

func (e *Engine) keyOf(l Location) unitKey {
	k := unitKey{file: l.File, unit: l.Unit}
	if e.data.Fragments[l.File].Units[l.Unit].Paged {
		k.block = int(l.UnitRow / takeBlockRows)
	}
	return k
}

// takeLocated reads the units the locations need (each once, concurrently,
// those cached not at all) and gathers the rows in the order asked.
func (e *Engine) takeLocated(ctx context.Context, locs []Location) (arrow.RecordBatch, error) {
	gs := newGatherSet()
	defer gs.release()
	idx, err := e.addUnits(ctx, locs, gs)
	if err != nil {
		return nil, err
	}
	return gs.gather(ctx, e.data.Schema, idx, e.opts)
}

// gatherSet is the decoded units of one gather, of one dataset or several
// of one schema (a mix), as one window-like view whose rows are numbered
// across them.
type gatherSet struct {
	w    *window
	base map[gatherKey]int64
}

type gatherKey struct {
	e *Engine
	k unitKey
}

func newGatherSet() *gatherSet {
	w := &window{}
	w.refs.n = 1
	return &gatherSet{w: w, base: map[gatherKey]int64{}}
}

func (gs *gatherSet) release() { gs.w.release() }

// add takes over u's hold, once per key.
func (gs *gatherSet) add(e *Engine, k unitKey, u *unitRows) {
	gk := gatherKey{e, k}
	if _, ok := gs.base[gk]; ok {
		u.release()
		return
	}
	gs.base[gk] = gs.w.rows
	for i, r := range u.recs {
		gs.w.recs = append(gs.w.recs, r) // u's hold becomes the window's
		gs.w.starts = append(gs.w.starts, gs.w.rows+u.starts[i])
	}
	gs.w.rows += u.rows
}

// gather builds the batch of the set's rows at idx.
func (gs *gatherSet) gather(ctx context.Context, schema *arrow.Schema, idx []int32, o Options) (arrow.RecordBatch, error) {
	if len(idx) == 0 || len(gs.w.recs) == 0 {
		return emptyBatch(schema, o), nil
	}
	b, err := gatherWindow(ctx, schema, gs.w, idx, o.Allocator)
	if err != nil {
		return nil, fmt.Errorf("stream: take: %w", err)
	}
	return b, nil
}

// addUnits brings the units the locations need into gs, reading those not
// cached (each once, concurrently: Limits.joinAhead fetches, ReadConcurrency
// decodes), and returns each location's row in gs.
func (e *Engine) addUnits(ctx context.Context, locs []Location, gs *gatherSet) ([]int32, error) {
	// Each row's unit, as an index into the distinct units: one map
	// lookup per row, the rest per unit.
	which := make([]int, len(locs))
	index := map[unitKey]int{}
	var uniq []unitKey
	var missing []unitKey
	for i, l := range locs {
		k := e.keyOf(l)
		j, ok := index[k]
		if !ok {
			j = len(uniq)
			index[k] = j
			uniq = append(uniq, k)
			if _, ok := gs.base[gatherKey{e, k}]; !ok {
				missing = append(missing, k)
			}
		}
		which[i] = j
	}
	// Read in file order, so that neighbours' requests go out together.
	slices.SortFunc(missing, func(a, b unitKey) int {
		if a.file != b.file {
			return a.file - b.file
		}
		if a.unit != b.unit {
			return a.unit - b.unit
		}
		return a.block - b.block
	})
	got := make([]*unitRows, len(missing))
	defer func() {
		for _, u := range got {
			if u != nil {
				u.release()
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.opts.Limits.joinAhead())
	decoders := make(chan struct{}, max(e.opts.Limits.ReadConcurrency, 1))
	for i, k := range missing {
		g.Go(func() error {
			u, err := e.unit(gctx, k, decoders)
			got[i] = u
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, k := range missing {
		gs.add(e, k, got[i])
		got[i] = nil
	}
	if gs.w.rows > math.MaxInt32 {
		return nil, fmt.Errorf("stream: take: the units of %d positions hold %d rows, more than one request can gather; ask for fewer", len(locs), gs.w.rows)
	}
	// A unit's rows start at its base in gs; its first file row is lo.
	shift := make([]int64, len(uniq))
	for j, k := range uniq {
		lo, _ := e.span(k)
		shift[j] = gs.base[gatherKey{e, k}] - lo
	}
	idx := make([]int32, len(locs))
	for i, l := range locs {
		idx[i] = int32(shift[which[i]] + l.Row)
	}
	return idx, nil
}

// unit returns unit k decoded and held for the caller: from the cache, from
// a read in flight for another request, or read now.
func (e *Engine) unit(ctx context.Context, k unitKey, decoders chan struct{}) (*unitRows, error) {
	t := e.taker()
	hold := func(v any) { v.(*unitRows).retain() }
	for {
		if v, ok := t.cache.get(k, hold); ok {
			return v.(*unitRows), nil
		}
		t.mu.Lock()
		f := t.reading[k]
		if f == nil {
			f = make(chan struct{})
			t.reading[k] = f
			t.mu.Unlock()
			break
		}
		t.mu.Unlock()
		select {
		case <-f: // read by another request: look in the cache again
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer func() {
		t.mu.Lock()
		close(t.reading[k])
		delete(t.reading, k)
		t.mu.Unlock()
	}()
	u, err := e.readUnit(ctx, k, decoders)
	if err != nil {
		return nil, err
	}
	u.retain() // the caller's hold; the cache keeps the first
	t.cache.put(k, u, unitBytes(u), func(v any) { v.(*unitRows).release() })
	return u, nil
}

// readUnit fetches and decodes one unit (or block), the decode waiting for
// one of the decoders' slots.
func (e *Engine) readUnit(ctx context.Context, k unitKey, decoders chan struct{}) (*unitRows, error) {
	lo, hi := e.span(k)
	fe, err := e.data.Fetch(ctx, k.file, e.data.RowRange(k.file, lo, hi))
	if err != nil {
		return nil, fmt.Errorf("stream: take: %w", err)
	}
	defer fe.Release() // decoded once, below
	select {
	case decoders <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-decoders }()
	u := &unitRows{start: lo}
	_, err = e.data.Decode(ctx, fe, e.opts.Limits.ReadBatchSize, e.opts.Allocator, func(b arrow.RecordBatch) error {
		u.recs = append(u.recs, b)
		u.starts = append(u.starts, u.rows)
		u.rows += b.NumRows()
		return nil
	})
	if err == nil && u.rows != hi-lo {
		err = fmt.Errorf("read %d rows of %s, the plan has %d: %w", u.rows, e.data.RowRange(k.file, lo, hi), hi-lo, formats.ErrCorrupt)
	}
	if err != nil {
		u.release()
		return nil, fmt.Errorf("stream: take: %s: %w", e.data.Fragments[k.file].URL, err)
	}
	return u, nil
}

func unitBytes(u *unitRows) int64 {
	var n int64
	for _, r := range u.recs {
		n += recordBytes(r)
	}
	return n
}

// lru is a cache bounded in bytes, least recently used out first. A value
// put in it is owned by it: release, if set, runs when it leaves.
type lru struct {
	mu   sync.Mutex
	max  int64
	used int64
	ll   *list.List
	m    map[any]*list.Element
}

type lruEntry struct {
	key     any
	val     any
	bytes   int64
	release func(any)
}

func newLRU(max int64) *lru {
	return &lru{max: max, ll: list.New(), m: map[any]*list.Element{}}
}

// get returns the value of k; hold, if set, runs on it under the cache's
// lock, so that a value is retained before it can be evicted.
func (c *lru) get(k any, hold func(any)) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	v := e.Value.(*lruEntry).val
	if hold != nil {
		hold(v)
	}
	return v, true
}

// put keeps v under k, evicting the least recently used entries beyond the
// bound. A value larger than the bound is released at once; a key already
// held keeps its value and v is released.
func (c *lru) put(k, v any, bytes int64, release func(any)) {
	c.mu.Lock()
	var out []*lruEntry
	defer func() {
		c.mu.Unlock()
		for _, e := range out {
			if e.release != nil {
				e.release(e.val)
			}
		}
	}()
	ne := &lruEntry{key: k, val: v, bytes: bytes, release: release}
	if _, ok := c.m[k]; ok || bytes > c.max {
		out = append(out, ne)
		return
	}
	c.m[k] = c.ll.PushFront(ne)
	c.used += bytes
	for c.used > c.max {
		last := c.ll.Back()
		e := last.Value.(*lruEntry)
		c.ll.Remove(last)
		delete(c.m, e.key)
		c.used -= e.bytes
		out = append(out, e)
	}
}

// drop empties the cache.
func (c *lru) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	var out []*lruEntry
	for e := c.ll.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*lruEntry))
	}
	c.ll.Init()
	c.m = map[any]*list.Element{}
	c.used = 0
	c.mu.Unlock()
	for _, e := range out {
		if e.release != nil {
			e.release(e.val)
		}
	}
}

// emptyBatch is a batch of no rows of the schema.
func emptyBatch(schema *arrow.Schema, o Options) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(o.Allocator, f.Type, 0)
	}
	b := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return b
}
