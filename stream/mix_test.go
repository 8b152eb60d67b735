package stream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	orcformat "github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// mixRow is a row of a mix: its source (told by the length of its s
// column, which differs between the test's sources) and its id.
type mixRow struct {
	src int
	id  int64
}

// mixSources opens three synth datasets of 3000, 1000 and 500 rows whose
// s columns are 8, 12 and 16 bytes long, shuffled, with numSplits splits.
func mixSources(t *testing.T, numSplits int, weights ...float64) []MixSource {
	t.Helper()
	var out []MixSource
	for k, rows := range []int{3000, 1000, 500} {
		dir := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: rows / 2, RowGroupRows: 125, StringBytes: 8 + 4*k, Seed: uint64(k)})
		o := checkedOptions(t, dir)
		o.Columns = []string{"id", "s"}
		o.Shuffle, o.Seed, o.NumSplits, o.ShuffleWindow = true, uint64(10+k), numSplits, 400
		out = append(out, MixSource{Dataset: open(t, o), Weight: weights[k]})
	}
	return out
}

var mixSizes = []int64{3000, 1000, 500}

// mixRows takes up to limit batches (all if limit < 0) of the mix.
func mixRows(t *testing.T, m *Mixed, limit int) []mixRow {
	t.Helper()
	var out []mixRow
	n := 0
	for b, err := range m.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		ids := b.Column(0).(*array.Int64)
		ss := b.Column(1).(*array.String)
		for i := range int(b.NumRows()) {
			out = append(out, mixRow{src: (len(ss.Value(i)) - 8) / 4, id: ids.Value(i)})
		}
		if n++; n == limit {
			break
		}
	}
	return out
}

func newMix(t *testing.T, src []MixSource, o MixOptions) *Mixed {
	t.Helper()
	m, err := Mix(src, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMixPasses: on one split, each source's rows come pass after pass,
// every row of a pass once, passes running on across epochs, each a new
// shuffle; the epoch (by the largest source) lets every source be seen
// once; the shares follow the weights.
func TestMixPasses(t *testing.T) {
	src := mixSources(t, 1, 0.7, 0.2, 0.1)
	m := newMix(t, src, MixOptions{Seed: 3, BatchSize: 100})
	var all []mixRow
	for e := range 2 {
		rows := mixRows(t, m, -1)
		if want := m.SplitRows(int64(e), 0); int64(len(rows)) != want {
			t.Fatalf("epoch %d: %d rows, the plan says %d", e, len(rows), want)
		}
		got := make([]int64, 3)
		for _, r := range rows {
			got[r.src]++
		}
		for k, n := range got {
			if n < mixSizes[k] {
				t.Errorf("epoch %d: source %d gave %d rows, fewer than its %d", e, k, n, mixSizes[k])
			}
			share := float64(n) / float64(len(rows))
			if w := []float64{0.7, 0.2, 0.1}[k]; share < w-0.01 || share > w+0.01 {
				t.Errorf("epoch %d: source %d is %.3f of the rows, its weight %.1f", e, k, share, w)
			}
		}
		all = append(all, rows...)
	}
	if m.Epoch() != 2 {
		t.Fatalf("after two epochs the mix is at epoch %d", m.Epoch())
	}
	for k, size := range mixSizes {
		var ids []int64
		for _, r := range all {
			if r.src == k {
				ids = append(ids, r.id)
			}
		}
		var prev []int64
		for p := 0; int64(len(ids)) >= int64(p+1)*size; p++ {
			pass := ids[int64(p)*size : int64(p+1)*size]
			exactlyOnce(t, slices.Clone(pass), size)
			if prev != nil && slices.Equal(prev, pass) {
				t.Errorf("source %d: pass %d repeats pass %d's order", k, p, p-1)
			}
			prev = pass
		}
		// The partial pass at the end holds distinct rows.
		rest := ids[int64(len(ids))/size*size:]
		if len(slices.Compact(slices.Sorted(slices.Values(rest)))) != len(rest) {
			t.Errorf("source %d: the last, partial pass repeats a row", k)
		}
	}
}

// TestMixNoRepeat: without repetition, an epoch by the largest source is
// every source's one pass, each row once.
func TestMixNoRepeat(t *testing.T) {
	src := mixSources(t, 2, 0.5, 0.3, 0.2)
	m := newMix(t, src, MixOptions{Seed: 1, BatchSize: 64, NoRepeat: true})
	rows := mixRows(t, m, -1)
	for k, size := range mixSizes {
		var ids []int64
		for _, r := range rows {
			if r.src == k {
				ids = append(ids, r.id)
			}
		}
		exactlyOnce(t, ids, size)
	}
	m = newMix(t, src, MixOptions{Seed: 1, BatchSize: 64, NoRepeat: true, Epoch: permutation.MixRows, Rows: 777})
	if n := len(mixRows(t, m, -1)); n != 777 {
		t.Errorf("a MixRows epoch of 777 rows delivered %d", n)
	}
}

// TestMixResume: a state taken mid-epoch resumes exactly, on the same
// world size and, merged, on another; every world size delivers the same
// rows.
func TestMixResume(t *testing.T) {
	src := mixSources(t, 4, 0.6, 0.3, 0.1)
	o := MixOptions{Seed: 8, BatchSize: 50, StartEpoch: 1}
	whole := mixRows(t, newMix(t, src, o), -1)

	// Same world size: break, save, resume in a new mix.
	m := newMix(t, src, o)
	head := mixRows(t, m, 17)
	st := m.StateDict()
	m2 := newMix(t, src, o)
	if err := m2.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	if got := append(head, mixRows(t, m2, -1)...); !slices.Equal(got, whole) {
		t.Fatalf("resumed at batch 17: %d rows differ from the uninterrupted %d", len(got), len(whole))
	}

	// Two ranks save at a step; the merge resumes on one.
	var before []mixRow
	var states []MixState
	for r := range 2 {
		ro := o
		ro.Rank, ro.WorldSize = r, 2
		mr := newMix(t, src, ro)
		before = append(before, mixRows(t, mr, 5+r)...)
		states = append(states, mr.StateDict())
	}
	merged, err := checkpoint.MergeMix(states...)
	if err != nil {
		t.Fatal(err)
	}
	m1 := newMix(t, src, o)
	if err := m1.LoadStateDict(merged); err != nil {
		t.Fatal(err)
	}
	after := mixRows(t, m1, -1)
	got := slices.SortedFunc(slices.Values(append(before, after...)), cmpMixRow)
	want := slices.SortedFunc(slices.Values(whole), cmpMixRow)
	if !slices.Equal(got, want) {
		t.Fatalf("world size 2, merged and resumed on 1: %d rows, not the %d one rank delivers", len(got), len(want))
	}

	// A state of another mix is refused, naming the field.
	other := newMix(t, src, MixOptions{Seed: 9, BatchSize: 50, StartEpoch: 1})
	if err := other.LoadStateDict(st); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "fingerprint") {
		t.Fatalf("another seed's state: %v", err)
	}
	bad := st
	bad.Taken = [][]int64{{1, 2, 3, 4}}
	if err := newMix(t, src, o).LoadStateDict(bad); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Fatalf("a state whose sources' cursors contradict its own: %v", err)
	}
}

// TestMixChunks: the chunks a mix puts its batches together in do not
// show: with chunks of two batches (so that each split has many, and
// batches of the four splits come from chunks made in turn), a mix
// delivers the rows it delivers with chunks larger than a split, and
// broken off mid-chunk, saved and resumed, goes on where it stopped.
func TestMixChunks(t *testing.T) {
	src := mixSources(t, 4, 0.6, 0.3, 0.1)
	o := MixOptions{Seed: 8, BatchSize: 50, StartEpoch: 1}
	whole := mixRows(t, newMix(t, src, o), -1)
	defer func(n int64) { chunkRows = n }(chunkRows)
	chunkRows = 100
	if got := mixRows(t, newMix(t, src, o), -1); !slices.Equal(got, whole) {
		t.Fatalf("chunks of 100 rows: %d rows differ from the %d of one chunk a split", len(got), len(whole))
	}
	m := newMix(t, src, o)
	head := mixRows(t, m, 13) // 13 batches over 4 splits: mid-chunk
	m2 := newMix(t, src, o)
	if err := m2.LoadStateDict(m.StateDict()); err != nil {
		t.Fatal(err)
	}
	if got := append(head, mixRows(t, m2, -1)...); !slices.Equal(got, whole) {
		t.Fatalf("resumed mid-chunk: %d rows differ from the uninterrupted %d", len(got), len(whole))
	}
}

// TestMixDecodeSlots: a mix's lanes share as many decode slots as its most
// concurrent source has decoders; twelve lanes (three sources, four
// splits) sharing one slot give the rows they give sharing three, and no
// lane waits for a slot for ever.
func TestMixDecodeSlots(t *testing.T) {
	var whole []mixRow
	for _, rc := range []int{1, 3} {
		var src []MixSource
		for k, rows := range []int{3000, 1000, 500} {
			dir := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: rows / 2, RowGroupRows: 125, StringBytes: 8 + 4*k, Seed: uint64(k)})
			o := checkedOptions(t, dir)
			o.Columns = []string{"id", "s"}
			o.Shuffle, o.Seed, o.NumSplits, o.ShuffleWindow = true, uint64(10+k), 4, 400
			o.Limits.ReadConcurrency = max(1, rc-k) // 1, 1, 1 and 3, 2, 1: the most is what counts
			src = append(src, MixSource{Dataset: open(t, o), Weight: []float64{0.5, 0.3, 0.2}[k]})
		}
		m := newMix(t, src, MixOptions{Seed: 3, BatchSize: 64})
		if got := m.decodeSlots(); got != rc {
			t.Fatalf("sources of ReadConcurrency up to %d: %d decode slots", rc, got)
		}
		rows := mixRows(t, m, -1)
		if whole == nil {
			whole = rows
		} else if !slices.Equal(rows, whole) {
			t.Fatalf("with %d slots: %d rows differ from the %d with one", rc, len(rows), len(whole))
		}
	}
}

// TestMixUnshuffled: sources read in storage order give their rows in that
// order, pass after pass; chunks of one source (the larger one's, once the
// smaller has given its one pass) are handed out as the lane's batches.
func TestMixUnshuffled(t *testing.T) {
	src := mixSources(t, 1, 0.9, 0.1, 0)[:2]
	for i, s := range src {
		o := s.Dataset.opts
		o.Shuffle = false
		src[i].Dataset = open(t, o)
	}
	defer func(n int64) { chunkRows = n }(chunkRows)
	chunkRows = 64 // a chunk a batch: the last ones all of source 1
	m := newMix(t, src, MixOptions{Seed: 4, BatchSize: 64, NoRepeat: true})
	next := make([]int64, 2)
	for _, r := range mixRows(t, m, -1) {
		if r.id != next[r.src] {
			t.Fatalf("source %d gave id %d where %d was next", r.src, r.id, next[r.src])
		}
		next[r.src]++
	}
	for k, n := range next {
		if n != mixSizes[k] {
			t.Errorf("source %d gave %d rows of its %d", k, n, mixSizes[k])
		}
	}
}

func cmpMixRow(a, b mixRow) int {
	if a.src != b.src {
		return a.src - b.src
	}
	return int(a.id - b.id)
}

func TestMixRefuses(t *testing.T) {
	src := mixSources(t, 2, 1, 1, 1)
	if _, err := Mix([]MixSource{src[0], {Dataset: src[1].Dataset, Weight: 0}}, MixOptions{}); err == nil || !strings.Contains(err.Error(), "weight") {
		t.Errorf("weight 0: %v", err)
	}
	o := checkedOptions(t, writeDataset(t, smallSpec))
	o.NumSplits = 2
	if _, err := Mix([]MixSource{src[0], {Dataset: open(t, o), Weight: 1}}, MixOptions{}); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("another schema: %v", err)
	}
	o.Columns = []string{"id", "s"}
	o.NumSplits = 3
	if _, err := Mix([]MixSource{src[0], {Dataset: open(t, o), Weight: 1}}, MixOptions{}); err == nil || !strings.Contains(err.Error(), "NumSplits") {
		t.Errorf("another NumSplits: %v", err)
	}
	dir, _ := writeIPC(t, [][]int{{100}})
	ipc := open(t, ipcOptions(t, dir, true))
	if _, err := Mix([]MixSource{{Dataset: ipc, Weight: 1}}, MixOptions{}); !errors.Is(err, split.ErrUnknownRows) {
		t.Errorf("unknown counts: %v", err)
	}
}

// BenchmarkMix mixes three shuffled sources (half, a quarter and a quarter
// of a dataset's files) for one epoch; BenchmarkMixSingle streams the same
// files as one source.
func BenchmarkMix(b *testing.B) {
	spec := synth.Spec{Files: 8, RowsPerFile: 125_000, RowGroupRows: 32_768, Seed: 1}
	dir := writeDataset(b, spec)
	groups := [][]int{{0, 1, 2, 3}, {4, 5}, {6, 7}}
	for b.Loop() {
		var src []MixSource
		for k, g := range groups {
			var urls []string
			for _, f := range g {
				urls = append(urls, dir+"/"+synth.FileName(f))
			}
			ds := open(b, Options{URLs: urls, Shuffle: true, Seed: uint64(42 + k)})
			src = append(src, MixSource{Dataset: ds, Weight: float64(len(g))})
		}
		m, err := Mix(src, MixOptions{Seed: 42})
		if err != nil {
			b.Fatal(err)
		}
		var rows int64
		for batch, err := range m.Batches(context.Background()) {
			if err != nil {
				b.Fatal(err)
			}
			rows += batch.NumRows()
		}
		if rows < spec.Rows() {
			b.Fatalf("%d rows of %d", rows, spec.Rows())
		}
	}
	b.ReportMetric(float64(b.N)*float64(spec.Rows())/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkMixSingle(b *testing.B) {
	spec := synth.Spec{Files: 8, RowsPerFile: 125_000, RowGroupRows: 32_768, Seed: 1}
	dir := writeDataset(b, spec)
	for b.Loop() {
		ds := open(b, Options{URLs: []string{dir}, Shuffle: true, Seed: 42})
		for _, err := range ds.Batches(context.Background()) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)*float64(spec.Rows())/b.Elapsed().Seconds(), "rows/s")
}

// TestMixMatchesPlan: row for row over two epochs (passes running across
// them), what a mixed split delivers is what the plan says: at position i
// the row at the offset permutation.Mix.Locate names of its source's split order
// in the pass it names, as the source's own TakeSplit reads it.
func TestMixMatchesPlan(t *testing.T) {
	ctx := context.Background()
	for _, noRepeat := range []bool{false, true} {
		src := mixSources(t, 2, 0.45, 0.35, 0.2)
		for rank := range 2 {
			m := newMix(t, src, MixOptions{Seed: 5, BatchSize: 37, Rank: rank, WorldSize: 2, NoRepeat: noRepeat})
			for e := range int64(2) {
				rows := mixRows(t, m, -1)
				if int64(len(rows)) != m.SplitRows(e, rank) {
					t.Fatalf("epoch %d split %d: %d rows, the plan says %d", e, rank, len(rows), m.SplitRows(e, rank))
				}
				// The plan's rows, grouped by source and pass for TakeSplit.
				type key struct {
					src  int
					pass int64
				}
				at := map[key][]int{}
				offsets := map[key][]int64{}
				for i := range rows {
					r, err := m.mix.Locate(e, rank, int64(i))
					if err != nil {
						t.Fatal(err)
					}
					k := key{r.Source, r.Pass}
					at[k] = append(at[k], i)
					offsets[k] = append(offsets[k], r.Offset)
				}
				for k, pos := range at {
					b, err := src[k.src].Dataset.TakeSplit(ctx, k.pass, rank, offsets[k])
					if err != nil {
						t.Fatal(err)
					}
					ids := b.Column(0).(*array.Int64)
					for j, i := range pos {
						if want := (mixRow{k.src, ids.Value(j)}); rows[i] != want {
							b.Release()
							t.Fatalf("noRepeat %t epoch %d split %d position %d: row %+v, the plan says %+v (pass %d offset %d)", noRepeat, e, rank, i, rows[i], want, k.pass, offsets[k][j])
						}
					}
					b.Release()
				}
			}
		}
	}
}

// TestMixBreakAndGoOn: breaking out of a mix's loop and ranging again goes
// on where it stopped, lanes and all.
func TestMixBreakAndGoOn(t *testing.T) {
	src := mixSources(t, 2, 0.5, 0.3, 0.2)
	o := MixOptions{Seed: 2, BatchSize: 40}
	whole := mixRows(t, newMix(t, src, o), -1)
	m := newMix(t, src, o)
	var got []mixRow
	for _, n := range []int{1, 4, 9} {
		got = append(got, mixRows(t, m, n)...)
	}
	got = append(got, mixRows(t, m, -1)...)
	if !slices.Equal(got, whole) {
		t.Fatalf("broken off three times: %d rows, not the uninterrupted %d in order", len(got), len(whole))
	}
}

// TestMixSourceError: a source whose file cannot be read ends the mix's
// iteration with an error naming the mix's position, the source and the
// file, and the position stays where the consumer was.
func TestMixSourceError(t *testing.T) {
	src := mixSources(t, 1, 0.5, 0.3, 0.2)
	// Source 1's files shrink after planning: reading a row group fails.
	for _, f := range src[1].Dataset.Files() {
		if err := os.Truncate(strings.TrimPrefix(f.URL, "file://"), 100); err != nil {
			t.Fatal(err)
		}
	}
	m := newMix(t, src, MixOptions{Seed: 2, BatchSize: 40})
	var err error
	n := 0
	for _, e := range m.Batches(context.Background()) {
		if e != nil {
			err = e
			break
		}
		n++
	}
	if err == nil || !strings.Contains(err.Error(), "source 1") {
		t.Fatalf("after %d batches: %v", n, err)
	}
	if !slices.ContainsFunc(src[1].Dataset.Files(), func(f *formats.Fragment) bool { return strings.Contains(err.Error(), f.URL) }) {
		t.Fatalf("the error names none of source 1's files: %v", err)
	}
	if st := m.StateDict(); st.Cursors[0] != int64(n*40) {
		t.Fatalf("after %d batches the state is at %d", n, st.Cursors[0])
	}
}

// A Parquet and an ORC source of the same columns mix, though their
// drivers say different things of the columns (Parquet's field ids): every
// row once, every value its own, every batch under the mix's schema.
func TestMixAcrossFormats(t *testing.T) {
	cols := vc.Pick("id", "i64", "text", "f32")
	pq, orc := t.TempDir(), t.TempDir()
	if err := vc.WriteParquet(filepath.Join(pq, "a.parquet"), cols, 0, 300, vc.Parquet{}); err != nil {
		t.Fatal(err)
	}
	if err := vc.WriteORC(filepath.Join(orc, "b.orc"), cols, 300, 200, orcwrite.Options{}); err != nil {
		t.Fatal(err)
	}
	a := open(t, Options{URLs: []string{pq}, NumSplits: 2})
	b := open(t, Options{URLs: []string{orc}, NumSplits: 2, Formats: []formats.Format{orcformat.Format{}}})
	if a.Schema().Equal(b.Schema()) {
		t.Fatalf("the drivers' schemas are equal with their metadata and nullability; this test needs them to differ:\n%v", a.Schema())
	}
	m, err := Mix([]MixSource{{Dataset: a, Weight: 1}, {Dataset: b, Weight: 1}}, MixOptions{NoRepeat: true, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	once := vc.NewOnce()
	for batch, err := range m.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if !batch.Schema().Equal(m.Schema()) {
			t.Fatalf("a batch's schema %v is not the mix's %v", batch.Schema(), m.Schema())
		}
		ids, err := vc.Batch(batch, []string{"id", "i64", "text", "f32"})
		if err != nil {
			t.Fatal(err)
		}
		once.Add(ids)
	}
	if err := once.Exactly(vc.IDs(500)); err != nil {
		t.Fatal(err)
	}
}
