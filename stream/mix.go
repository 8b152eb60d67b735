package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/prefetch"
)

// A mix interleaves several datasets by weight (package plan, Mix, says
// how): mixed split s takes its rows from split s of every source, so the
// sources must have the same NumSplits, and what a mixed split emits is a
// pure function of the seed, the epoch, the weights and the sources' plans
// and order options, whatever the world size. A rank takes its mixed
// splits round-robin, BatchSize rows at a time, as it takes a dataset's.
//
// A mix reads its sources by random access (Take's machinery): the rows of
// a batch are mapped to their sources' rows by the plan, and the units
// holding them are read once into the sources' take caches, where the
// batches after find them. Each source's cache (Options.TakeCacheBytes)
// should hold a window of each split the rank owns (ShuffleWindow rows of
// the selected columns, a few MiB for a handful of numeric columns), else
// units are read again.

// MixSource is one dataset of a mix.
type MixSource struct {
	// Dataset is the source, opened with its own URLs, format, columns and
	// order options; every source's schema must be the same. Its own
	// position, Rank and WorldSize are not used: the mix has its own.
	Dataset *Dataset
	// Weight is the source's share of the mix, relative to the others'.
	Weight float64
}

// MixOptions configure a mix. The zero value of every field is a documented
// default.
type MixOptions struct {
	// Epoch says how long an epoch of the mix is when sources differ in
	// size. Default plan.MixLargest: long enough for every source to be seen
	// once at its weight (the source with the most rows per unit of weight
	// makes one pass, the others more). plan.MixSmallest ends the epoch when
	// the first source completes a pass; plan.MixRows makes it Rows rows.
	Epoch plan.MixEpoch
	// Rows is the rows of a plan.MixRows epoch.
	Rows int64
	// NoRepeat gives each source at most one pass per epoch (the source's
	// epoch numbered as the mix's): a source that runs out leaves the rest
	// of the epoch to the others, whose shares then grow. Default off: a
	// source that runs out goes on with its next pass, its next epoch (a
	// new shuffle where it shuffles), and passes run on from one epoch of
	// the mix to the next, so proportions hold throughout.
	NoRepeat bool
	// Seed draws the interleaving. Default 0.
	Seed uint64
	// Epoch the mix starts at. Default 0.
	StartEpoch int64
	// BatchSize is the rows of a batch; a batch never mixes splits.
	// Default 1024.
	BatchSize int
	// Rank and WorldSize: rank r takes the mixed splits s with s mod
	// WorldSize == r. Defaults 0 and 1.
	Rank, WorldSize int
	// Concurrency is the number of batches built at once (each reads what
	// its rows need that no cache holds, then gathers them). Default
	// max(2, GOMAXPROCS).
	Concurrency int
	// Prefetch is the batches built ahead of the consumer. Default
	// 2 × Concurrency.
	Prefetch int
	// ReadAhead is how far ahead of the batches being built, in rows of the
	// rank's order, the units (row groups) that rows need start being read
	// into the sources' caches, Concurrency at a time, so that a batch
	// rarely waits for a read. Default 65536 (a default shuffle window);
	// negative: none.
	ReadAhead int
}

// Mixed is a mix of datasets with a position. Its methods are safe to call
// from several goroutines, but only one iteration runs at a time.
type Mixed struct {
	sources []MixSource
	o       MixOptions
	mix     *plan.Mix
	schema  *arrow.Schema
	order   plan.MixOrder
	finger  string
	splits  int

	mu      sync.Mutex // guards the position and mix (its epoch starts)
	running bool
	epoch   int64
	cursors []int64 // per mixed split: rows delivered this epoch
	next    int
}

// Mix opens a mix of the sources. Sources whose schemas differ, whose
// NumSplits differ, or whose counts are not known before reading (text
// files, a filter: plan.ErrUnknownRows) are refused.
func Mix(sources []MixSource, o MixOptions) (*Mixed, error) {
	if len(sources) == 0 {
		return nil, errors.New("stream: mix of no sources")
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1024
	}
	if o.WorldSize == 0 {
		o.WorldSize = 1
	}
	if o.Concurrency == 0 {
		o.Concurrency = max(2, runtime.GOMAXPROCS(0))
	}
	if o.Prefetch == 0 {
		o.Prefetch = 2 * o.Concurrency
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = 65536
	}
	first := sources[0].Dataset
	if first == nil {
		return nil, errors.New("stream: mix source 0 has no dataset")
	}
	n := first.opts.NumSplits
	switch {
	case o.BatchSize < 0 || o.Concurrency < 0 || o.Prefetch < 0:
		return nil, errors.New("stream: mix BatchSize, Concurrency and Prefetch must not be negative")
	case o.WorldSize < 0 || o.Rank < 0 || o.Rank >= o.WorldSize:
		return nil, fmt.Errorf("stream: mix Rank %d is outside WorldSize %d", o.Rank, o.WorldSize)
	case n%o.WorldSize != 0:
		return nil, fmt.Errorf("stream: mix: the sources' NumSplits %d is not a multiple of WorldSize %d", n, o.WorldSize)
	case o.StartEpoch < 0:
		return nil, fmt.Errorf("stream: mix StartEpoch %d must not be negative", o.StartEpoch)
	}
	m := &Mixed{sources: slices.Clone(sources), o: o, schema: first.Schema(), splits: n}
	m.order = plan.MixOrder{Seed: o.Seed, Epoch: o.Epoch, Rows: o.Rows, Repeat: !o.NoRepeat, NumSplits: n}
	rows := make([][]int64, len(sources))
	h := sha256.New()
	fmt.Fprintf(h, "mix %d %d %d %t %d\n", o.Seed, o.Epoch, o.Rows, o.NoRepeat, n)
	for k, src := range sources {
		d := src.Dataset
		if d == nil {
			return nil, fmt.Errorf("stream: mix source %d has no dataset", k)
		}
		if d.opts.NumSplits != n {
			return nil, fmt.Errorf("stream: mix source %d has NumSplits %d, source 0 has %d: every source needs the same", k, d.opts.NumSplits, n)
		}
		if !d.Schema().Equal(m.schema) {
			return nil, fmt.Errorf("stream: mix source %d's schema %v differs from source 0's %v: select the same columns, of the same types", k, d.Schema(), m.schema)
		}
		ep, err := d.takeEpoch(0)
		if err != nil {
			return nil, fmt.Errorf("stream: mix source %d: %w", k, err)
		}
		rows[k] = make([]int64, n)
		for s, sp := range ep.Splits {
			rows[k][s] = sp.Rows
		}
		m.order.Weights = append(m.order.Weights, src.Weight)
		fmt.Fprintf(h, "source %d %s %x\n", k, d.orderState().Fingerprint, math.Float64bits(src.Weight))
	}
	mix, err := plan.NewMix(m.order, rows)
	if err != nil {
		return nil, fmt.Errorf("stream: mix: %w", err)
	}
	m.mix = mix
	m.finger = hex.EncodeToString(h.Sum(nil)[:16])
	m.epoch = o.StartEpoch
	m.cursors = make([]int64, n)
	return m, nil
}

// Schema is the schema of every batch.
func (m *Mixed) Schema() *arrow.Schema { return m.schema }

// Epoch is the epoch the next batch comes from.
func (m *Mixed) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// SplitRows is the rows mixed split s holds in epoch.
func (m *Mixed) SplitRows(epoch int64, split int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mix.Len(epoch, split)
}

// mixBatch is one batch of the mix: positions [from, to) of one mixed
// split, their rows, and where taking it leaves the position.
type mixBatch struct {
	split    int
	from, to int64
	next     int
	groups   []*mixGroup
}

// mixGroup is a batch's rows from one source: where they are in the
// source, and at which rows of the batch they go.
type mixGroup struct {
	src     int
	pass    int64
	offsets []int64 // offsets of the source's split order, ascending
	at      []int
}

// plan makes batch b's groups from its rows: by source and pass.
func (m *Mixed) plan(b *mixBatch, rows []plan.MixRow) {
	for i, r := range rows {
		var g *mixGroup
		for _, x := range b.groups {
			if x.src == r.Source && x.pass == r.Pass {
				g = x
				break
			}
		}
		if g == nil {
			g = &mixGroup{src: r.Source, pass: r.Pass}
			b.groups = append(b.groups, g)
		}
		g.offsets = append(g.offsets, r.Offset)
		g.at = append(g.at, i)
	}
}

// windowUnits is the units (or blocks) holding window r's rows in d.
func (d *Dataset) windowUnits(ep *plan.Epoch, r plan.WindowRef) []unitKey {
	var out []unitKey
	for _, p := range ep.Pieces(r) {
		st := d.unitStarts(p.Fragment)
		for u := sort.Search(len(st)-1, func(u int) bool { return st[u+1] > p.Start }); u < len(st)-1 && st[u] < p.End; u++ {
			if !d.data.Fragments[p.Fragment].Units[u].Paged {
				out = append(out, unitKey{file: p.Fragment, unit: u})
				continue
			}
			lo, hi := max(p.Start, st[u])-st[u], min(p.End, st[u+1])-st[u]
			for blk := lo / takeBlockRows; blk*takeBlockRows < hi; blk++ {
				out = append(out, unitKey{file: p.Fragment, unit: u, block: int(blk)})
			}
		}
	}
	return out
}

// Batches streams the rest of the current epoch of the mix as Arrow record
// batches, in this rank's order. A batch is valid until the loop body
// returns. When the epoch is exhausted the mix moves to the next one;
// breaking out keeps the position. The first error ends the iteration.
func (m *Mixed) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		m.mu.Lock()
		if m.running {
			m.mu.Unlock()
			yield(nil, ErrBusy)
			return
		}
		m.running = true
		epoch, cursors, next := m.epoch, slices.Clone(m.cursors), m.next
		owned := plan.Owned(m.splits, m.o.Rank, m.o.WorldSize)
		lens := make([]int64, m.splits)
		walks := map[int]*plan.MixWalk{}
		var err error
		for _, s := range owned {
			lens[s] = m.mix.Len(epoch, s)
			if walks[s], err = m.mix.Walk(epoch, s, cursors[s]); err != nil {
				break
			}
		}
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			m.running = false
			m.mu.Unlock()
		}()
		if err != nil {
			yield(nil, fmt.Errorf("stream: mix epoch %d: %w", epoch, err))
			return
		}
		// Units read ahead into the sources' caches: goroutines that end
		// with the iteration (cancel runs before the wait).
		var warmers sync.WaitGroup
		defer warmers.Wait()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		warmSlots := make(chan struct{}, m.o.Concurrency)
		// Windows whose units were sent for: a batch's rows of a source are
		// consecutive offsets of its split order, so the windows they touch
		// are found from the first and last.
		type windowKey struct {
			d     *Dataset
			pass  int64
			split int
			w     int
		}
		warmed := map[windowKey]bool{}
		warmUnit := func(d *Dataset, k unitKey) bool {
			select {
			case warmSlots <- struct{}{}:
			case <-ctx.Done():
				return false
			}
			warmers.Add(1)
			go func() {
				defer warmers.Done()
				defer func() { <-warmSlots }()
				// An error here is met again by the batch that needs the
				// unit, which reports it.
				if u, err := d.unit(ctx, k, make(chan struct{}, 1)); err == nil {
					u.release()
				}
			}()
			return true
		}
		warm := func(b *mixBatch) {
			for _, g := range b.groups {
				d := m.sources[g.src].Dataset
				ep, err := d.takeEpoch(g.pass)
				if err != nil {
					continue // the build reports it
				}
				starts := d.windowStarts(ep, b.split)
				first, _, err1 := plan.SeekWindow(starts, b.split, g.offsets[0])
				last, _, err2 := plan.SeekWindow(starts, b.split, g.offsets[len(g.offsets)-1])
				if err1 != nil || err2 != nil {
					continue
				}
				for w := first.Window; w <= last.Window; w++ {
					wk := windowKey{d, g.pass, b.split, w}
					if warmed[wk] {
						continue
					}
					if len(warmed) > 1<<16 {
						clear(warmed)
					}
					warmed[wk] = true
					for _, k := range d.windowUnits(ep, plan.WindowRef{Split: b.split, Window: w}) {
						if !warmUnit(d, k) {
							return
						}
					}
				}
			}
		}

		// The rank's batches, round-robin over its mixed splits. The walks
		// and the locating run here, on one goroutine, in order, ReadAhead
		// rows ahead of what they hand on; the builds run concurrently.
		aheadBatches := 0
		if m.o.ReadAhead > 0 {
			aheadBatches = (m.o.ReadAhead + m.o.BatchSize - 1) / m.o.BatchSize
		}
		plans := func(yield func(*mixBatch, error) bool) {
			at := slices.Clone(cursors)
			nx := next % max(len(owned), 1)
			var rows []plan.MixRow
			// step makes the next batch's plan, or nil at the end.
			step := func() (*mixBatch, error) {
				for range owned {
					s := owned[nx]
					nx = (nx + 1) % len(owned)
					if at[s] >= lens[s] {
						continue
					}
					b := &mixBatch{split: s, from: at[s], to: min(at[s]+int64(m.o.BatchSize), lens[s]), next: nx}
					w := walks[s]
					rows = rows[:0]
					for w.Pos() < b.to {
						r, ok := w.Next()
						if !ok {
							return nil, fmt.Errorf("stream: mix epoch %d split %d: internal error: the walk ended at %d of %d", epoch, s, w.Pos(), lens[s])
						}
						rows = append(rows, r)
					}
					at[s] = b.to
					m.plan(b, rows)
					return b, nil
				}
				return nil, nil
			}
			var queue []*mixBatch
			done := false
			for {
				for !done && len(queue) <= aheadBatches {
					b, err := step()
					if err != nil {
						yield(nil, err)
						return
					}
					if b == nil {
						done = true
						break
					}
					if aheadBatches > 0 {
						warm(b)
					}
					queue = append(queue, b)
				}
				if len(queue) == 0 {
					return
				}
				b := queue[0]
				queue = queue[1:]
				if !yield(b, nil) {
					return
				}
			}
		}
		type builtBatch struct {
			b   *mixBatch
			rec arrow.RecordBatch
		}
		built := prefetch.Map(ctx, plans, prefetch.Stage[*mixBatch, builtBatch]{
			Name:        "mix",
			Concurrency: m.o.Concurrency,
			Ahead:       m.o.Prefetch,
			Fn: func(ctx context.Context, b *mixBatch) (builtBatch, error) {
				out, err := m.build(ctx, b)
				if err != nil {
					return builtBatch{}, fmt.Errorf("stream: mix epoch %d split %d rows [%d, %d): %w", epoch, b.split, b.from, b.to, err)
				}
				return builtBatch{b, out}, nil
			},
			ReleaseOut: func(b builtBatch) { b.rec.Release() },
		})
		for r, err := range built {
			if err != nil {
				var ie *prefetch.ItemError
				for errors.As(err, &ie) {
					err = ie.Err
				}
				yield(nil, err)
				return
			}
			m.mu.Lock()
			m.cursors[r.b.split] = r.b.to
			m.next = r.b.next
			m.mu.Unlock()
			ok := yield(r.rec, nil)
			r.rec.Release()
			if !ok {
				return
			}
		}
		if ctx.Err() != nil {
			yield(nil, ctx.Err())
			return
		}
		m.mu.Lock()
		m.epoch = epoch + 1
		m.cursors = make([]int64, m.splits)
		m.next = 0
		m.mu.Unlock()
	}
}

// build reads and gathers one batch's rows from its sources.
func (m *Mixed) build(ctx context.Context, b *mixBatch) (arrow.RecordBatch, error) {
	gs := newGatherSet()
	defer gs.release()
	var n int
	for _, g := range b.groups {
		n += len(g.at)
	}
	idx := make([]int32, n)
	for _, g := range b.groups {
		d := m.sources[g.src].Dataset
		locs, err := d.locate(g.pass, []int{b.split}, g.offsets)
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", g.src, err)
		}
		got, err := d.addUnits(ctx, locs, gs)
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", g.src, err)
		}
		for j, i := range g.at {
			idx[i] = got[j]
		}
	}
	return gs.gather(ctx, m.schema, idx, m.sources[0].Dataset.opts)
}

// MixState is a mix's position: the rows each mixed split delivered this
// epoch, from which (the interleaving being a pure function) every source's
// cursor follows; they are kept too, as Taken, and checked on load.
type MixState struct {
	Version int `msgpack:"version" json:"version"`
	// Fingerprint hashes the mix's options, weights, and every source's
	// plan and order fingerprint.
	Fingerprint string `msgpack:"fingerprint" json:"fingerprint"`
	Epoch       int64  `msgpack:"epoch" json:"epoch"`
	NumSplits   int    `msgpack:"num_splits" json:"num_splits"`
	// WorldSize and Rank say which mixed splits the state speaks for; a
	// merged state has Rank -1 and speaks for all.
	WorldSize int `msgpack:"world_size" json:"world_size"`
	Rank      int `msgpack:"rank" json:"rank"`
	// Cursors has, per mixed split, the rows delivered this epoch.
	Cursors []int64 `msgpack:"cursors" json:"cursors"`
	// Next is the rank's round-robin position among its mixed splits.
	Next int `msgpack:"next" json:"next"`
	// Taken has, per source and split, the rows of that source's split the
	// mix has taken since its start (across passes, with repetition): the
	// source's cursor, pass Taken/rows and offset Taken%rows.
	Taken [][]int64 `msgpack:"taken" json:"taken"`
}

// mixStateVersion is the MixState layout written here.
const mixStateVersion = 1

// StateDict returns the mix's position: the rows the consumer has taken.
func (m *Mixed) StateDict() MixState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := MixState{Version: mixStateVersion, Fingerprint: m.finger, Epoch: m.epoch, NumSplits: m.splits,
		WorldSize: m.o.WorldSize, Rank: m.o.Rank, Cursors: slices.Clone(m.cursors), Next: m.next}
	st.Taken = m.taken(st.Epoch, st.Cursors, plan.Owned(m.splits, m.o.Rank, m.o.WorldSize))
	return st
}

// taken is each source's cursor per split at the given position; m.mu is
// held.
func (m *Mixed) taken(epoch int64, cursors []int64, splits []int) [][]int64 {
	out := make([][]int64, len(m.sources))
	for k := range out {
		out[k] = make([]int64, m.splits)
	}
	for _, s := range splits {
		counts := m.mix.Counts(epoch, s, cursors[s])
		base := m.mix.Start(epoch, s)
		for k := range out {
			out[k][s] = base[k] + counts[k]
		}
	}
	return out
}

// LoadStateDict moves the mix to a saved position: its own rank's state at
// the same world size, or a merged one (MergeMixStates) at any world size
// that divides NumSplits. A state of another mix is refused (wrapping
// checkpoint.ErrMismatch).
func (m *Mixed) LoadStateDict(st MixState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		return ErrBusy
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("stream: load mix state: %w: field %s: %s", checkpoint.ErrMismatch, field, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Version != mixStateVersion:
		return bad("version", "%d, this code reads %d", st.Version, mixStateVersion)
	case st.Fingerprint != m.finger:
		return bad("fingerprint", "the state is of another mix (sources, weights or options differ)")
	case st.NumSplits != m.splits || len(st.Cursors) != m.splits:
		return bad("cursors", "%d splits, the mix has %d", len(st.Cursors), m.splits)
	case st.Epoch < 0:
		return bad("epoch", "%d is negative", st.Epoch)
	case st.Rank >= 0 && (st.WorldSize != m.o.WorldSize || st.Rank != m.o.Rank):
		return bad("rank", "the state is rank %d of %d, the mix rank %d of %d; merge all ranks' states (MergeMixStates) to change world size", st.Rank, st.WorldSize, m.o.Rank, m.o.WorldSize)
	}
	owned := plan.Owned(m.splits, m.o.Rank, m.o.WorldSize)
	cursors := make([]int64, m.splits)
	for _, s := range owned {
		if c, n := st.Cursors[s], m.mix.Len(st.Epoch, s); c < 0 || c > n {
			return bad("cursors", "split %d at %d of its %d rows", s, c, n)
		}
		cursors[s] = st.Cursors[s]
	}
	if st.Taken != nil {
		want := m.taken(st.Epoch, cursors, owned)
		for k := range want {
			for _, s := range owned {
				if k >= len(st.Taken) || s >= len(st.Taken[k]) || st.Taken[k][s] != want[k][s] {
					return bad("taken", "source %d split %d does not match the cursors", k, s)
				}
			}
		}
	}
	m.epoch, m.cursors, m.next = st.Epoch, cursors, 0
	if st.Rank >= 0 {
		m.next = st.Next
	}
	return nil
}

// MergeMixStates merges the states all ranks of a mix saved at one step
// into one that any world size dividing NumSplits resumes.
func MergeMixStates(states ...MixState) (MixState, error) {
	if len(states) == 0 {
		return MixState{}, errors.New("stream: merge of no mix states")
	}
	first := states[0]
	if first.Rank < 0 {
		if len(states) != 1 {
			return MixState{}, errors.New("stream: merge of a merged mix state with others")
		}
		return first, nil
	}
	world := first.WorldSize
	if world < 1 || len(states) != world {
		return MixState{}, fmt.Errorf("%w: mix merge needs all %d ranks, got %d states", checkpoint.ErrMismatch, world, len(states))
	}
	out := first
	out.Rank, out.Next = -1, 0
	out.Cursors = make([]int64, first.NumSplits)
	out.Taken = make([][]int64, len(first.Taken))
	for k := range out.Taken {
		out.Taken[k] = make([]int64, first.NumSplits)
	}
	seen := make([]bool, world)
	for _, st := range states {
		switch {
		case st.Fingerprint != first.Fingerprint || st.Epoch != first.Epoch || st.WorldSize != world || st.NumSplits != first.NumSplits:
			return MixState{}, fmt.Errorf("%w: mix merge: rank %d's state is of another mix, epoch or world size", checkpoint.ErrMismatch, st.Rank)
		case st.Rank < 0 || st.Rank >= world || seen[st.Rank]:
			return MixState{}, fmt.Errorf("%w: mix merge: rank %d twice or outside world size %d", checkpoint.ErrMismatch, st.Rank, world)
		case len(st.Cursors) != first.NumSplits || len(st.Taken) != len(first.Taken):
			return MixState{}, fmt.Errorf("%w: mix merge: rank %d's state has %d cursors", checkpoint.ErrMismatch, st.Rank, len(st.Cursors))
		}
		seen[st.Rank] = true
		for _, s := range plan.Owned(first.NumSplits, st.Rank, world) {
			out.Cursors[s] = st.Cursors[s]
			for k := range out.Taken {
				if s < len(st.Taken[k]) {
					out.Taken[k][s] = st.Taken[k][s]
				}
			}
		}
	}
	return out, nil
}
