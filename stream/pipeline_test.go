package stream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/storage"
)

// slowBucket adds a delay to every range read, like a distant object store.
type slowBucket struct {
	storage.Bucket
	delay time.Duration
}

// Scheme is not "file": the engine counts the delay as a distant store's,
// not as a local read's CPU time.
func (b slowBucket) Scheme() string { return "slow" }

func (b slowBucket) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return b.Bucket.ReadAt(ctx, obj, p, off)
}

func idsOf(_ context.Context, b arrow.RecordBatch) ([]int64, error) {
	return slices.Clone(b.Column(0).(*array.Int64).Int64Values()), nil
}

// The queue pattern tells where the time goes: I/O-bound, raw queue near
// empty while the consumer waits; transform-bound, raw queue full while it
// waits; consumer-bound, prefetch queue full and no waiting. Each case runs in
// a synctest bubble, whose clock moves only while every goroutine is blocked:
// the read delay, the transform and the consumer's step are the only time that
// passes, so the queues' integrals, the waits and hence every diagnosis are
// the same on any machine.
func TestDiagnosis(t *testing.T) {
	dir := writeDataset(t, synth.Spec{Files: 8, RowsPerFile: 4000, RowGroupRows: 250, Seed: 1})
	cases := []struct {
		want      string
		readDelay time.Duration
		transform time.Duration
		consume   time.Duration
	}{
		{metrics.IOBound, 30 * time.Millisecond, 0, 0},
		{metrics.TransformBound, 0, 3 * time.Millisecond, 0},
		{metrics.ConsumerBound, 0, 0, 3 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := checkedOptions(t, dir)
				o.Shuffle = true
				// One row group, one window, one batch: no burst of batches
				// from one read fills the prefetch queue.
				o.ShuffleWindow, o.BatchSize = 250, 250
				o.Limits.ReadConcurrency, o.Limits.TransformConcurrency = 2, 1
				// A window of a few dozen batches, so that the samples below
				// leave the start of the stream behind.
				o.Metrics = metrics.NewWithOptions(metrics.Options{Window: 100 * time.Millisecond})
				if c.readDelay > 0 {
					o.Storage.Wrap = func(b storage.Bucket) storage.Bucket { return slowBucket{b, c.readDelay} }
					// At the default 64 requests in flight, this small
					// dataset's 128 row groups arrive in three round trips:
					// all of it is the stream's start. 16 keep the reads
					// behind the consumer past it.
					o.Storage.MaxRequests = 16
				}
				ds := open(t, o)
				var samples []string
				n := 0
				for _, err := range Map(context.Background(), ds, func(ctx context.Context, b arrow.RecordBatch) ([]int64, error) {
					time.Sleep(c.transform)
					return idsOf(ctx, b)
				}) {
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(c.consume)
					n++
					if n%8 == 0 && n > 32 {
						samples = append(samples, ds.Metrics().Snapshot().Diagnosis())
					}
					if len(samples) == 10 {
						break
					}
				}
				if len(samples) < 10 {
					t.Fatalf("only %d samples in %d batches", len(samples), n)
				}
				for _, s := range samples {
					if s != c.want {
						t.Fatalf("diagnoses %v, want %s in every one", samples, c.want)
					}
				}
			})
		})
	}
}

// A state taken while the queues are full counts only what the consumer
// took: resuming from it repeats and skips nothing. It runs in a synctest
// bubble, where the consumer's sleep ends only once every stage is blocked:
// the queues are as full as their bounds allow when the state is taken, on
// any machine.
func TestStateWithFullQueues(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	synctest.Test(t, func(t *testing.T) { testStateWithFullQueues(t, dir) })
}

func testStateWithFullQueues(t *testing.T, dir string) {
	o := checkedOptions(t, dir)
	o.Shuffle, o.NumSplits, o.ClumpSize = true, 4, 3
	o.Limits.PrefetchBatches, o.Limits.PrefetchWindows, o.Limits.ReadConcurrency, o.Limits.TransformConcurrency = 64, 8, 4, 2
	var full []int64
	batches := 0
	for ids, err := range Map(context.Background(), open(t, o), idsOf) {
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, ids...)
		batches++
	}
	for _, k := range []int{1, 17, 100, 200} {
		ds := open(t, o)
		var head []int64
		var st State
		n := 0
		for ids, err := range Map(context.Background(), ds, idsOf) {
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond) // a slow consumer: the queues fill up before it wakes
			head = append(head, ids...)
			n++
			if n == k {
				snap := ds.Metrics().Snapshot()
				if want := min(o.Limits.PrefetchBatches, batches-k); snap.PrefetchQueueItems != want {
					t.Fatalf("k=%d: %d batches in the prefetch queue when the state was taken, want a full queue of %d", k, snap.PrefetchQueueItems, want)
				}
				st = ds.StateDict()
				break
			}
		}
		resumed := open(t, o)
		if err := resumed.LoadStateDict(st); err != nil {
			t.Fatal(err)
		}
		var tail []int64
		for ids, err := range Map(context.Background(), resumed, idsOf) {
			if err != nil {
				t.Fatal(err)
			}
			tail = append(tail, ids...)
		}
		if !slices.Equal(append(head, tail...), full) {
			t.Fatalf("resume after %d batches with full queues is not exact", k)
		}
	}
}

// With 5% transient errors and 5% short bodies on every request, the rows
// are exactly those of a clean run, shuffled and resumed; a permanent error
// fails at once, naming the object.
func TestFaultsAreRetried(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	clean := checkedOptions(t, dir)
	clean.Shuffle, clean.NumSplits = true, 4
	want, _ := consume(t, open(t, clean), -1)

	faulty := clean
	var injected []*faults.Faults
	faulty.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		f := faults.New(b, uint64(len(injected)+1))
		f.ErrorRate, f.TruncateRate = 0.05, 0.05
		injected = append(injected, f)
		return f
	}
	faulty.Storage.Retry = storage.RetryPolicy{MaxAttempts: 20, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	head, st := consume(t, open(t, faulty), 40)
	ds := open(t, faulty)
	if err := ds.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	tail, _ := consume(t, ds, -1)
	got := append(head, tail...)
	n := 0
	for _, f := range injected {
		n += f.Injected()
	}
	if n == 0 {
		t.Fatal("no fault was injected")
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches with faults, %d clean", len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i].ids, want[i].ids) {
			t.Fatalf("batch %d differs from the clean run after %d injected faults", i, n)
		}
	}
	t.Logf("%d faults injected and retried; rows identical to the clean run", n)
}

// The prefetch queue's bytes are the batches' own: with the consumer held
// at its first batch, the queue fills to PrefetchBatches batches of
// BatchSize rows of two int64 columns, about 16 bytes a row (a slice of a
// window counts its rows' share of the window, not the window's buffers),
// and it reads 0 again once the epoch is drained. synctest.Wait lets every
// stage run as far as the bounds allow before the figures are read, so the
// queue is full whatever the machine.
func TestPrefetchQueueBytes(t *testing.T) {
	dir := writeDataset(t, smallSpec)
	for _, shuffle := range []bool{false, true} {
		for _, mapped := range []bool{false, true} {
			t.Run(fmt.Sprintf("shuffle=%t/map=%t", shuffle, mapped), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					o := checkedOptions(t, dir)
					o.Shuffle, o.Limits.PrefetchBatches, o.Limits.TransformConcurrency = shuffle, 5, 2
					ds := open(t, o)
					batches := func(yield func(int, error) bool) {
						if mapped {
							for ids, err := range Map(context.Background(), ds, idsOf) {
								if !yield(len(ids), err) {
									return
								}
							}
							return
						}
						for b, err := range ds.Batches(context.Background()) {
							if err != nil {
								yield(0, err)
								return
							}
							if !yield(int(b.NumRows()), nil) {
								return
							}
						}
					}
					n := 0
					for _, err := range batches {
						if err != nil {
							t.Fatal(err)
						}
						if n++; n > 1 {
							continue
						}
						synctest.Wait()
						s := ds.Metrics().Snapshot()
						lo := int64(s.PrefetchQueueItems * o.BatchSize * 16)
						if s.PrefetchQueueItems != o.Limits.PrefetchBatches || s.PrefetchQueueBytes < lo || s.PrefetchQueueBytes > lo*5/4 {
							t.Fatalf("full prefetch queue: %d batches of %d rows, %d bytes; want %d batches of %d to %d bytes",
								s.PrefetchQueueItems, o.BatchSize, s.PrefetchQueueBytes, o.Limits.PrefetchBatches, lo, lo*5/4)
						}
					}
					if s := ds.Metrics().Snapshot(); s.PrefetchQueueItems != 0 || s.PrefetchQueueBytes != 0 {
						t.Fatalf("drained prefetch queue: %d batches, %d bytes", s.PrefetchQueueItems, s.PrefetchQueueBytes)
					}
				})
			})
		}
	}
}

// Epochs of a tenth of a second, as the health example sees them on small
// data: every epoch's first batch waits for a read and a decode (10 ms
// here, 18-31 ms measured on real files), and the queues fill at each
// epoch's start and drain at its end. Those waits and those fills must not
// decide the diagnosis: a slow consumer reads consumer-bound, a slow
// transform transform-bound and slow reads io-bound, epoch after epoch. In
// a synctest bubble, as TestDiagnosis.
func TestDiagnosisShortEpochs(t *testing.T) {
	dir := writeDataset(t, synth.Spec{Files: 2, RowsPerFile: 2000, RowGroupRows: 250, Seed: 1})
	cases := []struct {
		want      string
		readDelay time.Duration
		fetches   int
		transform time.Duration
		consume   time.Duration
	}{
		{metrics.TransformBound, 10 * time.Millisecond, 0, 3 * time.Millisecond, 0},
		{metrics.ConsumerBound, 10 * time.Millisecond, 0, 0, 3 * time.Millisecond},
		{metrics.IOBound, 30 * time.Millisecond, 1, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := checkedOptions(t, dir)
				o.Shuffle = true
				o.ShuffleWindow, o.BatchSize = 250, 100
				o.Limits.ReadConcurrency, o.Limits.TransformConcurrency, o.Limits.FetchConcurrency = 2, 1, c.fetches
				o.Metrics = metrics.NewWithOptions(metrics.Options{Window: time.Second})
				o.Storage.Wrap = func(b storage.Bucket) storage.Bucket { return slowBucket{b, c.readDelay} }
				ds := open(t, o)
				var samples []string
				// Samples every 0.3 s once the window holds only whole
				// epochs of the stream.
				start := time.Now()
				next := start.Add(2 * time.Second)
				epochs := 0
				for len(samples) < 10 {
					epochs++
					for _, err := range Map(context.Background(), ds, func(ctx context.Context, b arrow.RecordBatch) ([]int64, error) {
						time.Sleep(c.transform)
						return idsOf(ctx, b)
					}) {
						if err != nil {
							t.Fatal(err)
						}
						time.Sleep(c.consume)
						if time.Now().After(next) {
							s := ds.Metrics().Snapshot()
							if s.Recent.StartWaitSeconds == 0 {
								t.Fatalf("no wait for an epoch's first batch in the window: %v", s)
							}
							samples = append(samples, s.Diagnosis())
							next = next.Add(300 * time.Millisecond)
						}
					}
				}
				if per := time.Since(start) / time.Duration(epochs); per > time.Second/2 {
					t.Fatalf("epochs of %v: not short", per)
				}
				for _, s := range samples {
					if s != c.want {
						t.Fatalf("diagnoses %v over %d epochs, want %s in every one; last: %v", samples, epochs, c.want, ds.Metrics().Snapshot())
					}
				}
			})
		})
	}
}
