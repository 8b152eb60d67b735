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
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/stream/internal/engine"
)

// A mix interleaves several datasets by weight (permutation.Mix says
// how): mixed split s takes its rows from split s of every source, so the
// sources must have the same NumSplits, and what a mixed split emits is a
// pure function of the seed, the epoch, the weights and the sources' plans
// and order options, whatever the world size. A rank takes its mixed
// splits round-robin, BatchSize rows at a time, as it takes a dataset's.
// The engine reads it (stream/internal/engine, mix.go): each source's
// split through the source's own pipeline, in a lane of its own, and the
// mix's rows cut off the lanes and put together in the mix's order.

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
	// size. Default permutation.MixLargest: long enough for every source to be seen
	// once at its weight (the source with the most rows per unit of weight
	// makes one pass, the others more). permutation.MixSmallest ends the epoch when
	// the first source completes a pass; permutation.MixRows makes it Rows rows.
	Epoch permutation.MixEpoch
	// Rows is the rows of a permutation.MixRows epoch.
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
	// Concurrency is the number of chunks (8,192 rows of a split, or one
	// batch where batches are larger) put together at once out of the
	// runs the sources give them. Default max(1, GOMAXPROCS/4): putting a
	// chunk together costs about an eighth of decoding its rows, and more
	// builders than that only crowd the decoders' caches (on two cores,
	// two builders cost the mix 2-3% more CPU than one).
	Concurrency int
	// Prefetch is the batches put together ahead of the consumer, counted
	// in whole chunks, one at least. Default 2 × Concurrency.
	Prefetch int
}

// Mixed is a mix of datasets with a position. Its methods are safe to call
// from several goroutines, but only one iteration runs at a time.
type Mixed struct {
	sources []MixSource
	o       MixOptions
	mix     *permutation.Mix
	schema  *arrow.Schema
	finger  string
	splits  int
	// eng reads the mix's batches.
	eng *engine.Mix

	mu      sync.Mutex // guards the position and mix (its epoch starts)
	running bool
	epoch   int64
	cursors []int64 // per mixed split: rows delivered this epoch
	next    int
	// ahead holds the rank's mixed splits that are in a later epoch than
	// epoch, by split, as a dataset's aheadCursor does; their cursors are
	// at epoch's end. nil where none is.
	ahead map[int]mixAhead
}

// mixAhead is a mixed split's position in a later epoch than the mix's.
type mixAhead struct {
	epoch, cursor int64
}

// enterEpoch moves the mix to epoch e: the splits ahead holds in e resume
// where they stand, those in later epochs wait at e's end, the others
// start. m.mu is held.
func (m *Mixed) enterEpoch(e int64) {
	m.epoch, m.cursors, m.next = e, make([]int64, m.splits), 0
	for s, a := range m.ahead {
		if a.epoch == e {
			m.cursors[s] = a.cursor
			delete(m.ahead, s)
		} else {
			m.cursors[s] = m.mix.Len(e, s)
		}
	}
	if len(m.ahead) == 0 {
		m.ahead = nil
	}
}

// WithDefaults is o with each field left at zero set to the default Mix
// would give it on the given number of cores (Mix uses GOMAXPROCS); see
// Limits.WithDefaults.
func (o MixOptions) WithDefaults(cores int) MixOptions {
	if o.BatchSize == 0 {
		o.BatchSize = 1024
	}
	if o.WorldSize == 0 {
		o.WorldSize = 1
	}
	if o.Concurrency == 0 {
		o.Concurrency = max(1, cores/4)
	}
	if o.Prefetch == 0 {
		o.Prefetch = 2 * o.Concurrency
	}
	return o
}

// Mix opens a mix of the sources. Sources whose schemas differ, whose
// NumSplits differ, whose counts are not known before reading (text
// files, a filter: split.ErrUnknownRows), or that hold no rows (ErrEmpty:
// no order gives them their weight) are refused.
func Mix(sources []MixSource, o MixOptions) (*Mixed, error) {
	if len(sources) == 0 {
		return nil, errors.New("stream: mix of no sources")
	}
	o = o.WithDefaults(runtime.GOMAXPROCS(0))
	first := sources[0].Dataset
	if first == nil {
		return nil, errors.New("stream: mix source 0 has no dataset")
	}
	n := first.eng.Options().Order.NumSplits
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
	order := permutation.MixOrder{Seed: o.Seed, Epoch: o.Epoch, Rows: o.Rows, Repeat: !o.NoRepeat, NumSplits: n}
	rows := make([][]int64, len(sources))
	h := sha256.New()
	fmt.Fprintf(h, "mix %d %d %d %t %d\n", o.Seed, o.Epoch, o.Rows, o.NoRepeat, n)
	for k, src := range sources {
		d := src.Dataset
		if d == nil {
			return nil, fmt.Errorf("stream: mix source %d has no dataset", k)
		}
		do := d.eng.Options()
		if do.EqualBatches {
			// The mix deals its own batches to its ranks; a source's option
			// would promise an equality it does not keep.
			return nil, fmt.Errorf("stream: mix source %d has Options.EqualBatches, which a mix does not apply: its ranks take the mix's batches, not the source's", k)
		}
		if do.Order.NumSplits != n {
			return nil, fmt.Errorf("stream: mix source %d has NumSplits %d, source 0 has %d: every source needs the same", k, do.Order.NumSplits, n)
		}
		if !sameColumns(d.Schema(), first.Schema()) {
			return nil, fmt.Errorf("stream: mix source %d's schema %v differs from source 0's %v: select the same columns, of the same types", k, d.Schema(), first.Schema())
		}
		if !d.Schema().Equal(first.Schema()) {
			// What the sources' formats say of their columns (Parquet's field
			// ids, ORC's nullable everything) differs, and no one source's
			// says it of the mix: a column is nullable where any source's is.
			m.schema = loosest(m.schema, d.Schema())
		}
		ep, err := d.eng.EpochOf(0)
		if err != nil {
			return nil, fmt.Errorf("stream: mix source %d: %w", k, err)
		}
		rows[k] = make([]int64, n)
		var total int64
		for s, sp := range ep.Splits {
			rows[k][s] = sp.Rows
			total += max(sp.Rows, 0)
		}
		if total == 0 && !slices.Contains(rows[k], -1) { // unknown counts: permutation.NewMix says so
			// No interleaving gives an empty source its share.
			return nil, fmt.Errorf("stream: mix source %d (%s): %w: its weight %v cannot be honoured; leave it out of the mix", k, d.describeURLs(), ErrEmpty, src.Weight)
		}
		order.Weights = append(order.Weights, src.Weight)
		fmt.Fprintf(h, "source %d %s %x\n", k, d.eng.OrderState().Fingerprint, math.Float64bits(src.Weight))
	}
	mix, err := permutation.NewMix(order, rows)
	if err != nil {
		return nil, fmt.Errorf("stream: mix: %w", err)
	}
	m.mix = mix
	m.eng = m.engineMix(rows)
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

// engineMix is what the engine reads the mix by; rows is the rows of a
// pass of each source's splits.
func (m *Mixed) engineMix(rows [][]int64) *engine.Mix {
	em := &engine.Mix{Walk: m.mix, Rows: rows, Schema: m.schema,
		BatchSize: m.o.BatchSize, Rank: m.o.Rank, WorldSize: m.o.WorldSize,
		Concurrency: m.o.Concurrency, Prefetch: m.o.Prefetch, NoRepeat: m.o.NoRepeat, ChunkRows: chunkRows}
	for _, src := range m.sources {
		em.Sources = append(em.Sources, engine.MixSource{Engine: src.Dataset.eng, Weight: src.Weight})
	}
	return em
}

// chunkRows is engine.DefaultChunkRows, a variable for tests.
var chunkRows int64 = engine.DefaultChunkRows

// Batches streams the rest of the current epoch of the mix as Arrow record
// batches, in this rank's order. A batch is valid until the loop body
// returns. When the epoch is exhausted the mix moves to the next one;
// breaking out keeps the position. The first error ends the iteration.
func (m *Mixed) Batches(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		m.mu.Lock()
		if m.running {
			m.mu.Unlock()
			yield(nil, ErrBusy)
			return
		}
		m.running = true
		epoch := m.epoch
		run, err := m.eng.Open(ctx, epoch, slices.Clone(m.cursors), m.next)
		m.mu.Unlock()
		defer func() {
			// The producer has returned (Map waits for it), so the lanes
			// are no one else's now.
			cancel()
			run.Close()
			m.mu.Lock()
			m.running = false
			m.mu.Unlock()
		}()
		if err != nil {
			yield(nil, fmt.Errorf("stream: mix epoch %d: %w", epoch, err))
			return
		}
		// Taking a batch is what moves the position.
		moved := func(s int, to int64, next int) {
			m.mu.Lock()
			m.cursors[s] = to
			m.next = next
			m.mu.Unlock()
		}
		for b, err := range run.Batches(ctx, moved) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(b, nil) {
				return
			}
		}
		m.mu.Lock()
		m.enterEpoch(epoch + 1)
		m.mu.Unlock()
	}
}

// MixState is a mix's position; see checkpoint.MixState. A
// MixCheckpointer saves it in a checkpoint store.
type MixState = checkpoint.MixState

// StateDict returns the mix's position: the rows the consumer has taken.
// Taken after the loop ended, it is at the start of the next epoch; the
// states of all ranks merge whatever each rank's epoch (see
// checkpoint.MergeMix).
func (m *Mixed) StateDict() MixState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := MixState{Version: checkpoint.MixStateVersion, Fingerprint: m.finger, Epoch: m.epoch, NumSplits: m.splits,
		WorldSize: m.o.WorldSize, Rank: m.o.Rank, Cursors: slices.Clone(m.cursors), Next: m.next}
	if m.ahead != nil {
		epochs := make([]int64, m.splits)
		for s := range epochs {
			epochs[s] = m.epoch
		}
		for s, a := range m.ahead {
			epochs[s], st.Cursors[s] = a.epoch, a.cursor
		}
		st.SetEpochs(epochs)
	}
	st.Taken = m.taken(st.SplitEpoch, st.Cursors, split.Owned(m.splits, m.o.Rank, m.o.WorldSize))
	return st
}

// taken is each source's cursor per split at the given position (each
// split in epochOf(split)); m.mu is held.
func (m *Mixed) taken(epochOf func(int) int64, cursors []int64, splits []int) [][]int64 {
	out := make([][]int64, len(m.sources))
	for k := range out {
		out[k] = make([]int64, m.splits)
	}
	for _, s := range splits {
		epoch := epochOf(s)
		counts := m.mix.Counts(epoch, s, cursors[s])
		base := m.mix.Start(epoch, s)
		for k := range out {
			out[k][s] = base[k] + counts[k]
		}
	}
	return out
}

// LoadStateDict moves the mix to a saved position: its own rank's state at
// the same world size, or a merged one (checkpoint.MergeMix) at any world size
// that divides NumSplits. A state of another mix is refused (wrapping
// checkpoint.ErrMismatch). Where the state's splits are in different
// epochs (a merge at an epoch's boundary), the mix is at the state's Epoch,
// the least of the ranks', and each split in a later one resumes when it
// comes, as Dataset.LoadStateDict does.
func (m *Mixed) LoadStateDict(st MixState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		return ErrBusy
	}
	if err := st.Validate(); err != nil {
		return fmt.Errorf("stream: load mix state: %w", err)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("stream: load mix state: %w: field %s: %s", checkpoint.ErrMismatch, field, fmt.Sprintf(format, args...))
	}
	switch {
	case st.Fingerprint != m.finger:
		return bad("fingerprint", "the state is of another mix (sources, weights or options differ)")
	case st.NumSplits != m.splits || len(st.Cursors) != m.splits:
		return bad("cursors", "%d splits, the mix has %d", len(st.Cursors), m.splits)
	case len(st.Taken) != len(m.sources):
		return bad("taken", "%d sources, the mix has %d", len(st.Taken), len(m.sources))
	case st.Rank >= 0 && (st.WorldSize != m.o.WorldSize || st.Rank != m.o.Rank):
		return bad("rank", "the state is rank %d of %d, the mix rank %d of %d; merge all ranks' states (checkpoint.MergeMix) to change world size", st.Rank, st.WorldSize, m.o.Rank, m.o.WorldSize)
	}
	owned := split.Owned(m.splits, m.o.Rank, m.o.WorldSize)
	e := st.Epoch
	for _, s := range owned {
		if c, n := st.Cursors[s], m.mix.Len(st.SplitEpoch(s), s); c < 0 || c > n {
			return bad("cursors", "split %d at %d of its %d rows in epoch %d", s, c, n, st.SplitEpoch(s))
		}
	}
	want := m.taken(st.SplitEpoch, st.Cursors, owned)
	for k := range want {
		for _, s := range owned {
			if st.Taken[k][s] != want[k][s] {
				return bad("taken", "source %d split %d does not match the cursors", k, s)
			}
		}
	}
	cursors := make([]int64, m.splits)
	var ahead map[int]mixAhead
	for _, s := range owned {
		if se := st.SplitEpoch(s); se > e {
			if ahead == nil {
				ahead = map[int]mixAhead{}
			}
			ahead[s] = mixAhead{epoch: se, cursor: st.Cursors[s]}
			cursors[s] = m.mix.Len(e, s)
			continue
		}
		cursors[s] = st.Cursors[s]
	}
	m.epoch, m.cursors, m.next, m.ahead = e, cursors, 0, ahead
	if st.Rank >= 0 {
		m.next = st.Next
	}
	return nil
}

// describeURLs names what d was opened on, for errors: its URLs (the
// first three), else the version its planner gave (an Iceberg table's).
func (d *Dataset) describeURLs() string {
	switch urls := d.opts.URLs; {
	case len(urls) > 3:
		return fmt.Sprintf("%s and %d more", strings.Join(urls[:3], ", "), len(urls)-3)
	case len(urls) > 0:
		return strings.Join(urls, ", ")
	case d.data.Version != "":
		return d.data.Version
	}
	return "planned by Options.Plan"
}

// sameColumns reports whether a and b have the same columns: names and
// types at every depth. Metadata is not compared, nor whether a top-level
// column may hold nulls: a driver keeps what its format says of a column
// (Parquet's field ids, an Iceberg doc, ORC's columns that are all
// nullable), which is no part of a value, so a Parquet, an ORC and an Avro
// source of the same columns mix.
func sameColumns(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// loosest is the schema of a mix of sources of schemas a and b (of the
// same columns): no metadata on it, its fields or their children (a map's
// entries keep theirs: arrow builds no map type that keeps its writer's
// entry names), and a column nullable where either's is.
func loosest(a, b *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, a.NumFields())
	for i, f := range a.Fields() {
		fields[i] = fieldWithoutMetadata(f)
		fields[i].Nullable = f.Nullable || b.Field(i).Nullable
	}
	return arrow.NewSchema(fields, nil)
}

func fieldWithoutMetadata(f arrow.Field) arrow.Field {
	f.Metadata = arrow.Metadata{}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		children := make([]arrow.Field, t.NumFields())
		for i, c := range t.Fields() {
			children[i] = fieldWithoutMetadata(c)
		}
		f.Type = arrow.StructOf(children...)
	case *arrow.ListType:
		f.Type = arrow.ListOfField(fieldWithoutMetadata(t.ElemField()))
	case *arrow.LargeListType:
		f.Type = arrow.LargeListOfField(fieldWithoutMetadata(t.ElemField()))
	case *arrow.FixedSizeListType:
		f.Type = arrow.FixedSizeListOfField(t.Len(), fieldWithoutMetadata(t.ElemField()))
	}
	return f
}
