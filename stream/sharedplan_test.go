package stream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream/internal/planner"
)

// readCounter counts the range reads (footers, while planning) of every
// bucket a dataset opens.
type readCounter struct{ reads atomic.Int64 }

func (rc *readCounter) wrap(o *Options) {
	o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		c := storage.NewCounting(b)
		c.OnRead = func(string, int64, int) { rc.reads.Add(1) }
		return c
	}
}

func planStore(t *testing.T) *PlanStore {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return &PlanStore{Bucket: b, Key: "run-1/plan.json"}
}

func TestSharedPlanOneRankReadsFooters(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	var ids []int64
	var fp string
	for rank := range 4 {
		o := checkedOptions(t, dir)
		o.Shuffle, o.Rank, o.WorldSize, o.PlanStore = true, rank, 4, ps
		var rc readCounter
		rc.wrap(&o)
		ds := open(t, o)
		if rank == 0 && rc.reads.Load() < int64(smallSpec.Files) {
			t.Fatalf("rank 0 made %d reads planning %d files", rc.reads.Load(), smallSpec.Files)
		}
		if rank > 0 && rc.reads.Load() != 0 {
			t.Fatalf("rank %d made %d reads planning: the footers should come from the shared plan", rank, rc.reads.Load())
		}
		if rank == 0 {
			fp = ds.Fingerprint()
		} else if ds.Fingerprint() != fp {
			t.Fatalf("rank %d fingerprint %s, rank 0 %s", rank, ds.Fingerprint(), fp)
		}
		got, _ := consume(t, ds, -1)
		ids = append(ids, allIDs(got)...)
	}
	exactlyOnce(t, ids, int64(smallSpec.Files*smallSpec.RowsPerFile))

	// The same rows as without a shared plan: it changes who reads the
	// footers, not the plan.
	o := checkedOptions(t, dir)
	o.Shuffle, o.Rank, o.WorldSize = true, 2, 4
	plain, _ := consume(t, open(t, o), -1)
	o.PlanStore = ps
	shared, _ := consume(t, open(t, o), -1)
	if a, b := allIDs(plain), allIDs(shared); !slices.Equal(a, b) {
		t.Fatal("rank 2 streams other rows with the shared plan")
	}
}

// TestSharedPlanRanksWait starts the other ranks before rank 0: they wait
// for its plan, then read no footer.
func TestSharedPlanRanksWait(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	started := make(chan struct{}, 3)
	for rank := 1; rank < 4; rank++ {
		wg.Go(func() {
			o := checkedOptions(t, dir)
			o.Rank, o.WorldSize, o.PlanStore = rank, 4, ps
			var rc readCounter
			rc.wrap(&o)
			started <- struct{}{}
			ds, err := Open(context.Background(), o)
			if err == nil {
				ds.Close()
			}
			errs[rank] = err
			reads.Add(rc.reads.Load())
		})
	}
	for range 3 {
		<-started
	}
	o := checkedOptions(t, dir)
	o.WorldSize, o.PlanStore = 4, ps
	open(t, o)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if reads.Load() != 0 {
		t.Fatalf("ranks 1 to 3 made %d reads", reads.Load())
	}
}

// TestSharedPlanNoPlanner: with no rank 0 to write it, a rank plans itself
// after Wait and writes the plan.
func TestSharedPlanNoPlanner(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	ps.Wait = 10 * time.Millisecond
	o := checkedOptions(t, dir)
	o.Rank, o.WorldSize, o.PlanStore = 3, 4, ps
	open(t, o)
	if ok, err := ps.Bucket.Exists(context.Background(), ps.Key); err != nil || !ok {
		t.Fatalf("no plan written: %v", err)
	}
}

func TestSharedPlanMismatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string, o *Options)
		want   []string
	}{
		{"file added", func(t *testing.T, dir string, o *Options) {
			copyFile(t, filepath.Join(dir, firstFile(t, dir)), filepath.Join(dir, "zz-added.parquet"))
		}, []string{"zz-added.parquet", "not in the plan"}},
		{"file removed", func(t *testing.T, dir string, o *Options) {
			if err := os.Remove(filepath.Join(dir, firstFile(t, dir))); err != nil {
				t.Fatal(err)
			}
		}, []string{firstFileName, "not found"}},
		{"file changed", func(t *testing.T, dir string, o *Options) {
			other := t.TempDir()
			spec := smallSpec
			spec.Seed++
			spec.RowsPerFile++
			if err := synth.WriteDir(other, spec); err != nil {
				t.Fatal(err)
			}
			name := firstFile(t, dir)
			copyFile(t, filepath.Join(other, name), filepath.Join(dir, name))
		}, []string{firstFileName, "bytes in the plan"}},
		{"columns", func(t *testing.T, dir string, o *Options) { o.Columns = []string{"id"} }, []string{"columns", "label"}},
		{"chunk bytes", func(t *testing.T, dir string, o *Options) { o.ChunkBytes = 4096 }, []string{"ChunkBytes", "4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDataset(t, smallSpec)
			ps := planStore(t)
			o := checkedOptions(t, dir)
			o.WorldSize, o.PlanStore = 2, ps
			open(t, o)
			tc.change(t, dir, &o)
			for _, rank := range []int{0, 1} {
				o.Rank = rank
				ds, err := Open(ctx, o)
				if err == nil {
					ds.Close()
					t.Fatalf("rank %d opened a changed dataset", rank)
				}
				if !errors.Is(err, ErrPlanMismatch) {
					t.Fatalf("rank %d: %v is not ErrPlanMismatch", rank, err)
				}
				for _, w := range append(tc.want, ps.Key) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("rank %d: error %q does not say %q", rank, err, w)
					}
				}
			}
		})
	}
}

const firstFileName = "part-00000.parquet"

func firstFile(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, firstFileName)); err != nil {
		t.Fatal(err)
	}
	return firstFileName
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// listHook runs a function at a bucket's first listing: while the dataset
// is planning, after the plan store was found empty.
type listHook struct {
	storage.Bucket
	once *sync.Once
	fn   func()
}

func (h listHook) List(ctx context.Context, prefix string) ([]storage.Object, error) {
	h.once.Do(h.fn)
	return h.Bucket.List(ctx, prefix)
}

// TestSharedPlanRace has another rank write the plan while this one plans:
// the first write wins, and this rank checks its plan against it.
func TestSharedPlanRace(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	// What the other rank writes: the same plan, or one of other columns.
	same := planStore(t)
	o := checkedOptions(t, dir)
	o.PlanStore = same
	open(t, o)
	good, err := same.Bucket.ReadAll(ctx, same.Key)
	if err != nil {
		t.Fatal(err)
	}
	otherStore := planStore(t)
	o.Columns = []string{"id"}
	o.PlanStore = otherStore
	open(t, o)
	other, err := otherStore.Bucket.ReadAll(ctx, otherStore.Key)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		written []byte
		want    string
	}{{"same plan", good, ""}, {"other plan", other, "columns"}} {
		t.Run(tc.name, func(t *testing.T) {
			ps := planStore(t)
			o := checkedOptions(t, dir)
			o.PlanStore = ps
			var once sync.Once
			o.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
				return listHook{Bucket: b, once: &once, fn: func() {
					if err := ps.Bucket.WriteAll(ctx, ps.Key, tc.written, nil); err != nil {
						t.Error(err)
					}
				}}
			}
			ds, err := Open(ctx, o)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				ds.Close()
				return
			}
			if err == nil {
				ds.Close()
				t.Fatal("a rank whose plan differs from the one written first opened")
			}
			if !errors.Is(err, ErrPlanMismatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrPlanMismatch naming %q", err, tc.want)
			}
			// The first write stands.
			got, _ := ps.Bucket.ReadAll(ctx, ps.Key)
			if string(got) != string(tc.written) {
				t.Fatal("the plan written first was overwritten")
			}
		})
	}
}

func TestSharedPlanCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	for _, raw := range []string{"", "{", `{"version":1}`, `{"version":2,"plan":"x","files":[{}]}`, `{"version":1,"plan":"x","files":[{}],"extra":1}`, `{"version":1,"plan":"x","files":[{}]} {}`} {
		ps := planStore(t)
		if err := ps.Bucket.WriteAll(ctx, ps.Key, []byte(raw), nil); err != nil {
			t.Fatal(err)
		}
		o := checkedOptions(t, dir)
		o.PlanStore = ps
		ds, err := Open(ctx, o)
		if err == nil {
			ds.Close()
			t.Fatalf("plan %q accepted", raw)
		}
		if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), ps.Key) {
			t.Fatalf("plan %q: got %v, want ErrCorrupt naming the key", raw, err)
		}
	}
	// A plan that decodes but is for another dataset is a mismatch, in
	// the layout of version 1 (JSON) as in this build's.
	other := planner.Object{Version: 1, Plan: "abc", Columns: []string{"id", "label"}, ChunkBytes: 1 << 20, ShuffleWindow: 2000, Files: []planner.File{{URL: "file:///elsewhere.parquet"}}}
	v1, _ := json.Marshal(other)
	other.Version = planner.Version
	v2, err := other.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	o := checkedOptions(t, dir)
	for _, bad := range [][]byte{v1, v2} {
		ps := planStore(t)
		if err := ps.Bucket.WriteAll(ctx, ps.Key, bad, nil); err != nil {
			t.Fatal(err)
		}
		o.PlanStore = ps
		if _, err := Open(ctx, o); !errors.Is(err, ErrPlanMismatch) {
			t.Fatalf("got %v, want ErrPlanMismatch", err)
		}
	}
	o.PlanStore = &PlanStore{Key: "x"}
	if _, err := Open(ctx, o); err == nil || !strings.Contains(err.Error(), "Bucket") {
		t.Fatalf("plan store without a bucket: got %v", err)
	}
}

func TestSharedPlanCancelWhileWaiting(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	o := checkedOptions(t, dir)
	o.Rank, o.WorldSize, o.PlanStore = 1, 2, ps
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

// With a PlanStore, the rank that plans walks the page headers of the row
// groups (without a page index) that the epoch's split boundaries cut, and
// the walks travel in the plan: no other rank reads a page header, where
// without the store every rank walks the row groups it cuts itself.
func TestSharedPlanWalksOnce(t *testing.T) {
	spec := synth.Spec{Files: 2, RowsPerFile: 200000, RowGroupRows: 100000, Seed: 5, SmallPages: true}
	dir := writeDataset(t, spec)
	// Header reads are a header's bytes and a little more; the pages are
	// 8 KiB or more, and the footers are read while planning.
	headerReads := func(l *readLog) (n int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range l.reads {
			if r.n < 1024 {
				n++
			}
		}
		return n
	}
	const world = 4
	for _, shared := range []bool{false, true} {
		ps := planStore(t)
		var ids []int64
		walked := 0 // header reads of the ranks past 0, and of rank 0 after Open
		for rank := range world {
			log := &readLog{}
			o := checkedOptions(t, dir)
			o.Columns = []string{"id", "x", "s"}
			o.Shuffle, o.Seed, o.NumSplits, o.Rank, o.WorldSize = true, 3, 8, rank, world
			o.Storage.Wrap = log.wrap
			if shared {
				o.PlanStore = ps
			}
			log.start()
			ds := open(t, o)
			if ov := ds.Overlap(); ov.PagedUnits == 0 {
				t.Fatalf("no cut row group is read by pages: %+v", ov)
			}
			if rank == 0 {
				if n := headerReads(log); shared && n == 0 {
					t.Fatal("rank 0 walked no page header while planning for the shared plan")
				}
				log.start()
			}
			bs, _ := consume(t, ds, -1)
			ids = append(ids, allIDs(bs)...)
			walked += headerReads(log)
		}
		exactlyOnce(t, ids, int64(spec.Files*spec.RowsPerFile))
		t.Logf("shared plan %t: %d page headers read past planning", shared, walked)
		switch {
		case shared && walked != 0:
			t.Errorf("with a shared plan the ranks read %d page headers: the plan's walks should serve them", walked)
		case !shared && walked == 0:
			t.Error("without a shared plan no rank walked: the test does not cut a row group without a page index")
		}
	}
}

// A rank planning from a shared plan parses no footer but that of one
// file of each schema while it opens (the plan carries every file's
// units), and then the footers of the files it reads, as it reads them.
func TestSharedPlanParsesOwnFooters(t *testing.T) {
	dir := writeDataset(t, smallSpec) // 8 files of 3,000 rows
	ps := planStore(t)
	const world = 4
	o := checkedOptions(t, dir)
	o.WorldSize, o.NumSplits, o.PlanStore = world, world, ps
	open(t, o) // rank 0 plans
	parsed := func(ds *Dataset) (files []int) {
		for i, f := range ds.Files() {
			if f.Meta != nil {
				files = append(files, i)
			}
		}
		return files
	}
	for rank := 1; rank < world; rank++ {
		o.Rank = rank
		var rc readCounter
		rc.wrap(&o)
		ds := open(t, o)
		if got := parsed(ds); !slices.Equal(got, []int{0}) {
			t.Fatalf("rank %d parsed the footers of files %v opening: want only file 0's (the schema's)", rank, got)
		}
		got, _ := consume(t, ds, -1)
		// Unshuffled, rank r's split is files 2r and 2r+1.
		var want []int64
		for id := int64(2*rank) * 3000; id < int64(2*rank+2)*3000; id++ {
			want = append(want, id)
		}
		if ids := allIDs(got); !slices.Equal(ids, want) {
			t.Fatalf("rank %d: %d rows, not ids [%d, %d) in order", rank, len(ids), want[0], want[len(want)-1]+1)
		}
		if got := parsed(ds); !slices.Equal(got, []int{0, 2 * rank, 2*rank + 1}) {
			t.Fatalf("rank %d parsed the footers of files %v: want 0 and the two it read", rank, got)
		}
		// Its files' 24 row groups, each read once at most, and no footer.
		if n := rc.reads.Load(); n == 0 || n > 24 {
			t.Fatalf("rank %d made %d range reads: want at most one for each of its 24 row groups, and none of a footer", rank, n)
		}
	}
}

// A shared plan whose units were changed is refused: at Open where the
// change shows in the footer digest or the fingerprint, and else by a
// read of the changed file, once its footer is parsed, with
// formats.ErrNotAsKnown, and never with other rows.
func TestSharedPlanTamperedUnits(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	for _, tc := range []struct {
		name   string
		change func(u *formats.Unit)
		atOpen bool
	}{
		{"offset", func(u *formats.Unit) { u.Offset++ }, true},
		{"rows", func(u *formats.Unit) { u.Rows-- }, true},
		{"decoded", func(u *formats.Unit) { u.Decoded++ }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := planStore(t)
			o := checkedOptions(t, dir)
			o.WorldSize, o.NumSplits, o.PlanStore = 4, 4, ps
			open(t, o)
			sp := storedObject(t, ps)
			tc.change(&sp.Files[3].Units[0]) // read by rank 1
			raw, err := sp.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Bucket.WriteAll(ctx, ps.Key, raw, nil); err != nil {
				t.Fatal(err)
			}
			o.Rank = 1
			ds, err := Open(ctx, o)
			if tc.atOpen {
				if !errors.Is(err, ErrPlanMismatch) {
					t.Fatalf("got %v, want ErrPlanMismatch at Open", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			_, err = consumeErr(ds)
			if !errors.Is(err, formats.ErrNotAsKnown) || !strings.Contains(err.Error(), "part-00003") {
				t.Fatalf("got %v, want formats.ErrNotAsKnown naming part-00003", err)
			}
			o.Rank = 2 // reads files 4 and 5, as planned
			got, _ := consume(t, open(t, o), -1)
			if n := len(allIDs(got)); n != 6000 {
				t.Fatalf("rank 2 got %d rows, want 6000", n)
			}
		})
	}
}

// consumeErr reads ds's epoch to its end or its first error.
func consumeErr(ds *Dataset) (rows int64, err error) {
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			return rows, err
		}
		rows += b.NumRows()
		b.Release()
	}
	return rows, nil
}

// A plan object of version 1 (JSON, footers in its cache entries, no
// units), as a job started on an older build left it, is still read: a
// rank plans from its footers, reading none from storage, and streams the
// plan's rows.
func TestSharedPlanVersion1(t *testing.T) {
	ctx := context.Background()
	dir := writeDataset(t, smallSpec)
	ps := planStore(t)
	o := checkedOptions(t, dir)
	o.WorldSize, o.NumSplits, o.PlanStore = 4, 4, ps
	fp := open(t, o).Fingerprint() // rank 0 plans (version 2)
	sp := storedObject(t, ps)
	if sp.Version != 2 || len(sp.Cache) == 0 {
		t.Fatalf("rank 0 wrote version %d with %d cache entries", sp.Version, len(sp.Cache))
	}
	// What version 1 held: no units, no schema links, no options asked.
	sp.Version, sp.Asked = 1, ""
	for i := range sp.Files {
		f := &sp.Files[i]
		f.SchemaOf, f.Inspected, f.Units = "", 0, nil
	}
	v1, err := json.Marshal(&sp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(v1), `{"version":1,`) || !strings.Contains(string(v1), `"cache":[{"k":`) {
		t.Fatalf("not a version 1 object: %.80s", v1)
	}
	old := planStore(t)
	if err := old.Bucket.WriteAll(ctx, old.Key, v1, nil); err != nil {
		t.Fatal(err)
	}
	o.Rank = 1
	want, _ := consume(t, open(t, o), -1)
	o.PlanStore = old
	var rc readCounter
	rc.wrap(&o)
	ds := open(t, o)
	if n := rc.reads.Load(); n != 0 {
		t.Fatalf("rank 1 made %d reads planning from a version 1 plan: its footers are in the plan", n)
	}
	if ds.Fingerprint() != fp {
		t.Fatalf("fingerprint %s from the version 1 plan, %s from version 2", ds.Fingerprint(), fp)
	}
	got, _ := consume(t, ds, -1)
	if a, b := allIDs(got), allIDs(want); len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("rank 1 streams %d rows from the version 1 plan, %d from version 2, or others", len(a), len(b))
	}
}

// storedObject is the plan object in ps, decoded.
func storedObject(t *testing.T, ps *PlanStore) planner.Object {
	t.Helper()
	raw, err := ps.Bucket.ReadAll(context.Background(), ps.Key)
	if err != nil {
		t.Fatal(err)
	}
	var sp planner.Object
	if err := sp.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	return sp
}

// A plan store that cannot be read fails Open with its own error, naming
// the key, not with the cancelled planning that went on beside the read.
func TestSharedPlanStoreUnreadable(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	b := memblob.OpenBucket(nil)
	b.Close() // every call on it fails
	for _, rank := range []int{0, 1} {
		o := checkedOptions(t, dir)
		o.Rank, o.WorldSize, o.PlanStore = rank, 2, &PlanStore{Bucket: b, Key: "run-1/plan"}
		ds, err := Open(context.Background(), o)
		if err == nil {
			ds.Close()
			t.Fatalf("rank %d opened without its plan store", rank)
		}
		if !strings.Contains(err.Error(), `read shared plan "run-1/plan"`) || errors.Is(err, context.Canceled) {
			t.Fatalf("rank %d: got %v, want the plan store's error naming its key", rank, err)
		}
	}
}
