package stream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/storage"
)

// readLog records every range read made through the buckets it wraps.
type readLog struct {
	mu    sync.Mutex
	on    bool
	reads []rangeRead
}

type rangeRead struct {
	key    string
	off, n int64
}

func (l *readLog) wrap(b storage.Bucket) storage.Bucket {
	c := storage.NewCounting(b)
	c.OnRead = func(key string, off int64, n int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.on {
			l.reads = append(l.reads, rangeRead{key, off, int64(n)})
		}
	}
	return c
}

func (l *readLog) start() {
	l.mu.Lock()
	l.on, l.reads = true, nil
	l.mu.Unlock()
}

func (l *readLog) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.reads {
		n += r.n
	}
	return n
}

// Every selected column chunk is fetched once per epoch across all ranks:
// bytes read over the bytes of the selected column chunks is at most 1.05
// (row groups that two splits share are the only allowance).
func TestIOAmplification(t *testing.T) {
	spec := synth.Spec{Files: 8, RowsPerFile: 19999, RowGroupRows: 500, Seed: 3}
	dir := writeDataset(t, spec)
	for _, shuffle := range []bool{false, true} {
		for _, world := range []int{1, 8} {
			var read, stored int64
			for rank := range world {
				log := &readLog{}
				o := checkedOptions(t, dir)
				o.Columns = []string{"id", "x"}
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 8, world, rank
				o.ShuffleWindow = 8192
				o.Storage.Wrap = log.wrap
				ds := open(t, o)
				if rank == 0 {
					for _, f := range ds.Files() {
						for _, u := range f.Units {
							stored += u.Bytes
						}
					}
				}
				log.start()
				consume(t, ds, -1)
				read += log.bytes()
			}
			amp := float64(read) / float64(stored)
			t.Logf("shuffle=%t world=%d: read %d bytes of %d stored: io_amplification %.4f", shuffle, world, read, stored, amp)
			if amp > 1.05 || amp < 1 {
				t.Fatalf("shuffle=%t world=%d: io_amplification %.4f, want within [1, 1.05]", shuffle, world, amp)
			}
		}
	}
}

// Small row groups are fetched a run of neighbours per request: unshuffled,
// a window's are adjacent, and so are those of the windows after it;
// shuffled, a window's are scattered, but the windows fetched at the same
// time hold many neighbours (without joining across windows this epoch
// made 299 requests for 320 row groups). Both read every byte once.
func TestRequestsPerWindow(t *testing.T) {
	spec := synth.Spec{Files: 8, RowsPerFile: 20000, RowGroupRows: 500, Seed: 7}
	dir := writeDataset(t, spec)
	for _, shuffle := range []bool{false, true} {
		log := &readLog{}
		o := checkedOptions(t, dir)
		o.Columns = nil // every column: a row group's chunks touch the next row group's
		o.Shuffle, o.ShuffleWindow = shuffle, 8192
		o.Storage.Wrap = log.wrap
		ds := open(t, o)
		var stored, groups int64
		for _, f := range ds.Files() {
			for _, u := range f.Units {
				stored += u.Bytes
				groups++
			}
		}
		log.start()
		consume(t, ds, -1)
		reqs := int64(len(log.reads))
		t.Logf("shuffle=%t: %d requests for %d row groups, %d bytes of %d", shuffle, reqs, groups, log.bytes(), stored)
		if log.bytes() != stored {
			t.Errorf("shuffle=%t: read %d bytes, want the %d stored", shuffle, log.bytes(), stored)
		}
		// Windows hold whole chunks of 500 rows, at least half a window each.
		maxReqs := spec.Rows()/int64(o.ShuffleWindow/2) + int64(spec.Files)
		if shuffle {
			maxReqs = groups * 6 / 10
		}
		if reqs > maxReqs {
			t.Errorf("shuffle=%t: %d requests, want at most %d", shuffle, reqs, maxReqs)
		}
	}
}

// Resuming reads no row group of a window before the cursor's, and costs
// the same wherever in the epoch the state was taken.
func TestResumeReadsNothingBefore(t *testing.T) {
	spec := synth.Spec{Files: 4, RowsPerFile: 8000, RowGroupRows: 500, Seed: 5}
	dir := writeDataset(t, spec)
	// Byte ranges of every row group's column chunks, per file key.
	type rg struct {
		file     string
		idx      int
		from, to int64
	}
	var groups []rg
	for i := range spec.Files {
		path := filepath.Join(dir, synth.FileName(i))
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		for g := range md.NumRowGroups() {
			from, to := int64(math.MaxInt64), int64(0)
			for c := range md.RowGroup(g).NumColumns() {
				cc, err := md.RowGroup(g).ColumnChunk(c)
				if err != nil {
					t.Fatal(err)
				}
				start := cc.DataPageOffset()
				if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
					start = min(start, cc.DictionaryPageOffset())
				}
				from, to = min(from, start), max(to, start+cc.TotalCompressedSize())
			}
			groups = append(groups, rg{strings.TrimPrefix(filepath.ToSlash(path), "/"), g, from, to})
		}
		pf.Close()
	}
	for _, shuffle := range []bool{false, true} {
		o := checkedOptions(t, dir)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 4, 2, 1
		o.ShuffleWindow = 2000
		o.Limits.PrefetchWindows = 1 // read ahead as little as possible: count what resuming needs
		all, _ := consume(t, open(t, o), -1)
		for _, frac := range []float64{0.01, 0.5, 0.99} {
			k := int(frac * float64(len(all)))
			_, st := consume(t, open(t, o), k)
			log := &readLog{}
			oo := o
			oo.Storage.Wrap = log.wrap
			ds := open(t, oo)
			if err := ds.LoadStateDict(st); err != nil {
				t.Fatal(err)
			}
			// Row groups of the windows at or after each cursor may be read.
			allowed := map[string]bool{}
			for s := o.Rank; s < o.NumSplits; s += o.WorldSize {
				sp := ds.eng.Current().Splits[s]
				for _, w := range ds.eng.Current().Windows[s][st.Cursors[s].Window:] {
					for _, p := range sp.Pieces[w.First:w.End] {
						f := ds.Files()[p.Fragment]
						var row int64
						for g, u := range f.Units {
							if row < p.End && row+u.Rows > p.Start {
								allowed[fmt.Sprintf("%s#%d", strings.TrimPrefix(strings.TrimPrefix(f.URL, "file://"), "/"), g)] = true
							}
							row += u.Rows
						}
					}
				}
			}
			log.start()
			consume(t, ds, 1)
			log.mu.Lock()
			for _, r := range log.reads {
				found := false
				for _, g := range groups {
					if g.file == r.key && r.off >= g.from && r.off < g.to {
						found = true
						if !allowed[fmt.Sprintf("%s#%d", g.file, g.idx)] {
							t.Fatalf("shuffle=%t resume at %.0f%%: read row group %d of %s, before the cursor's window", shuffle, frac*100, g.idx, g.file)
						}
					}
				}
				if !found {
					t.Fatalf("read at %d of %s is in no row group", r.off, r.key)
				}
			}
			log.mu.Unlock()
		}
	}
}

// Shuffle quality as a figure: on data sorted by a label of 10 classes, the
// mean total variation distance between each batch's label histogram and the
// global one, for the default window, a full random shuffle and chunk-order
// shuffling alone.
func TestShuffleQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400k rows")
	}
	spec := synth.Spec{Files: 20, RowsPerFile: 20000, RowGroupRows: 1000, SortedLabels: true, StringBytes: 1, Classes: 10}
	dir := writeDataset(t, spec)
	const batch = 1024
	o := checkedOptions(t, dir)
	o.Columns = []string{"id"}
	o.Shuffle, o.ShuffleWindow, o.BatchSize = true, 0, batch // the default window
	ds := open(t, o)
	bs, _ := consume(t, ds, -1)
	labels := func(ids []int64) []int64 {
		out := make([]int64, len(ids))
		for i, id := range ids {
			out[i] = spec.Label(id)
		}
		return out
	}
	var windowed []float64
	for _, b := range bs {
		windowed = append(windowed, tvd(labels(b.ids), spec.Classes))
	}

	all := make([]int64, spec.Rows())
	for i := range all {
		all[i] = int64(i)
	}
	r := rand.New(rand.NewPCG(9, 9))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	var full []float64
	for i := 0; i < len(all); i += batch {
		full = append(full, tvd(labels(all[i:min(i+batch, len(all))]), spec.Classes))
	}

	var seq []int64
	for _, ci := range permutation.ChunkOrder(len(ds.Chunks()), permutation.Order{Shuffle: true, Seed: o.Seed}, 0) {
		c := ds.Chunks()[ci]
		first := int64(c.Fragment) * int64(spec.RowsPerFile)
		for row := c.Start; row < c.End; row++ {
			seq = append(seq, first+row)
		}
	}
	var chunkOnly []float64
	for i := 0; i < len(seq); i += batch {
		chunkOnly = append(chunkOnly, tvd(labels(seq[i:min(i+batch, len(seq))]), spec.Classes))
	}
	mw, mf, mc := mean(windowed), mean(full), mean(chunkOnly)
	t.Logf("mean TVD of batch label histograms vs global (10 sorted classes, batch %d): window %d rows: %.3f; full shuffle: %.3f; chunk order only: %.3f", batch, 65536, mw, mf, mc)
	if !(mf < mw && mw < mc/2) {
		t.Fatalf("shuffle quality out of order: full %.3f < window %.3f < chunk-only/2 %.3f expected", mf, mw, mc/2)
	}
	// A window is cut into chunks of at most ShuffleWindow/256 rows (whole
	// row groups): the default window holds 65 row groups of this data,
	// so each batch draws from 65 places.
	if mw > 0.17 {
		t.Fatalf("windowed shuffle TVD %.3f, want at most 0.17", mw)
	}
	// Larger windows mix more (the documented setting for 0.05: a window
	// of about a thousand row groups, here all 400).
	prev := mw
	for _, w := range []int{262_144, 400_000} {
		o.ShuffleWindow = w
		bs, _ := consume(t, open(t, o), -1)
		var tv []float64
		for _, b := range bs {
			tv = append(tv, tvd(labels(b.ids), spec.Classes))
		}
		m := mean(tv)
		t.Logf("window %d rows: %.3f", w, m)
		if m >= prev {
			t.Fatalf("window %d mixes to %.3f, no better than a smaller one (%.3f)", w, m, prev)
		}
		prev = m
	}
	if prev > 0.05 {
		t.Fatalf("a window of the whole dataset mixes to %.3f, want at most 0.05", prev)
	}
}

func tvd(labels []int64, classes int) float64 {
	h := make([]float64, classes)
	for _, l := range labels {
		h[l]++
	}
	var d float64
	for _, c := range h {
		d += math.Abs(c/float64(len(labels)) - 1/float64(classes))
	}
	return d / 2
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// A plan cache in the checkpoint store lets a restart skip every footer
// read; a changed file misses and is read again.
func TestPlanCache(t *testing.T) {
	spec := synth.Spec{Files: 6, RowsPerFile: 1000, RowGroupRows: 250}
	dir := writeDataset(t, spec)
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	kv, err := store.KV("plans")
	if err != nil {
		t.Fatal(err)
	}
	plan := func() (*Dataset, int64) {
		log := &readLog{}
		log.start()
		o := checkedOptions(t, dir)
		o.PlanCache = kv
		o.Storage.Wrap = log.wrap
		ds := open(t, o)
		return ds, log.bytes()
	}
	cold, coldBytes := plan()
	warm, warmBytes := plan()
	if coldBytes == 0 || warmBytes != 0 {
		t.Fatalf("footer bytes read: cold %d, warm %d; want some, then none", coldBytes, warmBytes)
	}
	if cold.Fingerprint() != warm.Fingerprint() {
		t.Fatal("the cached plan differs")
	}
	// Rewrite one file with other contents: its entry no longer matches.
	if err := synth.WriteDir(dir, synth.Spec{Files: 1, RowsPerFile: 1500, RowGroupRows: 500}); err != nil {
		t.Fatal(err)
	}
	changed, changedBytes := plan()
	if changedBytes == 0 || changedBytes >= coldBytes {
		t.Fatalf("after changing one file of 6 the plan read %d footer bytes (cold: %d)", changedBytes, coldBytes)
	}
	if changed.Files()[0].Rows != 1500 {
		t.Fatalf("the changed file plans %d rows, want 1500", changed.Files()[0].Rows)
	}
}

// Row groups far larger than a split's share: every split boundary cuts
// one (here, each of 2 row groups is read by 4 of 8 splits). With a page index each side fetches only its pages, so the bytes of
// an epoch across all ranks stay within 1.05 of the stored bytes at any
// world size; without one each side fetches the whole row group, and
// Overlap and the refetch metric say how much that costs.
func TestIOAmplificationCutRowGroups(t *testing.T) {
	for _, paged := range []bool{true, false} {
		spec := synth.Spec{Files: 2, RowsPerFile: 100000, RowGroupRows: 100000, Seed: 5, PageIndex: paged}
		dir := writeDataset(t, spec)
		for _, world := range sample.Spread([]int{1, 2, 4, 8}, 2) {
			var read, stored, refetch, want int64
			var ids []int64
			for rank := range world {
				log := &readLog{}
				o := checkedOptions(t, dir)
				o.Columns = []string{"id", "x", "s"}
				o.NumSplits, o.WorldSize, o.Rank = 8, world, rank
				// A window larger than the row groups: they are cut at
				// split boundaries only (TestCutRowGroups has them cut to
				// windows smaller than they are).
				o.Shuffle, o.ShuffleWindow = true, 1<<17
				o.Storage.Wrap = log.wrap
				ds := open(t, o)
				ov := ds.Overlap()
				if rank == 0 {
					for _, f := range ds.Files() {
						for _, u := range f.Units {
							stored += u.Bytes
						}
					}
					if ov.CutUnits != 2 || (ov.PagedUnits == 2) != paged || (ov.Bytes == 0) != paged {
						t.Fatalf("paged=%t: overlap %+v", paged, ov)
					}
					want = ov.Bytes
				}
				refetch += ds.Metrics().Snapshot().RefetchBytes
				log.start()
				bs, _ := consume(t, ds, -1)
				ids = append(ids, allIDs(bs)...)
				read += log.bytes()
			}
			exactlyOnce(t, ids, int64(spec.Files*spec.RowsPerFile))
			amp := float64(read) / float64(stored)
			t.Logf("page index %t, world %d: read %d of %d stored bytes: io_amplification %.4f, refetch metric %d", paged, world, read, stored, amp, refetch)
			if paged && amp > 1.05 {
				t.Errorf("page index, world %d: io_amplification %.4f, want at most 1.05", world, amp)
			}
			if !paged && world > 1 && amp < 2 {
				t.Errorf("no page index, world %d: io_amplification %.4f: each of 8 splits should fetch its row group whole", world, amp)
			}
			if d := refetch - want; d < -int64(world) || d > int64(world) || (!paged && want != stored*3) {
				t.Errorf("world %d: refetch metric %d over the ranks, overlap %d, want 3 extra fetches of the %d stored bytes", world, refetch, want, stored)
			}
		}
	}
}

// A loop that takes a batch and breaks, ten times, then finishes the epoch,
// fetches about what one uninterrupted epoch does: what was read ahead when
// it broke is kept for the next range, and the rows are the same.
func TestBreakKeepsReadAhead(t *testing.T) {
	spec := synth.Spec{Files: 4, RowsPerFile: 50000, RowGroupRows: 2500, Seed: 9}
	dir := writeDataset(t, spec)
	for _, shuffle := range []bool{false, true} {
		run := func(rounds int) ([]int64, int64) {
			log := &readLog{}
			o := checkedOptions(t, dir)
			o.Columns = []string{"id", "x", "s"}
			o.Shuffle, o.NumSplits, o.BatchSize = shuffle, 2, 1024
			o.Storage.Wrap = log.wrap
			ds := open(t, o)
			log.start()
			var ids []int64
			for range rounds {
				bs, _ := consume(t, ds, 1)
				ids = append(ids, allIDs(bs)...)
			}
			bs, _ := consume(t, ds, -1)
			return append(ids, allIDs(bs)...), log.bytes()
		}
		want, whole := run(0)
		got, broken := run(10)
		if !slices.Equal(got, want) {
			t.Fatalf("shuffle=%t: rows after ten breaks differ from an uninterrupted epoch", shuffle)
		}
		ratio := float64(broken) / float64(whole)
		t.Logf("shuffle=%t: ten breaks then the rest fetched %d bytes, one epoch %d: %.3f", shuffle, broken, whole, ratio)
		if ratio > 1.1 {
			t.Errorf("shuffle=%t: ten breaks fetched %.3f times an epoch's bytes, want at most 1.1", shuffle, ratio)
		}
	}
}
