package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/stream"
)

// The tests below run against object-store servers named by bucket URLs in
// the environment (see internal/testkit/scratch). scripts/objectstores.sh starts
// local ones (versitygw, fake-gcs-server, Azurite) and prints the variables;
// .ci/run does that and sets SLUICE_REQUIRE_OBJECTSTORES=1, so that CI fails rather than skips
// when a server is missing. The same variables may name real buckets: the
// tests work under a fresh prefix and delete it afterwards.

// secretEnv lists the variables whose values must never show in an error.
var secretEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING"}

func TestS3(t *testing.T)    { testEndToEnd(t, scratch.S3) }
func TestGCS(t *testing.T)   { testEndToEnd(t, scratch.GCS) }
func TestAzure(t *testing.T) { testEndToEnd(t, scratch.Azure) }

// newScratch returns a fresh prefix in the backend's bucket, deleted when
// the test ends, or skips (fails, when object stores are required) saying
// how to start the server.
func newScratch(tb testing.TB, be scratch.Backend) *scratch.Prefix {
	tb.Helper()
	return scratch.ForTest(tb, be, "sluice-e2e")
}

func writeLocal(tb testing.TB, spec synth.Spec) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := synth.WriteDir(dir, spec); err != nil {
		tb.Fatal(err)
	}
	return "file://" + dir + "/"
}

func checkedAllocator(tb testing.TB) memory.Allocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	tb.Cleanup(func() { mem.AssertSize(tb, 0) })
	return mem
}

// e2eSpec has many row groups per file, so that splits start and end inside
// files and a resumed window is mid-file.
var e2eSpec = synth.Spec{Files: 6, RowsPerFile: 4000, RowGroupRows: 250, Seed: 11}

func e2eOptions(tb testing.TB, url string, rank int) stream.Options {
	return stream.Options{
		URLs:          []string{url},
		Columns:       []string{"id", "label"},
		BatchSize:     100,
		Shuffle:       true,
		Seed:          42,
		ShuffleWindow: 2000,
		NumSplits:     4,
		WorldSize:     2,
		Rank:          rank,
		Allocator:     checkedAllocator(tb),
	}
}

func open(tb testing.TB, o stream.Options) *stream.Dataset {
	tb.Helper()
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ds.Close() })
	return ds
}

// train takes up to n batches (all if n < 0) as training steps numbered
// from+1 on, telling ck (if any) after each, and returns each step's ids.
func train(t *testing.T, ds *stream.Dataset, ck *stream.Checkpointer, from int64, n int) [][]int64 {
	t.Helper()
	ctx := context.Background()
	var steps [][]int64
	step := from
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		step++
		steps = append(steps, slices.Clone(b.Column(0).(*array.Int64).Int64Values()))
		if ck != nil {
			if err := ck.Step(ctx, step); err != nil {
				t.Fatal(err)
			}
		}
		if n > 0 && len(steps) == n {
			break
		}
	}
	return steps
}

// exactlyOnce checks that ids hold every id of [0, n) once.
func exactlyOnce(t *testing.T, ids []int64, n int64) {
	t.Helper()
	once := vc.NewOnce()
	once.Add(ids)
	if err := once.Exactly(vc.IDs(n)); err != nil {
		t.Fatal(err)
	}
}

// testEndToEnd: a shuffled epoch over 4 splits and 2 ranks, read through the
// backend's default URL opener, checkpointed into the same bucket, resumed by
// a new job and finished, equals the same epoch on local files, row for row,
// and delivers every row exactly once.
func testEndToEnd(t *testing.T, be scratch.Backend) {
	sc := newScratch(t, be)
	ctx := context.Background()
	if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", e2eSpec); err != nil {
		t.Fatalf("%s: write dataset: %v", be.Name, err)
	}
	dataURL := sc.URL("data/")
	local := writeLocal(t, e2eSpec)

	var want [2][]int64
	var fingerprint string
	for rank := range 2 {
		ds := open(t, e2eOptions(t, local, rank))
		fingerprint = ds.Fingerprint()
		for _, st := range train(t, ds, nil, 0, -1) {
			want[rank] = append(want[rank], st...)
		}
	}

	// Two ranks train 10 steps, saving every 4, then stop as if the job
	// died: steps 9 and 10 are lost with it.
	const every, ran, saved = 4, 10, 8
	store := openStore(t, sc)
	var before [2][]int64
	for rank := range 2 {
		ds, err := stream.Open(ctx, e2eOptions(t, dataURL, rank))
		if err != nil {
			t.Fatalf("%s: open: %v", be.Name, err)
		}
		if ds.Fingerprint() != fingerprint {
			t.Errorf("%s: rank %d: the plan's fingerprint differs from the same files on local disk", be.Name, rank)
		}
		steps := train(t, ds, stream.NewCheckpointer(ds, store, "job", every), 0, ran)
		if len(steps) != ran {
			t.Fatalf("%s: rank %d took %d steps, want %d", be.Name, rank, len(steps), ran)
		}
		for _, st := range steps[:saved] {
			before[rank] = append(before[rank], st...)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Retention lists and deletes through the backend's delimiter listing.
	if err := store.Retain(ctx, "job", 1); err != nil {
		t.Fatalf("%s: retain: %v", be.Name, err)
	}
	infos, err := store.List(ctx, "job")
	if err != nil {
		t.Fatalf("%s: list checkpoints: %v", be.Name, err)
	}
	if len(infos) != 1 || infos[0].Step != saved || !infos[0].Complete {
		t.Errorf("%s: checkpoints after retention: %+v, want step %d complete only", be.Name, infos, saved)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// A new job, with new datasets and a new store, resumes both ranks from
	// the bucket and finishes the epoch.
	store = openStore(t, sc)
	defer store.Close()
	var all []int64
	for rank := range 2 {
		ds := open(t, e2eOptions(t, dataURL, rank))
		ck := stream.NewCheckpointer(ds, store, "job", every)
		step, err := ck.Resume(ctx)
		if err != nil {
			t.Fatalf("%s: rank %d: resume: %v", be.Name, rank, err)
		}
		if step != saved {
			t.Fatalf("%s: rank %d resumed at step %d, want %d", be.Name, rank, step, saved)
		}
		got := slices.Clone(before[rank])
		for _, st := range train(t, ds, ck, step, -1) {
			got = append(got, st...)
		}
		if !slices.Equal(got, want[rank]) {
			t.Errorf("%s: rank %d: the %d rows of the resumed epoch differ from the same epoch on local disk (%d rows)", be.Name, rank, len(got), len(want[rank]))
		}
		all = append(all, got...)
	}
	exactlyOnce(t, all, e2eSpec.Rows())

	checkMissing(t, be, sc)
}

func openStore(t *testing.T, sc *scratch.Prefix) *checkpoint.BucketStore {
	t.Helper()
	store, err := checkpoint.OpenBucketStore(context.Background(), sc.Bucket, sc.Key+"ckpt")
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// checkMissing: an object missing when the dataset is opened, and one that
// vanishes between planning and reading, give errors that name the object
// and show no credential.
func checkMissing(t *testing.T, be scratch.Backend, sc *scratch.Prefix) {
	ctx := context.Background()
	noSecret := func(what string, err error) {
		t.Helper()
		for _, v := range secretEnv {
			if secret := os.Getenv(v); len(secret) >= 8 && strings.Contains(err.Error(), secret) {
				t.Errorf("%s: %s: the error shows the value of %s: %v", be.Name, what, v, err)
			}
		}
	}

	_, err := stream.Open(ctx, e2eOptions(t, sc.URL("data/no-such-file.parquet"), 0))
	if err == nil {
		t.Fatalf("%s: opening a missing object succeeded", be.Name)
	}
	if !strings.Contains(err.Error(), "no-such-file.parquet") {
		t.Errorf("%s: missing object: the error does not name it: %v", be.Name, err)
	}
	noSecret("missing object", err)

	ds := open(t, e2eOptions(t, sc.URL("data/"), 0))
	gone := synth.FileName(e2eSpec.Files - 1)
	if err := sc.Bucket.Delete(ctx, sc.Key+"data/"+gone); err != nil {
		t.Fatal(err)
	}
	for _, err = range ds.Batches(ctx) {
		if err != nil {
			break
		}
	}
	if err == nil {
		t.Fatalf("%s: reading a dataset with a deleted object succeeded", be.Name)
	}
	if !strings.Contains(err.Error(), gone) {
		t.Errorf("%s: deleted object: the error does not name %s: %v", be.Name, gone, err)
	}
	noSecret("deleted object", err)
}

// TestFigures logs what one epoch costs on each backend next to the same
// files on local disk: bytes read over the stored bytes of the selected
// columns (io_amplification), requests per row group, and rows/s. Only the
// byte figure is asserted: timings on a shared CI machine are for people
// (BenchmarkObjectStore measures throughput on a larger dataset).
func TestFigures(t *testing.T) {
	for _, be := range scratch.Backends {
		t.Run(be.Name, func(t *testing.T) {
			sc := newScratch(t, be)
			spec := synth.Spec{Files: 4, RowsPerFile: 10000, RowGroupRows: 1000, Seed: 5}
			if err := synth.WriteBucket(context.Background(), sc.Bucket, sc.Key+"data/", spec); err != nil {
				t.Fatal(err)
			}
			local := writeLocal(t, spec)
			for _, order := range orders {
				f := measureEpoch(t, local, order.shuffle)
				m := measureEpoch(t, sc.URL("data/"), order.shuffle)
				t.Logf("%s, %s: %s", be.Name, order.name, m)
				t.Logf("local, %s: %s; %s/local rows/s %.2f", order.name, f, be.Name, m.rowsPerSec()/f.rowsPerSec())
				if a := m.amplification(); a > 1.05 || a < 1 {
					t.Errorf("%s, %s: io_amplification %.4f, want within [1, 1.05]", be.Name, order.name, a)
				}
				if m.rows != spec.Rows() {
					t.Errorf("%s, %s: %d rows, want %d", be.Name, order.name, m.rows, spec.Rows())
				}
			}
		})
	}
}

type epochFigures struct {
	rows, rowGroups     int64
	stored              int64 // stored bytes of the selected columns
	planBytes, planReqs int64 // footers, while opening
	readBytes, readReqs int64 // after opening
	seconds             float64
	openSeconds         float64 // of seconds, spent in Open (listing, footers)
}

// add sums two runs' figures.
func (e epochFigures) add(o epochFigures) epochFigures {
	return epochFigures{
		rows: e.rows + o.rows, rowGroups: e.rowGroups + o.rowGroups, stored: e.stored + o.stored,
		planBytes: e.planBytes + o.planBytes, planReqs: e.planReqs + o.planReqs,
		readBytes: e.readBytes + o.readBytes, readReqs: e.readReqs + o.readReqs,
		seconds: e.seconds + o.seconds, openSeconds: e.openSeconds + o.openSeconds,
	}
}

func (e epochFigures) amplification() float64 { return float64(e.readBytes) / float64(e.stored) }
func (e epochFigures) rowsPerSec() float64    { return float64(e.rows) / e.seconds }
func (e epochFigures) reqsPerGroup() float64  { return float64(e.readReqs) / float64(e.rowGroups) }

func (e epochFigures) String() string {
	return fmt.Sprintf("%d rows in %.3fs (%.0f rows/s); footers %d B in %d requests; data %d B in %d requests for %d row groups of %d B: io_amplification %.4f, %.2f requests per row group",
		e.rows, e.seconds, e.rowsPerSec(), e.planBytes, e.planReqs, e.readBytes, e.readReqs, e.rowGroups, e.stored, e.amplification(), e.reqsPerGroup())
}

// orders are the two ways measureEpoch reads: the default options (one
// split, storage order) and shuffled over four splits.
var orders = []struct {
	name    string
	shuffle bool
}{{"default", false}, {"shuffled", true}}

// measureEpoch opens url as the only rank and streams one epoch of every
// column, with default options or shuffled over four splits, timed from
// Open to the last batch.
func measureEpoch(tb testing.TB, url string, shuffle bool) epochFigures {
	tb.Helper()
	start := time.Now()
	o := stream.Options{URLs: []string{url}, Allocator: checkedAllocator(tb)}
	if shuffle {
		o.Shuffle, o.Seed, o.NumSplits = true, 1, 4
	}
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	defer ds.Close()
	var e epochFigures
	e.openSeconds = time.Since(start).Seconds()
	plan := ds.Metrics().Snapshot()
	e.planBytes, e.planReqs = plan.ReadBytes, plan.ReadRequests
	for _, f := range ds.Files() {
		for _, u := range f.Units {
			e.stored += u.Bytes
			e.rowGroups++
		}
	}
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			tb.Fatal(err)
		}
		e.rows += b.NumRows()
	}
	e.seconds = time.Since(start).Seconds()
	end := ds.Metrics().Snapshot()
	e.readBytes, e.readReqs = end.ReadBytes-e.planBytes, end.ReadRequests-e.planReqs
	return e
}

// BenchmarkObjectStore streams a 1M-row dataset (8 files of 25 row groups)
// from each backend and from local disk, alternately, with default options
// and shuffled, and reports the backend's rows/s, its ratio to local disk,
// the I/O amplification, the requests per row group and the share of the
// time spent opening (listing and footers):
//
//	eval "$(bash scripts/objectstores.sh start)"
//	go test ./internal/e2e -run '^$' -bench . -benchtime 5x
func BenchmarkObjectStore(b *testing.B) {
	spec := synth.Spec{Files: 8, RowsPerFile: 125000, RowGroupRows: 5000, Seed: 9}
	local := writeLocal(b, spec)
	for _, be := range scratch.Backends {
		b.Run(be.Name, func(b *testing.B) {
			sc := newScratch(b, be)
			if err := synth.WriteBucket(context.Background(), sc.Bucket, sc.Key+"data/", spec); err != nil {
				b.Fatal(err)
			}
			for _, order := range orders {
				b.Run(order.name, func(b *testing.B) {
					var store, disk epochFigures
					for b.Loop() {
						disk = disk.add(measureEpoch(b, local, order.shuffle))
						store = store.add(measureEpoch(b, sc.URL("data/"), order.shuffle))
					}
					b.ReportMetric(store.rowsPerSec(), "rows/s")
					b.ReportMetric(disk.rowsPerSec(), "local_rows/s")
					b.ReportMetric(store.rowsPerSec()/disk.rowsPerSec(), "x_local")
					b.ReportMetric(store.amplification(), "io_amp")
					b.ReportMetric(store.reqsPerGroup(), "req/rowgroup")
					b.ReportMetric(store.openSeconds/store.seconds, "open_share")
				})
			}
		})
	}
}
