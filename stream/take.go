package stream

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

// Random access: Take and TakeSplit return the rows at given positions of
// an epoch's order as one record batch, the rows Batches delivers there.
// A position is mapped to its row by the plan alone (package split: split,
// window, the window's row order, piece, file row), so no epoch is walked.
// The rows a request needs are read grouped by unit: each row group (or,
// where the file has a page index, each block of takeBlockRows rows of it,
// which fetches only the pages holding them) is fetched and decoded once,
// concurrently, for the dataset's columns only, and kept in a cache bounded
// in bytes (Options.TakeCacheBytes) with the windows' row orders, so that
// repeated requests neither read nor shuffle again.

// takeBlockRows is the rows of a paged unit read together: about a page of
// a numeric column as writers with a page index cut them, so a position
// costs a page per column.
const takeBlockRows = 1024

// Location is where a position of an epoch's order comes from.
type Location struct {
	// Position is the position asked for.
	Position int64 `json:"position"`
	// Split is the split that emits it, and SplitOffset its offset in that
	// split's order.
	Split       int   `json:"split"`
	SplitOffset int64 `json:"split_offset"`
	// Window is the window of the split that emits it.
	Window int `json:"window"`
	// File indexes Files(); URL names it.
	File int    `json:"file"`
	URL  string `json:"url"`
	// Unit is the row group (stripe, ...) of the file holding the row, and
	// UnitRow the row within it.
	Unit    int   `json:"unit"`
	UnitRow int64 `json:"unit_row"`
	// Row is the row of the file. Where the file has a row mask, rows are
	// counted without the masked ones, as planning counts them.
	Row int64 `json:"row"`
}

// Take returns, as one record batch in the order asked, the rows at the
// given positions of epoch's order as one consumer takes it: every split,
// round-robin, BatchSize rows at a time, which is what Batches delivers at
// WorldSize 1 (with NumSplits 1, simply the split's order). The same
// position may be asked more than once. A position outside [0, rows of the
// epoch) is an error naming the range (wrapping split.ErrPosition); a
// dataset whose counts are not known before reading (text files, a filter)
// is refused with split.ErrUnknownRows. The caller releases the batch.
func (d *Dataset) Take(ctx context.Context, epoch int64, positions []int64) (arrow.RecordBatch, error) {
	return d.take(ctx, epoch, d.allSplits(), positions)
}

// TakeSplit is Take over the order of one split: the rows split emits in
// epoch, at the given offsets of its order.
func (d *Dataset) TakeSplit(ctx context.Context, epoch int64, split int, positions []int64) (arrow.RecordBatch, error) {
	if err := d.checkSplit(split); err != nil {
		return nil, err
	}
	return d.take(ctx, epoch, []int{split}, positions)
}

// TakeRank is Take over the order rank of worldSize receives: its splits,
// round-robin, BatchSize rows at a time, as Batches delivers them to that
// rank.
func (d *Dataset) TakeRank(ctx context.Context, epoch int64, rank, worldSize int, positions []int64) (arrow.RecordBatch, error) {
	splits, err := d.rankSplits(rank, worldSize)
	if err != nil {
		return nil, err
	}
	return d.take(ctx, epoch, splits, positions)
}

// Locate says where each position of epoch's order (as Take counts it)
// comes from, without reading any row.
func (d *Dataset) Locate(epoch int64, positions []int64) ([]Location, error) {
	return d.locate(epoch, d.allSplits(), positions)
}

// LocateSplit is Locate over the order of one split.
func (d *Dataset) LocateSplit(epoch int64, split int, positions []int64) ([]Location, error) {
	if err := d.checkSplit(split); err != nil {
		return nil, err
	}
	return d.locate(epoch, []int{split}, positions)
}

// LocateRank is Locate over the order of one rank (see TakeRank).
func (d *Dataset) LocateRank(epoch int64, rank, worldSize int, positions []int64) ([]Location, error) {
	splits, err := d.rankSplits(rank, worldSize)
	if err != nil {
		return nil, err
	}
	return d.locate(epoch, splits, positions)
}

// OrderRows is the rows of epoch's order as Take counts positions (split
// -1: all splits; otherwise one split's), or an error wrapping
// split.ErrUnknownRows where that is not known before reading.
func (d *Dataset) OrderRows(epoch int64, split int) (int64, error) {
	splits := d.allSplits()
	if split >= 0 {
		if err := d.checkSplit(split); err != nil {
			return 0, err
		}
		splits = []int{split}
	}
	ep, err := d.takeEpoch(epoch)
	if err != nil {
		return 0, err
	}
	iv, err := d.interleave(ep, splits)
	if err != nil {
		return 0, err
	}
	return iv.Len(), nil
}

func (d *Dataset) allSplits() []int {
	out := make([]int, d.opts.NumSplits)
	for i := range out {
		out[i] = i
	}
	return out
}

func (d *Dataset) checkSplit(s int) error {
	if s < 0 || s >= d.opts.NumSplits {
		return fmt.Errorf("stream: %w: split %d is not in [0, %d)", split.ErrPosition, s, d.opts.NumSplits)
	}
	return nil
}

func (d *Dataset) rankSplits(rank, worldSize int) ([]int, error) {
	if worldSize < 1 || d.opts.NumSplits%worldSize != 0 || rank < 0 || rank >= worldSize {
		return nil, fmt.Errorf("stream: rank %d of world size %d: the world size must divide NumSplits %d and hold the rank", rank, worldSize, d.opts.NumSplits)
	}
	return split.Owned(d.opts.NumSplits, rank, worldSize), nil
}

func (d *Dataset) take(ctx context.Context, epoch int64, splits []int, positions []int64) (arrow.RecordBatch, error) {
	locs, err := d.locate(epoch, splits, positions)
	if err != nil {
		return nil, err
	}
	return d.takeLocated(ctx, locs)
}

// taker is a dataset's state for random access: recent epochs' plans and a
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

func (d *Dataset) taker() *taker {
	t := &d.rand
	t.once.Do(func() {
		t.epochs = map[int64]*split.Epoch{}
		t.starts = make([][]int64, len(d.data.Fragments))
		t.cache = newLRU(d.opts.TakeCacheBytes)
		t.reading = map[unitKey]chan struct{}{}
	})
	return t
}

// takeEpoch is epoch e's plan, of the few kept.
func (d *Dataset) takeEpoch(e int64) (*split.Epoch, error) {
	if e < 0 {
		return nil, fmt.Errorf("stream: epoch %d must not be negative", e)
	}
	t := d.taker()
	t.mu.Lock()
	defer t.mu.Unlock()
	if ep := t.epochs[e]; ep != nil {
		return ep, nil
	}
	ep, err := split.NewEpoch(d.chunks, d.opts.order(), e)
	if err != nil {
		return nil, fmt.Errorf("stream: epoch %d: %w", e, err)
	}
	if len(t.recent) == 4 {
		delete(t.epochs, t.recent[0])
		t.recent = t.recent[1:]
	}
	t.epochs[e] = ep
	t.recent = append(t.recent, e)
	return ep, nil
}

// interleave is the round-robin order of the given splits of ep.
func (d *Dataset) interleave(ep *split.Epoch, splits []int) (*split.Interleave, error) {
	rows := make([]int64, len(splits))
	for i, s := range splits {
		rows[i] = ep.Splits[s].Rows
	}
	iv, err := split.NewInterleave(rows, d.opts.BatchSize)
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
func (d *Dataset) windowOrder(ep *split.Epoch, r split.WindowRef) []int32 {
	t := d.taker()
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
func (d *Dataset) windowStarts(ep *split.Epoch, s int) []int64 {
	t := d.taker()
	k := startsKey{ep.Epoch, s}
	if v, ok := t.cache.get(k, nil); ok {
		return v.([]int64)
	}
	st := ep.WindowStarts(s)
	t.cache.put(k, st, int64(len(st))*8, nil)
	return st
}

// unitStarts is the first row of each unit of file f, and its rows.
func (d *Dataset) unitStarts(f int) []int64 {
	t := d.taker()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.starts[f] == nil {
		units := d.data.Fragments[f].Units
		st := make([]int64, len(units)+1)
		for i, u := range units {
			st[i+1] = st[i] + max(u.Rows, 0)
		}
		t.starts[f] = st
	}
	return t.starts[f]
}

// locate maps positions of epoch's order over splits (round-robin where
// there are several) to their rows.
func (d *Dataset) locate(epoch int64, splits []int, positions []int64) ([]Location, error) {
	ep, err := d.takeEpoch(epoch)
	if err != nil {
		return nil, err
	}
	iv, err := d.interleave(ep, splits)
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
			ws = d.windowStarts(ep, l.Split)
			starts[l.Split] = ws
		}
		ref, off, err := split.SeekWindow(ws, l.Split, l.SplitOffset)
		if err != nil {
			return nil, fmt.Errorf("stream: epoch %d: %w", epoch, err)
		}
		l.Window = ref.Window
		order, ok := orders[ref]
		if !ok {
			order = d.windowOrder(ep, ref)
			orders[ref] = order
		}
		p, row, err := ep.Row(ref, order, off)
		if err != nil {
			return nil, fmt.Errorf("stream: epoch %d: %w", epoch, err)
		}
		l.File = ep.Pieces(ref)[p].Fragment
		l.URL = d.data.Fragments[l.File].URL
		l.Row = row
		st, ok := files[l.File]
		if !ok {
			st = d.unitStarts(l.File)
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
func (d *Dataset) span(k unitKey) (lo, hi int64) {
	st := d.unitStarts(k.file)
	lo, hi = st[k.unit], st[k.unit+1]
	if d.data.Fragments[k.file].Units[k.unit].Paged {
		lo += int64(k.block) * takeBlockRows
		hi = min(hi, lo+takeBlockRows)
	}
	return lo, hi
}

func (d *Dataset) keyOf(l Location) unitKey {
	k := unitKey{file: l.File, unit: l.Unit}
	if d.data.Fragments[l.File].Units[l.Unit].Paged {
		k.block = int(l.UnitRow / takeBlockRows)
	}
	return k
}

// takeLocated reads the units the locations need (each once, concurrently,
// those cached not at all) and gathers the rows in the order asked.
func (d *Dataset) takeLocated(ctx context.Context, locs []Location) (arrow.RecordBatch, error) {
	gs := newGatherSet()
	defer gs.release()
	idx, err := d.addUnits(ctx, locs, gs)
	if err != nil {
		return nil, err
	}
	return gs.gather(ctx, d.data.Schema, idx, d.opts)
}

// gatherSet is the decoded units of one gather, of one dataset or several
// of one schema (a mix), as one window-like view whose rows are numbered
// across them.
type gatherSet struct {
	w    *window
	base map[gatherKey]int64
}

type gatherKey struct {
	d *Dataset
	k unitKey
}

func newGatherSet() *gatherSet {
	w := &window{}
	w.refs.n = 1
	return &gatherSet{w: w, base: map[gatherKey]int64{}}
}

func (gs *gatherSet) release() { gs.w.release() }

// add takes over u's hold, once per key.
func (gs *gatherSet) add(d *Dataset, k unitKey, u *unitRows) {
	gk := gatherKey{d, k}
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
// cached (each once, concurrently: FetchConcurrency fetches, ReadConcurrency
// decodes), and returns each location's row in gs.
func (d *Dataset) addUnits(ctx context.Context, locs []Location, gs *gatherSet) ([]int32, error) {
	// Each row's unit, as an index into the distinct units: one map
	// lookup per row, the rest per unit.
	which := make([]int, len(locs))
	index := map[unitKey]int{}
	var uniq []unitKey
	var missing []unitKey
	for i, l := range locs {
		k := d.keyOf(l)
		j, ok := index[k]
		if !ok {
			j = len(uniq)
			index[k] = j
			uniq = append(uniq, k)
			if _, ok := gs.base[gatherKey{d, k}]; !ok {
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
	g.SetLimit(max(d.opts.FetchConcurrency, 1))
	decoders := make(chan struct{}, max(d.opts.ReadConcurrency, 1))
	for i, k := range missing {
		g.Go(func() error {
			u, err := d.unit(gctx, k, decoders)
			got[i] = u
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, k := range missing {
		gs.add(d, k, got[i])
		got[i] = nil
	}
	if gs.w.rows > math.MaxInt32 {
		return nil, fmt.Errorf("stream: take: the units of %d positions hold %d rows, more than one request can gather; ask for fewer", len(locs), gs.w.rows)
	}
	// A unit's rows start at its base in gs; its first file row is lo.
	shift := make([]int64, len(uniq))
	for j, k := range uniq {
		lo, _ := d.span(k)
		shift[j] = gs.base[gatherKey{d, k}] - lo
	}
	idx := make([]int32, len(locs))
	for i, l := range locs {
		idx[i] = int32(shift[which[i]] + l.Row)
	}
	return idx, nil
}

// unit returns unit k decoded and held for the caller: from the cache, from
// a read in flight for another request, or read now.
func (d *Dataset) unit(ctx context.Context, k unitKey, decoders chan struct{}) (*unitRows, error) {
	t := d.taker()
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
	u, err := d.readUnit(ctx, k, decoders)
	if err != nil {
		return nil, err
	}
	u.retain() // the caller's hold; the cache keeps the first
	t.cache.put(k, u, unitBytes(u), func(v any) { v.(*unitRows).release() })
	return u, nil
}

// readUnit fetches and decodes one unit (or block), the decode waiting for
// one of the decoders' slots.
func (d *Dataset) readUnit(ctx context.Context, k unitKey, decoders chan struct{}) (*unitRows, error) {
	lo, hi := d.span(k)
	fe, err := d.data.Fetch(ctx, k.file, d.data.RowRange(k.file, lo, hi))
	if err != nil {
		return nil, fmt.Errorf("stream: take: %w", err)
	}
	select {
	case decoders <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-decoders }()
	u := &unitRows{start: lo}
	err = d.data.ReadFetched(ctx, fe, d.opts.ReadBatchSize, d.opts.Allocator, func(b arrow.RecordBatch) error {
		u.recs = append(u.recs, b)
		u.starts = append(u.starts, u.rows)
		u.rows += b.NumRows()
		return nil
	})
	if err == nil && u.rows != hi-lo {
		err = fmt.Errorf("read %d rows of %s, the plan has %d: %w", u.rows, d.data.RowRange(k.file, lo, hi), hi-lo, formats.ErrCorrupt)
	}
	if err != nil {
		u.release()
		return nil, fmt.Errorf("stream: take: %s: %w", d.data.Fragments[k.file].URL, err)
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
