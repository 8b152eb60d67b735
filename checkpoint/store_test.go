package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
)

// storeKit opens a fresh, empty store of one kind for a test, closed when
// the test ends, with a back door to the bytes it keeps so that tests can
// damage them as a disk or a bucket might.
type storeKit struct {
	name string
	open func(t *testing.T) (Store, backdoor)
}

type backdoor struct {
	get func(run string, step int64, rank int) []byte
	put func(run string, step int64, rank int, b []byte)
}

func storeKits() []storeKit {
	return []storeKit{
		{"pebble", func(t *testing.T) (Store, backdoor) {
			s, err := OpenPebble(t.TempDir(), PebbleOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeStore(t, s) })
			return s, backdoorTo(t, &s.store)
		}},
		{"memblob", func(t *testing.T) (Store, backdoor) {
			return openBucketKit(t, memblob.OpenBucket(nil))
		}},
		{"fileblob", func(t *testing.T) (Store, backdoor) {
			b, err := fileblob.OpenBucket(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return openBucketKit(t, b)
		}},
	}
}

func openBucketKit(t *testing.T, bucket *blob.Bucket) (Store, backdoor) {
	t.Helper()
	s, err := OpenBucketStore(context.Background(), bucket, "jobs/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closeStore(t, s)
		if err := bucket.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, backdoorTo(t, &s.store)
}

// backdoorTo reaches a store's states through its backend, past the store.
func backdoorTo(t *testing.T, s *store) backdoor {
	ctx := context.Background()
	return backdoor{
		get: func(run string, step int64, rank int) []byte {
			b, err := s.b.get(ctx, s.keys.rankKey(run, step, rank))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		put: func(run string, step int64, rank int, b []byte) {
			if err := s.b.put(ctx, s.keys.rankKey(run, step, rank), b); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func closeStore(t *testing.T, s Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// saveStep saves every rank of a step of world ranks over splits splits,
// each state passed through edit (if not nil) first, and returns them.
func saveStep(t *testing.T, s Store, run string, step int64, world, splits int, edit func(*State)) []State {
	t.Helper()
	var states []State
	for r := range world {
		st := testState(r, world, splits)
		st.Epoch = step // so that states of different steps differ
		if edit != nil {
			edit(&st)
		}
		if err := s.Save(context.Background(), run, step, r, st); err != nil {
			t.Fatalf("Save step %d rank %d: %v", step, r, err)
		}
		states = append(states, st)
	}
	return states
}

func listSteps(t *testing.T, s Store, run string) (steps []int64, complete []bool) {
	t.Helper()
	infos, err := s.List(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		steps = append(steps, in.Step)
		complete = append(complete, in.Complete)
	}
	return steps, complete
}

func wantErr(t *testing.T, err, sentinel error, words ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("got error %v, want one wrapping %v", err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

// TestStores runs one suite against every store, so that they keep the
// same contract.
func TestStores(t *testing.T) {
	for _, kit := range storeKits() {
		t.Run(kit.name, func(t *testing.T) {
			t.Run("SaveLoad", func(t *testing.T) { testSaveLoad(t, kit) })
			t.Run("SaveRefuses", func(t *testing.T) { testSaveRefuses(t, kit) })
			t.Run("LoadStep", func(t *testing.T) { testLoadStep(t, kit) })
			t.Run("LatestAndList", func(t *testing.T) { testLatestAndList(t, kit) })
			t.Run("NumericOrderAndRunIsolation", func(t *testing.T) { testOrder(t, kit) })
			t.Run("Corrupt", func(t *testing.T) { testCorrupt(t, kit) })
			t.Run("Mismatch", func(t *testing.T) { testMismatch(t, kit) })
			t.Run("NewerVersion", func(t *testing.T) { testNewerVersion(t, kit) })
			t.Run("DeleteRetain", func(t *testing.T) { testDeleteRetain(t, kit) })
			t.Run("ConcurrentRanks", func(t *testing.T) { testConcurrentRanks(t, kit) })
			t.Run("ClosedAndCancelled", func(t *testing.T) { testClosed(t, kit) })
		})
	}
}

func testSaveLoad(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	st := testState(1, 2, 8)
	if err := s.Save(ctx, "run-a", 7, 1, st); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, "run-a", 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("Load gave %+v, saved %+v", got, st)
	}
	// A second save of the same rank and step replaces the first.
	st.Cursors[1].Offset++
	if err := s.Save(ctx, "run-a", 7, 1, st); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "run-a", 7, 1); got.Cursors[1] != st.Cursors[1] {
		t.Fatalf("Load after overwrite gave cursor %+v", got.Cursors[1])
	}
	_, err = s.Load(ctx, "run-a", 7, 0)
	wantErr(t, err, ErrNotFound, `run "run-a" step 7 rank 0`)
	_, err = s.Load(ctx, "run-b", 7, 1)
	wantErr(t, err, ErrNotFound, `run "run-b"`)
	_, err = s.Latest(ctx, "run-b")
	wantErr(t, err, ErrNotFound, `run "run-b"`)
	if infos, err := s.List(ctx, "run-b"); err != nil || len(infos) != 0 {
		t.Fatalf("List of an unknown run: %v, %v", infos, err)
	}
}

func testSaveRefuses(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	good := testState(0, 2, 4)
	merged, err := Merge(testState(0, 2, 4), testState(1, 2, 4))
	if err != nil {
		t.Fatal(err)
	}
	invalid := testState(0, 2, 4)
	invalid.Cursors = invalid.Cursors[:2]
	for _, c := range []struct {
		name, run string
		step      int64
		rank      int
		st        State
		says      string
	}{
		{"empty run", "", 1, 0, good, "empty"},
		{"slash", "a/b", 1, 0, good, "separator"},
		{"NUL", "a\x00b", 1, 0, good, "control"},
		{"dot dot", "..", 1, 0, good, "reserved"},
		{"long run", strings.Repeat("r", MaxRunName+1), 1, 0, good, "longer"},
		{"bad utf-8", "\xff", 1, 0, good, "UTF-8"},
		{"negative step", "r", -1, 0, good, "negative"},
		{"rank differs", "r", 1, 1, good, "rank 0's"},
		{"merged", "r", 1, 0, merged, "merged"},
		{"invalid", "r", 1, 0, invalid, "cursors"},
	} {
		err := s.Save(ctx, c.run, c.step, c.rank, c.st)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: Save gave %v, want an error saying %q", c.name, err, c.says)
		}
	}
	if steps, _ := listSteps(t, s, "r"); len(steps) != 0 {
		t.Fatalf("refused saves left steps %v", steps)
	}
}

func testLoadStep(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	states := saveStep(t, s, "r", 100, 4, 8, nil)
	got, err := s.LoadStep(ctx, "r", 100)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Rank != -1 {
		t.Fatalf("LoadStep gave %+v, want %+v", got, want)
	}
	for sp, c := range got.Cursors {
		if c != states[sp%4].Cursors[sp] {
			t.Fatalf("split %d has cursor %+v, its owner saved %+v", sp, c, states[sp%4].Cursors[sp])
		}
	}
	saveStep(t, s, "r", 200, 4, 8, nil)
	if err := s.Delete(ctx, "r", 200); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		st := testState(r, 4, 8)
		if err := s.Save(ctx, "r", 200, r, st); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.LoadStep(ctx, "r", 200)
	wantErr(t, err, ErrIncomplete, `run "r" step 200`, "[3]")
	_, err = s.LoadStep(ctx, "r", 300)
	wantErr(t, err, ErrNotFound, `run "r" step 300`)
}

func testLatestAndList(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	saveStep(t, s, "r", 10, 2, 4, nil)
	saveStep(t, s, "r", 20, 2, 4, nil)
	if err := s.Save(ctx, "r", 30, 1, testState(1, 2, 4)); err != nil {
		t.Fatal(err)
	}
	latest, err := s.Latest(ctx, "r")
	if err != nil || latest != 20 {
		t.Fatalf("Latest = %d, %v; want 20 (step 30 lacks rank 0)", latest, err)
	}
	infos, err := s.List(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want := []StepInfo{
		{Step: 10, Ranks: []int{0, 1}, WorldSize: 2, Complete: true},
		{Step: 20, Ranks: []int{0, 1}, WorldSize: 2, Complete: true},
		{Step: 30, Ranks: []int{1}, WorldSize: 2, Reason: "step incomplete: ranks [0] of world size 2 are missing"},
	}
	if !reflect.DeepEqual(infos, want) {
		t.Fatalf("List:\n got %+v\nwant %+v", infos, want)
	}
	// Completing step 30 moves Latest on.
	if err := s.Save(ctx, "r", 30, 0, testState(0, 2, 4)); err != nil {
		t.Fatal(err)
	}
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 30 {
		t.Fatalf("Latest = %d, %v; want 30", latest, err)
	}
}

func testOrder(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	// Steps whose decimal or little-endian order differs from their numeric
	// order, and run names that prefix one another.
	steps := []int64{1 << 40, 256, 9, 10, 255, 0, math.MaxInt64}
	for _, step := range steps {
		saveStep(t, s, "a", step, 1, 2, nil)
	}
	saveStep(t, s, "ab", 1<<50, 1, 2, nil)
	saveStep(t, s, "a b", 1<<50, 1, 2, nil)
	got, _ := listSteps(t, s, "a")
	want := slices.Sorted(slices.Values(steps))
	if !slices.Equal(got, want) {
		t.Fatalf("List steps %v, want %v", got, want)
	}
	if latest, err := s.Latest(ctx, "a"); err != nil || latest != math.MaxInt64 {
		t.Fatalf("Latest = %d, %v", latest, err)
	}
	if err := s.Delete(ctx, "a", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if latest, err := s.Latest(ctx, "a"); err != nil || latest != 1<<40 {
		t.Fatalf("Latest after deleting the newest = %d, %v", latest, err)
	}
	if got, _ := listSteps(t, s, "ab"); !slices.Equal(got, []int64{1 << 50}) {
		t.Fatalf("run ab has steps %v", got)
	}
}

func testCorrupt(t *testing.T, kit storeKit) {
	ctx := context.Background()
	for _, damage := range []struct {
		name string
		fn   func([]byte) []byte
		says string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-7] }, "truncated"},
		{"bit flip", func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b }, "checksum"},
		{"emptied", func([]byte) []byte { return nil }, "magic"},
	} {
		t.Run(damage.name, func(t *testing.T) {
			s, raw := kit.open(t)
			saveStep(t, s, "r", 1, 3, 6, nil)
			saveStep(t, s, "r", 2, 3, 6, nil)
			raw.put("r", 2, 1, damage.fn(raw.get("r", 2, 1)))

			_, err := s.Load(ctx, "r", 2, 1)
			wantErr(t, err, ErrCorrupt, `run "r" step 2 rank 1`, "corrupt", damage.says)
			_, err = s.LoadStep(ctx, "r", 2)
			wantErr(t, err, ErrCorrupt, `run "r" step 2 rank 1`, "corrupt")
			if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
				t.Fatalf("Latest = %d, %v; want a fallback to step 1", latest, err)
			}
			infos, err := s.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			bad := infos[1]
			if bad.Complete || !strings.Contains(bad.RankErrors[1], "corrupt") || len(bad.RankErrors) != 1 || !strings.Contains(bad.Reason, "rank 1") {
				t.Fatalf("List shows the damaged step as %+v", bad)
			}
			// Re-saving the rank repairs the step.
			repaired := testState(1, 3, 6)
			repaired.Epoch = 2
			if err := s.Save(ctx, "r", 2, 1, repaired); err != nil {
				t.Fatal(err)
			}
			if latest, err := s.Latest(ctx, "r"); err != nil || latest != 2 {
				t.Fatalf("Latest after repair = %d, %v", latest, err)
			}
		})
	}
	t.Run("another rank's state", func(t *testing.T) {
		s, raw := kit.open(t)
		saveStep(t, s, "r", 1, 2, 2, nil)
		raw.put("r", 1, 1, raw.get("r", 1, 0))
		_, err := s.Load(ctx, "r", 1, 1)
		wantErr(t, err, ErrCorrupt, "rank 1", "holds the state of rank 0")
		_, err = s.Latest(ctx, "r")
		wantErr(t, err, ErrNotFound)
	})
}

func testMismatch(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	saveStep(t, s, "r", 1, 2, 4, nil)
	// Rank 1 of step 2 comes from a job reading another dataset.
	saveStep(t, s, "r", 2, 2, 4, func(st *State) {
		if st.Rank == 1 {
			st.Plan = "plan-other"
			st.Fingerprint = st.OrderFingerprint()
		}
	})
	_, err := s.LoadStep(ctx, "r", 2)
	wantErr(t, err, ErrMismatch, `run "r" step 2`, "field plan", "plan-other")
	// Ranks that agree on the order but not on the world size.
	if err := s.Save(ctx, "r", 3, 0, testState(0, 2, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "r", 3, 1, testState(1, 4, 4)); err != nil {
		t.Fatal(err)
	}
	_, err = s.LoadStep(ctx, "r", 3)
	wantErr(t, err, ErrMismatch, "field world_size")
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
		t.Fatalf("Latest = %d, %v; want 1", latest, err)
	}
}

func testNewerVersion(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, raw := kit.open(t)
	saveStep(t, s, "r", 1, 1, 1, nil)
	saveStep(t, s, "r", 2, 1, 1, nil)
	raw.put("r", 2, 0, frame(7, []byte{0x80}))
	_, err := s.Load(ctx, "r", 2, 0)
	wantErr(t, err, ErrUnsupportedVersion, `run "r" step 2 rank 0`, "version 7 needs a newer sluice")
	// A step from a newer build is not damage: Latest says so rather than
	// quietly resuming from an older step.
	_, err = s.Latest(ctx, "r")
	wantErr(t, err, ErrUnsupportedVersion, "step 2")
}

func testDeleteRetain(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, raw := kit.open(t)
	for step := int64(1); step <= 7; step++ {
		saveStep(t, s, "r", step, 2, 2, nil)
	}
	saveStep(t, s, "other", 1, 2, 2, nil)
	// Step 4 loses a rank, step 6 is damaged, step 8 is being saved.
	if err := s.Delete(ctx, "r", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "r", 4, 0, testState(0, 2, 2)); err != nil {
		t.Fatal(err)
	}
	raw.put("r", 6, 0, raw.get("r", 6, 0)[:10])
	if err := s.Save(ctx, "r", 8, 1, testState(1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "r", 99); err != nil {
		t.Fatalf("Delete of a missing step: %v", err)
	}
	if err := s.Retain(ctx, "r", 0); err == nil {
		t.Fatal("Retain keep 0 was accepted")
	}
	if err := s.Retain(ctx, "r", 10); err != nil {
		t.Fatal(err)
	}
	if steps, _ := listSteps(t, s, "r"); len(steps) != 8 {
		t.Fatalf("Retain of more than there are deleted steps: %v", steps)
	}
	// The 3 newest complete steps are 7, 5 and 3: step 4 (incomplete, but
	// newer than 3) and step 6 (damaged) and step 8 stay; 1 and 2 go.
	if err := s.Retain(ctx, "r", 3); err != nil {
		t.Fatal(err)
	}
	steps, complete := listSteps(t, s, "r")
	if !slices.Equal(steps, []int64{3, 4, 5, 6, 7, 8}) || !slices.Equal(complete, []bool{true, false, true, false, true, false}) {
		t.Fatalf("after Retain 3: steps %v complete %v", steps, complete)
	}
	if err := s.Retain(ctx, "r", 1); err != nil {
		t.Fatal(err)
	}
	if steps, _ := listSteps(t, s, "r"); !slices.Equal(steps, []int64{7, 8}) {
		t.Fatalf("after Retain 1: steps %v", steps)
	}
	if steps, _ := listSteps(t, s, "other"); !slices.Equal(steps, []int64{1}) {
		t.Fatalf("Retain of run r touched run other: %v", steps)
	}
}

// testConcurrentRanks saves steps from one goroutine per rank, as the ranks
// of a job would, and checks that every step ends complete: in a bucket
// store exactly one of the savers of a step must see all ranks and write the
// marker.
func testConcurrentRanks(t *testing.T, kit storeKit) {
	ctx := context.Background()
	s, _ := kit.open(t)
	const world, steps = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, world)
	for r := range world {
		wg.Go(func() {
			for step := range int64(steps) {
				st := testState(r, world, 2*world)
				st.Epoch = step
				if err := s.Save(ctx, "r", step, r, st); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, complete := listSteps(t, s, "r"); !slices.Equal(complete, []bool{true, true, true, true}) {
		t.Fatalf("complete flags %v", complete)
	}
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != steps-1 {
		t.Fatalf("Latest = %d, %v", latest, err)
	}
	merged, err := s.LoadStep(ctx, "r", steps-1)
	if err != nil || merged.Epoch != steps-1 {
		t.Fatalf("LoadStep: %+v, %v", merged, err)
	}
}

func testClosed(t *testing.T, kit storeKit) {
	s, _ := kit.open(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Save(cancelled, "r", 1, 0, testState(0, 1, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Save(ctx, "r", 1, 0, testState(0, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Save after Close: %v", err)
	}
	if _, err := s.Latest(ctx, "r"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Latest after Close: %v", err)
	}
}

// TestSkippable pins down which failures Latest passes over.
func TestSkippable(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("x: %w", corrupt("y")):                 true,
		fmt.Errorf("x: %w", trimPrefix(ErrIncomplete)):    true,
		fmt.Errorf("x: %w", ErrMismatch):                  true,
		&VersionError{Version: 2, Max: 1}:                 false,
		errors.New("connection reset"):                    false,
		fmt.Errorf("x: %w", context.DeadlineExceeded):     false,
		fmt.Errorf("x: %w", trimPrefix(ErrNotFound)):      true,
		fmt.Errorf("x: %w", bytes.ErrTooLarge):            false,
		fmt.Errorf("%w", &corruptError{what: "marker"}):   true,
		fmt.Errorf("%w", &redactedError{err: ErrCorrupt}): true,
	} {
		if got := skippable(err); got != want {
			t.Errorf("skippable(%v) = %t", err, got)
		}
	}
}
