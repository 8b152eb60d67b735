package checkpoint

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
)

// The sizes the scale tests compare: a job of ranks ranks and 8 splits a
// rank, and one eight times larger in both. Work in proportion to ranks
// plus splits grows eight times from one to the other, work in proportion
// to their product 64 times: linearBound sits between, leaving a noisy
// machine three times what linear work needs.
var scaleSizes = [2]struct{ ranks, splits int }{{64, 512}, {512, 4096}}

// linearBound is the most a measure may grow from the small size to the
// large: 8 where it is linear, 64 where it is quadratic.
const linearBound = 24

// rankStates are the states of every rank of a job, as datasets give
// them: a cursor per split, the rank's own set.
func rankStates(ranks, splits int) []State {
	states := make([]State, ranks)
	for r := range states {
		states[r] = testState(r, ranks, splits)
	}
	return states
}

// fastest is the least time f took over runs runs, and the bytes one run
// allocated (the least, over the runs). The least time is what the work
// costs on a machine whose neighbours only ever add to it.
func fastest(t *testing.T, runs int, f func() error) (time.Duration, uint64) {
	t.Helper()
	best, bytes := time.Duration(1<<62), uint64(1<<62)
	var before, after runtime.MemStats
	for range runs {
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
		runtime.ReadMemStats(&after)
		bytes = min(bytes, after.TotalAlloc-before.TotalAlloc)
	}
	return best, bytes
}

// TestMergeAndJudgeStayLinear: merging a step's states, and a bucket
// store's judging a step complete (listing it, reading and decoding every
// rank's state, merging them), cost in proportion to ranks plus splits.
// A rank's state holds a cursor per split of the job, so that anything
// that reads each state whole costs ranks × splits: four times the ranks
// and splits cost sixteen times. The bytes allocated are exact; the times
// are the fastest of several runs (and not compared under the race
// detector, whose own costs grow with the memory a test touches).
func TestMergeAndJudgeStayLinear(t *testing.T) {
	ctx := context.Background()
	type cost struct {
		merge, judge                         time.Duration
		mergeBytes, judgeBytes, encodedBytes uint64
	}
	var costs [2]cost
	for i, size := range scaleSizes {
		states := rankStates(size.ranks, size.splits)
		var merged State
		var err error
		c := &costs[i]
		c.merge, c.mergeBytes = fastest(t, 15, func() (err error) {
			merged, err = Merge(states...)
			return err
		})
		// The states as bytes, as Python's loader keeps its workers'.
		enc := make([][]byte, len(states))
		for r, st := range states {
			if enc[r], err = Encode(st); err != nil {
				t.Fatal(err)
			}
		}
		_, c.encodedBytes = fastest(t, 3, func() error {
			got, err := MergeEncoded(enc...)
			if err == nil && !reflect.DeepEqual(got, merged) {
				err = fmt.Errorf("MergeEncoded merged to %+v, Merge to %+v", got, merged)
			}
			return err
		})
		store, err := OpenBucketStore(ctx, memblob.OpenBucket(nil), "ckpt/")
		if err != nil {
			t.Fatal(err)
		}
		for r, st := range states {
			if err := store.Save(ctx, "run", 1, r, st); err != nil {
				t.Fatal(err)
			}
		}
		c.judge, c.judgeBytes = fastest(t, 15, func() error {
			got, err := store.LoadStep(ctx, "run", 1)
			if err == nil && !reflect.DeepEqual(got, merged) {
				err = fmt.Errorf("the store merged the step to %+v, Merge to %+v", got, merged)
			}
			return err
		})
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d ranks, %d splits: merge %v (%d bytes), judge %v (%d bytes), MergeEncoded %d bytes",
			size.ranks, size.splits, c.merge, c.mergeBytes, c.judge, c.judgeBytes, c.encodedBytes)
	}
	type measure struct {
		what         string
		small, large float64
	}
	measures := []measure{
		{"merge bytes", float64(costs[0].mergeBytes), float64(costs[1].mergeBytes)},
		{"judge bytes", float64(costs[0].judgeBytes), float64(costs[1].judgeBytes)},
		{"MergeEncoded bytes", float64(costs[0].encodedBytes), float64(costs[1].encodedBytes)},
	}
	if !raceEnabled {
		measures = append(measures,
			measure{"merge time", float64(costs[0].merge), float64(costs[1].merge)},
			measure{"judge time", float64(costs[0].judge), float64(costs[1].judge)})
	}
	for _, m := range measures {
		if ratio := m.large / m.small; ratio > linearBound {
			t.Errorf("%s grew %.1f times from %d ranks and %d splits to %d and %d: more than linear (at most %d)",
				m.what, ratio, scaleSizes[0].ranks, scaleSizes[0].splits, scaleSizes[1].ranks, scaleSizes[1].splits, linearBound)
		}
	}
}

// countingBackend counts the keys its listings yield.
type countingBackend struct {
	Backend
	listed atomic.Int64
}

func (b *countingBackend) List(ctx context.Context, prefix, delim string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for k, err := range b.Backend.List(ctx, prefix, delim) {
			b.listed.Add(1)
			if !yield(k, err) {
				return
			}
		}
	}
}

// TestSaveListsLittle: each rank that saves lists the step to find whether
// it was the last (and writes the completion marker). Listing the whole
// step each time costs the savers of a step of W ranks W²/2 keys; a saver
// stops at the first rank missing, so that they list some W log W in all,
// in any order of saving. The step is complete all the same.
func TestSaveListsLittle(t *testing.T) {
	ctx := context.Background()
	var listed [2]int64
	for i, size := range scaleSizes {
		b := &countingBackend{Backend: NewBucketBackend(memblob.OpenBucket(nil))}
		s := NewStore(b, bucketLayout{"ckpt/"}, "test store")
		states := rankStates(size.ranks, size.splits)
		order := rand.New(rand.NewPCG(7, uint64(i))).Perm(size.ranks)
		for _, r := range order {
			if err := s.Save(ctx, "run", 1, r, states[r]); err != nil {
				t.Fatal(err)
			}
		}
		listed[i] = b.listed.Load()
		if step, err := s.Latest(ctx, "run"); err != nil || step != 1 {
			t.Fatalf("%d ranks: Latest = %d, %v", size.ranks, step, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d ranks saved: %d keys listed (a whole step each time: %d)", size.ranks, listed[i], size.ranks*(size.ranks+1)/2)
	}
	if ratio := float64(listed[1]) / float64(listed[0]); ratio > linearBound {
		t.Errorf("keys listed by a step's savers grew %.1f times from %d ranks to %d (at most %d)", ratio, scaleSizes[0].ranks, scaleSizes[1].ranks, linearBound)
	}
}

// requestCounter is a bucket backend that counts its requests: a Get is
// one, a listing one a page of listPage keys.
type requestCounter struct {
	bucketBackend
	requests atomic.Int64
}

const listPage = 1000 // S3's, GCS's and Azure's most keys a page

func (b *requestCounter) Get(ctx context.Context, key string) ([]byte, error) {
	b.requests.Add(1)
	return b.bucketBackend.Get(ctx, key)
}

func (b *requestCounter) List(ctx context.Context, prefix, delim string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		n := 0
		for k, err := range b.bucketBackend.List(ctx, prefix, delim) {
			if n++; n%listPage == 1 {
				b.requests.Add(1)
			}
			if !yield(k, err) {
				return
			}
		}
		if n == 0 {
			b.requests.Add(1)
		}
	}
}

func (b *requestCounter) listMD5(ctx context.Context, prefix string) iter.Seq2[keyMD5, error] {
	return func(yield func(keyMD5, error) bool) {
		n := 0
		for k, err := range b.bucketBackend.listMD5(ctx, prefix) {
			if n++; n%listPage == 1 {
				b.requests.Add(1)
			}
			if !yield(k, err) {
				return
			}
		}
	}
}

// TestResumeRequestsStayLinear: every rank of a job that resumes judges
// the newest step. Judged from its states, that is a read of every
// rank's state for each rank, W² for a job of W ranks; the step's summary
// makes it a few requests a rank. Resuming at the world size that saved
// (a rank's own state) and at another (the step merged) both, each rank
// through its own store, and the merged state is Merge's. Rank 0 keeping
// the newest steps after a save (Checkpointer.Keep) judges them from
// their summaries too.
func TestResumeRequestsStayLinear(t *testing.T) {
	ctx := context.Background()
	var perJob, retain [2]int64
	for i, size := range scaleSizes {
		bucket := memblob.OpenBucket(nil)
		states := rankStates(size.ranks, size.splits)
		saver := NewStore(&requestCounter{bucketBackend: bucketBackend{bucket: bucket}}, bucketLayout{"ckpt/"}, "saver")
		for _, r := range rand.New(rand.NewPCG(3, uint64(i))).Perm(size.ranks) {
			if err := saver.Save(ctx, "run", 1, r, states[r]); err != nil {
				t.Fatal(err)
			}
		}
		want, err := Merge(states...)
		if err != nil {
			t.Fatal(err)
		}
		// The job resumes at its world size and at half of it.
		for _, world := range []int{size.ranks, size.ranks / 2} {
			for r := range world {
				b := &requestCounter{bucketBackend: bucketBackend{bucket: bucket}}
				s := NewStore(b, bucketLayout{"ckpt/"}, "rank's")
				step, err := s.Latest(ctx, "run")
				if err != nil || step != 1 {
					t.Fatalf("%d ranks: Latest = %d, %v", size.ranks, step, err)
				}
				if world == size.ranks {
					st, err := s.Load(ctx, "run", 1, r)
					if err != nil || !reflect.DeepEqual(st, states[r]) {
						t.Fatalf("rank %d loaded %+v, %v", r, st, err)
					}
				} else {
					st, err := s.LoadStep(ctx, "run", 1)
					if err != nil || !reflect.DeepEqual(st, want) {
						t.Fatalf("rank %d of %d: the step merged to %+v, %v; Merge to %+v", r, world, st, err, want)
					}
				}
				perJob[i] += b.requests.Load()
			}
		}
		t.Logf("%d ranks: %d requests for the job to resume at %d and at %d ranks (%.1f a rank)",
			size.ranks, perJob[i], size.ranks, size.ranks/2, float64(perJob[i])/float64(size.ranks*3/2))

		// Rank 0 keeping the newest step (Checkpointer.Keep) after the
		// next save: a few requests a step judged, whatever the ranks.
		for r := range size.ranks {
			if err := saver.Save(ctx, "run", 2, r, states[r]); err != nil {
				t.Fatal(err)
			}
		}
		b := &requestCounter{bucketBackend: bucketBackend{bucket: bucket}}
		s := NewStore(b, bucketLayout{"ckpt/"}, "rank 0's")
		if err := s.Retain(ctx, "run", 1); err != nil {
			t.Fatal(err)
		}
		retain[i] = b.requests.Load()
		if steps, err := s.listSteps(ctx, "run"); err != nil || !reflect.DeepEqual(steps, []int64{2}) {
			t.Fatalf("%d ranks: steps %v, %v after keeping 1: want [2]", size.ranks, steps, err)
		}
		t.Logf("%d ranks: Retain made %d requests", size.ranks, retain[i])
	}
	if ratio := float64(perJob[1]) / float64(perJob[0]); ratio > linearBound {
		t.Errorf("a job's requests to resume grew %.1f times from %d ranks to %d (at most %d)", ratio, scaleSizes[0].ranks, scaleSizes[1].ranks, linearBound)
	}
	// One rank's call: linear in ranks would be a job's quadratic.
	if ratio := float64(retain[1]) / float64(retain[0]); ratio > 2 {
		t.Errorf("Retain's requests grew %.1f times from %d ranks to %d: want about none", ratio, scaleSizes[0].ranks, scaleSizes[1].ranks)
	}
}
