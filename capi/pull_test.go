//go:build cgo

package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck"
)

// valueData writes 6,000 rows of cols (every value a function of its id,
// nulls among them) in row groups of 1,000 rows.
func valueData(t *testing.T, cols []valuecheck.Column) string {
	dir := t.TempDir()
	for i := range 3 {
		if err := valuecheck.WriteParquet(filepath.Join(dir, "part-"+string(rune('a'+i))+".parquet"), cols, int64(i)*2000, 2000, valuecheck.Parquet{RowGroupRows: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitQueued waits until the pull of h holds n batches read ahead.
func waitQueued(t *testing.T, h *handle, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h.mu.Lock()
		p := h.it
		h.mu.Unlock()
		if p != nil {
			p.mu.Lock()
			q := len(p.queue)
			p.mu.Unlock()
			if q >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pull read fewer than %d batches ahead in a minute", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// groupBatches cuts a group into its batches, in order.
func groupBatches(g *batchGroup) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, len(g.rows))
	for i := range g.rows {
		out[i] = g.runs[g.run[i]].NewSlice(g.start[i], g.start[i]+g.rows[i])
	}
	return out
}

// oneByOne is the ids of the epoch of a dataset opened with o, a batch a
// call.
func oneByOne(t *testing.T, o map[string]any) [][]int64 {
	id := openJSON(t, o)
	defer closeHandle(id)
	h, _ := lookup(id)
	return restByOne(t, h)
}

// restByOne is the ids of the rest of h's epoch, a batch a call, every
// value checked.
func restByOne(t *testing.T, h *handle) [][]int64 {
	t.Helper()
	var out [][]int64
	for {
		b, err := h.next(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return out
		}
		ids, err := valuecheck.Batch(b, nil)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids)
	}
}

// TestGroupsJoinWindows: batches read ahead cross several to a call, those
// of one window as one array of their rows (over the window's buffers);
// every value, null and the order are those of batches taken one a call.
// Dictionaries cross batch by batch.
func TestGroupsJoinWindows(t *testing.T) {
	for _, names := range [][]string{
		{"id", "i8", "i32", "u32", "f32", "b", "text", "bin"},
		{"id", "i32", "dict"},
	} {
		dir := valueData(t, valuecheck.Pick(names...))
		for _, shuffle := range []bool{false, true} {
			o := map[string]any{"urls": []string{dir}, "batch_size": 100, "shuffle": shuffle, "seed": 3, "num_splits": 3}
			want := oneByOne(t, o)
			id := openJSON(t, o)
			h, _ := lookup(id)
			var got [][]int64
			joined := 0
			for {
				if len(got) > 0 && len(got) < len(want)-8 {
					waitQueued(t, h, 8) // a caller slower than the reads
				}
				g, err := h.nextGroup(32, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if g == nil {
					break
				}
				for _, r := range g.runs {
					if r.NumRows() > 100 {
						joined++
					}
				}
				for _, b := range groupBatches(g) {
					ids, err := valuecheck.Batch(b, names)
					b.Release()
					if err != nil {
						t.Fatalf("%v shuffle %t: %v", names, shuffle, err)
					}
					got = append(got, ids)
				}
				g.release()
			}
			if err := closeHandle(id); err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%v shuffle %t: %d batches in groups differ from %d taken one a call", names, shuffle, len(got), len(want))
			}
			if dict := slices.Contains(names, "dict"); (joined > 0) == dict {
				t.Fatalf("%v shuffle %t: %d arrays joined several batches", names, shuffle, joined)
			}
		}
	}
}

// rowsAt is the rows a dataset's state counts delivered.
func rowsAt(t *testing.T, b []byte) int64 {
	t.Helper()
	st, err := checkpoint.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range st.Cursors {
		n += c.Rows
	}
	return n
}

// TestReadAheadPosition: the state counts the batches a caller delivered
// (a group less those it holds back), never those read ahead; a stop keeps
// what was read ahead for the next calls, and a state taken inside a
// group resumes exactly there.
func TestReadAheadPosition(t *testing.T) {
	dir := writeData(t)
	o := map[string]any{"urls": []string{dir}, "columns": []string{"id"}, "batch_size": 100, "shuffle": true, "num_splits": 2}
	want := oneByOne(t, o)
	id := openJSON(t, o)
	defer closeHandle(id)
	h, _ := lookup(id)
	var got [][]int64
	take := func(most int) int {
		g, err := h.nextGroup(most, time.Minute)
		if err != nil || g == nil {
			t.Fatal(g, err)
		}
		defer g.release()
		for _, b := range groupBatches(g) {
			ids, err := valuecheck.Batch(b, nil)
			b.Release()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids)
		}
		return len(g.rows)
	}
	take(1)
	waitQueued(t, h, 6)
	k := take(32)
	if k < 6 {
		t.Fatalf("a call took %d batches of 6 read ahead", k)
	}
	var mid []byte
	for u := range k {
		st, err := h.stateAt(u)
		if err != nil {
			t.Fatal(err)
		}
		if n := rowsAt(t, st); n != int64(1+k-u)*100 {
			t.Fatalf("state with %d of %d held back counts %d rows, want %d", u, k, n, (1+k-u)*100)
		}
		if u == 2 {
			mid = st
		}
	}
	if _, err := h.stateAt(k); kindOf(err) != "usage" {
		t.Fatalf("state with more held back than taken: %v", err)
	}
	waitQueued(t, h, 3)
	h.stopIter()
	st, _ := h.stateAt(0)
	if n := rowsAt(t, st); n != int64(1+k)*100 {
		t.Fatalf("after a stop the state counts %d rows, want %d", n, (1+k)*100)
	}
	for {
		g, err := h.nextGroup(32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if g == nil {
			break
		}
		for _, b := range groupBatches(g) {
			ids, _ := valuecheck.Batch(b, nil)
			b.Release()
			got = append(got, ids)
		}
		g.release()
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("with a stop after reading ahead: %d batches, differing from the %d of one a call", len(got), len(want))
	}
	// The state inside the group resumes after its batch, in a new dataset.
	id2 := openJSON(t, o)
	defer closeHandle(id2)
	h2, _ := lookup(id2)
	if err := h2.loadState(mid); err != nil {
		t.Fatal(err)
	}
	rest := restByOne(t, h2)
	if from := 1 + k - 2; !slices.EqualFunc(rest, want[from:], slices.Equal) {
		t.Fatalf("resumed from the state with 2 of %d held back: %d batches, want the %d from batch %d", k, len(rest), len(want)-from, from)
	}
}

// TestTakeGathers: a call that finds fewer batches queued than it asks for
// waits up to gather for more, so that a caller faster than the reads
// takes many batches a call (each call costs it a crossing into Go); it
// goes as soon as the queue holds them, or an end comes, and the first
// call of a pull (an epoch's first batch) does not wait.
func TestTakeGathers(t *testing.T) {
	defer func(g time.Duration) { gather = g }(gather)
	b := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 1)
	defer b.Release()
	newPull := func() *pull {
		return &pull{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), want: 1, first: true}
	}
	put := func(p *pull, n int, every time.Duration) {
		for range n {
			time.Sleep(every)
			p.put(pulled{b: b})
		}
	}
	batches := func(got []pulled) (n int) {
		for _, x := range got {
			if x.b != nil {
				n++
			}
		}
		return n
	}

	gather = time.Minute // longer than any test: a return before it is the queue's doing
	p := newPull()
	p.put(pulled{b: b})
	start := time.Now()
	if got := p.take(32, time.Minute); len(got) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("the first call took %d batches after %v, want the one queued at once", len(got), time.Since(start))
	}
	p.put(pulled{b: b})
	go put(p, 32, time.Millisecond)
	if got := p.take(32, time.Minute); batches(got) != 32 || time.Since(start) > 30*time.Second {
		t.Fatalf("a call took %d batches, want the 32 it asked for as they came", batches(got))
	}
	// An end ends the gather: the batches before it (the one left) go, and
	// it stays for the next call.
	go func() {
		time.Sleep(5 * time.Millisecond)
		p.put(pulled{end: true})
	}()
	if got := p.take(32, time.Minute); batches(got) != 1 || len(got) != 1 {
		t.Fatalf("a call before an end took %d items, want the 1 batch", len(got))
	}
	if got := p.take(32, time.Minute); len(got) != 1 || !got[0].end {
		t.Fatalf("the call after took %v, want the end", got)
	}

	// At the end of the gather a call takes what came.
	gather = 20 * time.Millisecond
	p = newPull()
	p.put(pulled{b: b})
	p.take(32, time.Minute)
	p.put(pulled{b: b})
	start = time.Now()
	if got := p.take(32, time.Minute); batches(got) != 1 || time.Since(start) < gather {
		t.Fatalf("a call took %d batches after %v, want 1 after the gather of %v", batches(got), time.Since(start), gather)
	}
	// Nothing queued: the timeout, not the gather, bounds the wait.
	start = time.Now()
	if got := p.take(32, 40*time.Millisecond); got != nil || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("a call on an empty queue returned %v after %v, want nothing after its timeout", got, time.Since(start))
	}
}

// TestTakeCutsAtWindowEdges: a call that would end inside a window ends at
// the window's edge before it, so that the calls after take whole windows
// (each one array); one that sees the next window begin right after the
// batches it takes goes at once. Where the batches of several splits
// interleave, a call takes them as they come.
func TestTakeCutsAtWindowEdges(t *testing.T) {
	defer func(g time.Duration) { gather = g }(gather)
	window := func(rows int64) arrow.RecordBatch {
		bld := array.NewInt64Builder(memory.DefaultAllocator)
		defer bld.Release()
		for i := range rows {
			bld.Append(i)
		}
		col := bld.NewArray()
		defer col.Release()
		return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, rows)
	}
	a, b := window(40), window(40)
	defer a.Release()
	defer b.Release()
	// at is batch i of window w (10 rows each).
	at := func(w arrow.RecordBatch, i int64) arrow.RecordBatch { return w.NewSlice(i*10, i*10+10) }
	queued := func(xs ...arrow.RecordBatch) *pull {
		p := &pull{ready: make(chan struct{}, 1), room: make(chan struct{}, 1), want: 1}
		for _, x := range xs {
			p.put(pulled{b: x})
		}
		return p
	}
	// take is the window (0 a, 1 b) and first row of each batch a call
	// takes, and whether it went before the gather ended.
	take := func(p *pull, most int) (out [][2]int64, early bool) {
		start := time.Now()
		for _, x := range p.take(most, time.Minute) {
			w := int64(0)
			if x.b.Column(0).Data().Buffers()[1] == b.Column(0).Data().Buffers()[1] {
				w = 1
			}
			out = append(out, [2]int64{w, int64(x.b.Column(0).Data().Offset())})
			x.b.Release()
		}
		return out, time.Since(start) < gather/2
	}

	gather = time.Minute // a call that goes before it does so by the queue
	// The batch after the 4 asked for begins window b: they go at once.
	p := queued(at(a, 0), at(a, 1), at(a, 2), at(a, 3), at(b, 0))
	if got, early := take(p, 4); !early || !slices.Equal(got, [][2]int64{{0, 0}, {0, 10}, {0, 20}, {0, 30}}) {
		t.Fatalf("a call whose batches end a window took %v (at once: %t), want window a at once", got, early)
	}
	// The 3 asked for end inside window b: the call ends at a's edge.
	p = queued(at(a, 2), at(a, 3), at(b, 0), at(b, 1))
	if got, early := take(p, 3); !early || !slices.Equal(got, [][2]int64{{0, 20}, {0, 30}}) {
		t.Fatalf("a call over a window's edge took %v (at once: %t), want the rest of window a", got, early)
	}
	// The next call takes window b whole.
	p.put(pulled{b: at(b, 2)})
	p.put(pulled{b: at(b, 3)})
	p.put(pulled{b: at(a, 0)})
	if got, _ := take(p, 4); !slices.Equal(got, [][2]int64{{1, 0}, {1, 10}, {1, 20}, {1, 30}}) {
		t.Fatalf("the call after took %v, want window b whole", got)
	}

	// At the end of the gather, a call takes the whole windows among what
	// came, and leaves the one begun.
	gather = 20 * time.Millisecond
	p = queued(at(a, 2), at(a, 3), at(b, 0))
	if got, _ := take(p, 32); !slices.Equal(got, [][2]int64{{0, 20}, {0, 30}}) {
		t.Fatalf("a call at the end of its gather took %v, want the rest of window a", got)
	}
	// With no edge among them, it takes them all.
	if got, _ := take(p, 32); !slices.Equal(got, [][2]int64{{1, 0}}) {
		t.Fatalf("a call with one window's batches took %v, want them", got)
	}

	// Interleaved splits: no edge is certain; the call takes all it asked.
	p = queued(at(a, 0), at(b, 0), at(a, 1), at(b, 1), at(a, 2))
	if got, _ := take(p, 4); !slices.Equal(got, [][2]int64{{0, 0}, {1, 0}, {0, 10}, {1, 10}}) {
		t.Fatalf("a call over interleaved windows took %v, want the four asked for", got)
	}
}

// TestFollowsNeedsTheSameFields: slices of one window's buffers join only
// under the same fields; batches cut from a window carry schemas of their
// own (other pointers, other metadata), which do not keep them apart.
func TestFollowsNeedsTheSameFields(t *testing.T) {
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	defer bld.Release()
	for i := range int64(20) {
		bld.Append(i)
	}
	col := bld.NewArray()
	defer col.Release()
	with := func(f arrow.Field, md *arrow.Metadata) arrow.RecordBatch {
		return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{f}, md), []arrow.Array{col}, 20)
	}
	id := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	base := with(id, nil)
	defer base.Release()
	head := base.NewSlice(0, 10)
	defer head.Release()
	for _, c := range []struct {
		name   string
		f      arrow.Field
		md     *arrow.Metadata
		follow bool
	}{
		{"a schema of its own", id, nil, true},
		{"other metadata", id, &md, true},
		{"another name", arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64}, nil, false},
		{"nullability", arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, nil, false},
		{"another type over the same bytes", arrow.Field{Name: "id", Type: arrow.FixedWidthTypes.Timestamp_us}, nil, false},
	} {
		var other arrow.RecordBatch
		if c.f.Type.ID() == arrow.INT64 {
			other = with(c.f, c.md)
		} else {
			d := array.NewData(c.f.Type, 20, col.Data().Buffers(), nil, 0, 0)
			a := array.MakeFromData(d)
			other = array.NewRecordBatch(arrow.NewSchema([]arrow.Field{c.f}, c.md), []arrow.Array{a}, 20)
			a.Release()
			d.Release()
		}
		tail := other.NewSlice(10, 20)
		if got := follows(head, tail); got != c.follow {
			t.Errorf("%s: follows = %t, want %t", c.name, got, c.follow)
		}
		tail.Release()
		other.Release()
	}
}
