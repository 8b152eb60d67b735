// Package storetest holds the tests every checkpoint store and backend must
// pass, so that the stores in checkpoint and in its subpackages are held to
// one contract by one suite, as testing/fstest holds file systems to io/fs's.
package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
)

// An Opener opens a fresh, empty store for a test, closed when the test
// ends, and returns it with the backend and layout under it, through which
// the tests damage stored bytes as a disk or a bucket might.
type Opener func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout)

// Store runs the store suite against the stores open makes.
func Store(t *testing.T, open Opener) {
	t.Run("SaveLoad", func(t *testing.T) { testSaveLoad(t, open) })
	t.Run("SaveRefuses", func(t *testing.T) { testSaveRefuses(t, open) })
	t.Run("LoadStep", func(t *testing.T) { testLoadStep(t, open) })
	t.Run("LatestAndList", func(t *testing.T) { testLatestAndList(t, open) })
	t.Run("NumericOrderAndRunIsolation", func(t *testing.T) { testOrder(t, open) })
	t.Run("Corrupt", func(t *testing.T) { testCorrupt(t, open) })
	t.Run("Mismatch", func(t *testing.T) { testMismatch(t, open) })
	t.Run("NewerVersion", func(t *testing.T) { testNewerVersion(t, open) })
	t.Run("DeleteRetain", func(t *testing.T) { testDeleteRetain(t, open) })
	t.Run("ConcurrentRanks", func(t *testing.T) { testConcurrentRanks(t, open) })
	t.Run("AbandonDeadStart", func(t *testing.T) { testAbandon(t, open) })
	t.Run("ClosedAndCancelled", func(t *testing.T) { testClosed(t, open) })
	t.Run("Incarnation", func(t *testing.T) { Incarnation(t, open) })
}

// backdoor reaches a store's states through its backend, past the store.
type backdoor struct {
	get func(run string, step int64, rank int) []byte
	put func(run string, step int64, rank int, b []byte)
}

func openRaw(t *testing.T, open Opener) (checkpoint.Store, backdoor) {
	s, b, l := open(t)
	ctx := context.Background()
	return s, backdoor{
		get: func(run string, step int64, rank int) []byte {
			v, err := b.Get(ctx, l.RankKey(run, step, rank))
			if err != nil {
				t.Fatal(err)
			}
			return v
		},
		put: func(run string, step int64, rank int, v []byte) {
			if err := b.Put(ctx, l.RankKey(run, step, rank), v); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// Backend holds the backends open makes (fresh and empty each time, closed
// when the test ends) to the contract of checkpoint.Backend.
func Backend(t *testing.T, open func(t *testing.T) checkpoint.Backend) {
	ctx := context.Background()
	t.Run("GetPut", func(t *testing.T) {
		b := open(t)
		if _, err := b.Get(ctx, "a/x"); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("Get of a missing key: %v", err)
		}
		v := []byte("one")
		if err := b.Put(ctx, "a/x", v); err != nil {
			t.Fatal(err)
		}
		v[0] = 'X' // the caller may reuse what it put
		got, err := b.Get(ctx, "a/x")
		if err != nil || string(got) != "one" {
			t.Fatalf("Get = %q, %v", got, err)
		}
		got[0] = 'Y' // and what it got
		if err := b.Put(ctx, "a/x", []byte("two")); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Get(ctx, "a/x"); err != nil || string(got) != "two" {
			t.Fatalf("Get after overwrite = %q, %v", got, err)
		}
		if err := b.Put(ctx, "a/empty", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Get(ctx, "a/empty"); err != nil || len(got) != 0 {
			t.Fatalf("Get of an empty value = %q, %v", got, err)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		b := open(t)
		for _, k := range []string{"d/1", "d/2", "d/3"} {
			if err := b.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Delete(ctx, []string{"d/3", "d/missing", "d/1"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, b, "d/", ""); !slices.Equal(got, []string{"d/2"}) {
			t.Fatalf("after delete: %q", got)
		}
		if _, err := b.Get(ctx, "d/1"); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("Get of a deleted key: %v", err)
		}
	})
	t.Run("List", func(t *testing.T) {
		b := open(t)
		for _, k := range []string{"p/c", "p/b/2", "q", "p/a", "p/b/1", "pz", "p/d/e/f"} {
			if err := b.Put(ctx, k, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			prefix, delim string
			want          []string
		}{
			{"p/", "", []string{"p/a", "p/b/1", "p/b/2", "p/c", "p/d/e/f"}},
			{"p/", "/", []string{"p/a", "p/b/", "p/c", "p/d/"}},
			{"", "/", []string{"p/", "pz", "q"}},
			{"p/b/", "/", []string{"p/b/1", "p/b/2"}},
			{"p", "", []string{"p/a", "p/b/1", "p/b/2", "p/c", "p/d/e/f", "pz"}},
			{"r/", "/", nil},
		} {
			if got := collect(t, b, c.prefix, c.delim); !reflect.DeepEqual(got, c.want) {
				t.Errorf("list %q delim %q = %q, want %q", c.prefix, c.delim, got, c.want)
			}
		}
		// Stopping early releases what the listing held.
		for range b.List(ctx, "p/", "") {
			break
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		var last error
		for _, err := range b.List(cancelled, "p/", "") {
			last = err
		}
		if !errors.Is(last, context.Canceled) {
			t.Fatalf("List with a cancelled context ended with %v", last)
		}
	})
}

func collect(t *testing.T, b checkpoint.Backend, prefix, delim string) []string {
	t.Helper()
	var keys []string
	for k, err := range b.List(context.Background(), prefix, delim) {
		if err != nil {
			t.Fatalf("List %q %q: %v", prefix, delim, err)
		}
		keys = append(keys, k)
	}
	return keys
}

// OldLayout checks that states written under the keys an older sluice
// wrote them under are read through s: put stores an encoded state of run
// "r" at a step and rank under the key the older store spelled, and any
// marker the step needs once its last rank is there.
func OldLayout(t *testing.T, s checkpoint.Store, put func(step int64, rank int, value []byte)) {
	t.Helper()
	ctx := context.Background()
	for step := range int64(2) {
		for rank := range 2 {
			st := State(rank, 2, 4)
			st.Epoch = step
			enc, err := checkpoint.Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			put(step, rank, enc)
		}
	}
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
		t.Fatalf("Latest = %d, %v", latest, err)
	}
	merged, err := s.LoadStep(ctx, "r", 1)
	if err != nil || merged.Epoch != 1 || merged.WorldSize != 2 {
		t.Fatalf("LoadStep = %+v, %v", merged, err)
	}
	if st, err := s.Load(ctx, "r", 0, 1); err != nil || st.Rank != 1 || st.Epoch != 0 {
		t.Fatalf("Load = %+v, %v", st, err)
	}
	if steps, complete := ListSteps(t, s, "r"); !slices.Equal(steps, []int64{0, 1}) || !slices.Equal(complete, []bool{true, true}) {
		t.Fatalf("List: steps %v complete %v", steps, complete)
	}
}

// State returns a valid state of one rank with distinct cursors, so that a
// merge or a round trip that loses or swaps one shows.
func State(rank, world, splits int) checkpoint.State {
	st := checkpoint.State{
		Version:       checkpoint.StateVersion,
		Plan:          "plan-0f3a",
		Columns:       []string{"features", "label"},
		Seed:          42,
		Epoch:         3,
		Shuffle:       true,
		ClumpSize:     16,
		ShuffleWindow: 4096,
		NumSplits:     splits,
		WorldSize:     world,
		Rank:          rank,
		Next:          min(1, splits/world-1),
	}
	st.Fingerprint = st.OrderFingerprint()
	st.Cursors = make([]checkpoint.Cursor, splits)
	for s := range st.Cursors {
		if st.Owns(s) {
			st.Cursors[s] = checkpoint.Cursor{Window: s + 1, Offset: int64(1000*s + rank), Rows: int64(5000*s + 7)}
		}
	}
	return st
}

// RealisticState is what a rank of a 64-split job saves: 64 cursors, a
// column projection and hashes as long as a stream writes them.
func RealisticState() checkpoint.State {
	st := State(3, 8, 64)
	st.Columns = []string{"input_ids", "attention_mask", "labels", "source", "lang", "score"}
	st.Plan = strings.Repeat("9f", 32)
	st.Fingerprint = st.OrderFingerprint()
	for i := range st.Cursors {
		st.Cursors[i] = checkpoint.Cursor{Window: 1200 + i, Offset: 70000 + int64(i), Rows: 12_345_678 + int64(i)}
	}
	return st
}

// frame wraps a payload in an envelope of the given version with a correct
// checksum, spelled out as encode.go documents it (magic "SLCK", version,
// payload length, payload, CRC-32C of all that), so that a state from a
// newer build can be made.
func frame(version uint16, payload []byte) []byte {
	b := []byte("SLCK")
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// CloseStore closes s, failing the test if that fails.
func CloseStore(t *testing.T, s checkpoint.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// SaveStep saves every rank of a step of world ranks over splits splits,
// each state passed through edit (if not nil) first, and returns them.
func SaveStep(t *testing.T, s checkpoint.Store, run string, step int64, world, splits int, edit func(*checkpoint.State)) []checkpoint.State {
	t.Helper()
	var states []checkpoint.State
	for r := range world {
		st := State(r, world, splits)
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

// ListSteps returns the steps List shows for run and whether each is
// complete.
func ListSteps(t *testing.T, s checkpoint.Store, run string) (steps []int64, complete []bool) {
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

// WantErr fails the test unless err wraps sentinel and its text says every
// one of words.
func WantErr(t *testing.T, err, sentinel error, words ...string) {
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

func testSaveLoad(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	st := State(1, 2, 8)
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
	WantErr(t, err, checkpoint.ErrNotFound, `run "run-a" step 7 rank 0`)
	_, err = s.Load(ctx, "run-b", 7, 1)
	WantErr(t, err, checkpoint.ErrNotFound, `run "run-b"`)
	_, err = s.Latest(ctx, "run-b")
	WantErr(t, err, checkpoint.ErrNotFound, `run "run-b"`)
	if infos, err := s.List(ctx, "run-b"); err != nil || len(infos) != 0 {
		t.Fatalf("List of an unknown run: %v, %v", infos, err)
	}
}

func testSaveRefuses(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	good := State(0, 2, 4)
	merged, err := checkpoint.Merge(State(0, 2, 4), State(1, 2, 4))
	if err != nil {
		t.Fatal(err)
	}
	invalid := State(0, 2, 4)
	invalid.Cursors = invalid.Cursors[:2]
	for _, c := range []struct {
		name, run string
		step      int64
		rank      int
		st        checkpoint.State
		says      string
	}{
		{"empty run", "", 1, 0, good, "empty"},
		{"slash", "a/b", 1, 0, good, "separator"},
		{"NUL", "a\x00b", 1, 0, good, "control"},
		{"dot dot", "..", 1, 0, good, "reserved"},
		{"long run", strings.Repeat("r", checkpoint.MaxRunName+1), 1, 0, good, "longer"},
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
	if steps, _ := ListSteps(t, s, "r"); len(steps) != 0 {
		t.Fatalf("refused saves left steps %v", steps)
	}
}

func testLoadStep(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	states := SaveStep(t, s, "r", 100, 4, 8, nil)
	got, err := s.LoadStep(ctx, "r", 100)
	if err != nil {
		t.Fatal(err)
	}
	want, err := checkpoint.Merge(states...)
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
	SaveStep(t, s, "r", 200, 4, 8, nil)
	if err := s.Delete(ctx, "r", 200); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		st := State(r, 4, 8)
		if err := s.Save(ctx, "r", 200, r, st); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.LoadStep(ctx, "r", 200)
	WantErr(t, err, checkpoint.ErrIncomplete, `run "r" step 200`, "[3]")
	_, err = s.LoadStep(ctx, "r", 300)
	WantErr(t, err, checkpoint.ErrNotFound, `run "r" step 300`)
}

func testLatestAndList(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	SaveStep(t, s, "r", 10, 2, 4, nil)
	SaveStep(t, s, "r", 20, 2, 4, nil)
	if err := s.Save(ctx, "r", 30, 1, State(1, 2, 4)); err != nil {
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
	want := []checkpoint.StepInfo{
		{Step: 10, Ranks: []int{0, 1}, WorldSize: 2, Complete: true},
		{Step: 20, Ranks: []int{0, 1}, WorldSize: 2, Complete: true},
		{Step: 30, Ranks: []int{1}, WorldSize: 2, Reason: "step incomplete: ranks [0] of world size 2 are missing"},
	}
	if !reflect.DeepEqual(infos, want) {
		t.Fatalf("List:\n got %+v\nwant %+v", infos, want)
	}
	// Completing step 30 moves Latest on.
	if err := s.Save(ctx, "r", 30, 0, State(0, 2, 4)); err != nil {
		t.Fatal(err)
	}
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 30 {
		t.Fatalf("Latest = %d, %v; want 30", latest, err)
	}
}

func testOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	// Steps whose decimal or little-endian order differs from their numeric
	// order, and run names that prefix one another.
	steps := []int64{1 << 40, 256, 9, 10, 255, 0, math.MaxInt64}
	for _, step := range steps {
		SaveStep(t, s, "a", step, 1, 2, nil)
	}
	SaveStep(t, s, "ab", 1<<50, 1, 2, nil)
	SaveStep(t, s, "a b", 1<<50, 1, 2, nil)
	got, _ := ListSteps(t, s, "a")
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
	if got, _ := ListSteps(t, s, "ab"); !slices.Equal(got, []int64{1 << 50}) {
		t.Fatalf("run ab has steps %v", got)
	}
}

func testCorrupt(t *testing.T, open Opener) {
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
			s, raw := openRaw(t, open)
			SaveStep(t, s, "r", 1, 3, 6, nil)
			SaveStep(t, s, "r", 2, 3, 6, nil)
			raw.put("r", 2, 1, damage.fn(raw.get("r", 2, 1)))

			_, err := s.Load(ctx, "r", 2, 1)
			WantErr(t, err, checkpoint.ErrCorrupt, `run "r" step 2 rank 1`, "corrupt", damage.says)
			_, err = s.LoadStep(ctx, "r", 2)
			WantErr(t, err, checkpoint.ErrCorrupt, `run "r" step 2 rank 1`, "corrupt")
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
			repaired := State(1, 3, 6)
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
		s, raw := openRaw(t, open)
		SaveStep(t, s, "r", 1, 2, 2, nil)
		raw.put("r", 1, 1, raw.get("r", 1, 0))
		_, err := s.Load(ctx, "r", 1, 1)
		WantErr(t, err, checkpoint.ErrCorrupt, "rank 1", "holds the state of rank 0")
		// The run's only step was saved and then damaged: its position is
		// lost, which Latest must not report as a run that never saved.
		_, err = s.Latest(ctx, "r")
		WantErr(t, err, checkpoint.ErrCorrupt, "no complete step left", "holds the state of rank 0")
		if errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("Latest over damaged steps only = %v, which reads as a fresh run", err)
		}
	})
	t.Run("never finished", func(t *testing.T) {
		s, _ := openRaw(t, open)
		// Only rank 0 of two saved step 1: the job died before the step
		// was complete, so a restart starts afresh.
		if err := s.Save(ctx, "r", 1, 0, State(0, 2, 2)); err != nil {
			t.Fatal(err)
		}
		_, err := s.Latest(ctx, "r")
		WantErr(t, err, checkpoint.ErrNotFound)
	})
}

func testMismatch(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	SaveStep(t, s, "r", 1, 2, 4, nil)
	// Rank 1 of step 2 comes from a job reading another dataset.
	SaveStep(t, s, "r", 2, 2, 4, func(st *checkpoint.State) {
		if st.Rank == 1 {
			st.Plan = "plan-other"
			st.Fingerprint = st.OrderFingerprint()
		}
	})
	_, err := s.LoadStep(ctx, "r", 2)
	WantErr(t, err, checkpoint.ErrMismatch, `run "r" step 2`, "field plan", "plan-other")
	// Ranks that agree on the order but not on the world size.
	if err := s.Save(ctx, "r", 3, 0, State(0, 2, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "r", 3, 1, State(1, 4, 4)); err != nil {
		t.Fatal(err)
	}
	_, err = s.LoadStep(ctx, "r", 3)
	WantErr(t, err, checkpoint.ErrMismatch, "field world_size")
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
		t.Fatalf("Latest = %d, %v; want 1", latest, err)
	}
}

func testNewerVersion(t *testing.T, open Opener) {
	ctx := context.Background()
	s, raw := openRaw(t, open)
	SaveStep(t, s, "r", 1, 1, 1, nil)
	SaveStep(t, s, "r", 2, 1, 1, nil)
	raw.put("r", 2, 0, frame(7, []byte{0x80}))
	_, err := s.Load(ctx, "r", 2, 0)
	WantErr(t, err, checkpoint.ErrUnsupportedVersion, `run "r" step 2 rank 0`, "version 7 needs a newer sluice")
	// A step from a newer build is not damage: Latest says so rather than
	// quietly resuming from an older step.
	_, err = s.Latest(ctx, "r")
	WantErr(t, err, checkpoint.ErrUnsupportedVersion, "step 2")
}

func testDeleteRetain(t *testing.T, open Opener) {
	ctx := context.Background()
	s, raw := openRaw(t, open)
	for step := int64(1); step <= 7; step++ {
		SaveStep(t, s, "r", step, 2, 2, nil)
	}
	SaveStep(t, s, "other", 1, 2, 2, nil)
	// Step 4 loses a rank, step 6 is damaged, step 8 is being saved.
	if err := s.Delete(ctx, "r", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "r", 4, 0, State(0, 2, 2)); err != nil {
		t.Fatal(err)
	}
	raw.put("r", 6, 0, raw.get("r", 6, 0)[:10])
	if err := s.Save(ctx, "r", 8, 1, State(1, 2, 2)); err != nil {
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
	if steps, _ := ListSteps(t, s, "r"); len(steps) != 8 {
		t.Fatalf("Retain of more than there are deleted steps: %v", steps)
	}
	// The 3 newest complete steps are 7, 5 and 3: step 4 (incomplete, but
	// newer than 3) and step 6 (damaged) and step 8 stay; 1 and 2 go.
	if err := s.Retain(ctx, "r", 3); err != nil {
		t.Fatal(err)
	}
	steps, complete := ListSteps(t, s, "r")
	if !slices.Equal(steps, []int64{3, 4, 5, 6, 7, 8}) || !slices.Equal(complete, []bool{true, false, true, false, true, false}) {
		t.Fatalf("after Retain 3: steps %v complete %v", steps, complete)
	}
	if err := s.Retain(ctx, "r", 1); err != nil {
		t.Fatal(err)
	}
	if steps, _ := ListSteps(t, s, "r"); !slices.Equal(steps, []int64{7, 8}) {
		t.Fatalf("after Retain 1: steps %v", steps)
	}
	if steps, _ := ListSteps(t, s, "other"); !slices.Equal(steps, []int64{1}) {
		t.Fatalf("Retain of run r touched run other: %v", steps)
	}
}

// testConcurrentRanks saves steps from one goroutine per rank, as the ranks
// of a job would, and checks that every step ends complete: in a bucket
// store exactly one of the savers of a step must see all ranks and write the
// marker.
func testConcurrentRanks(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := openRaw(t, open)
	const world, steps = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, world)
	for r := range world {
		wg.Go(func() {
			for step := range int64(steps) {
				st := State(r, world, 2*world)
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
	if _, complete := ListSteps(t, s, "r"); !slices.Equal(complete, []bool{true, true, true, true}) {
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

func testClosed(t *testing.T, open Opener) {
	s, _ := openRaw(t, open)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Save(cancelled, "r", 1, 0, State(0, 1, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Save(ctx, "r", 1, 0, State(0, 1, 1)); !errors.Is(err, checkpoint.ErrClosed) {
		t.Fatalf("Save after Close: %v", err)
	}
	if _, err := s.Latest(ctx, "r"); !errors.Is(err, checkpoint.ErrClosed) {
		t.Fatalf("Latest after Close: %v", err)
	}
}

// testAbandon plays a job whose first start died while saving step 3 and
// whose second start resumes from step 2: without Abandon the new start's
// rank 1 would complete step 3 with the dead start's rank 0, cursors of two
// histories merged into one state.
func testAbandon(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _, _ := open(t)
	SaveStep(t, s, "r", 1, 2, 4, nil)
	SaveStep(t, s, "r", 2, 2, 4, nil)
	SaveStep(t, s, "other", 3, 2, 4, nil)
	dead := State(0, 2, 4)
	dead.Epoch = 3
	dead.Cursors[0].Rows = 111 // where the dead start had got to
	if err := s.Save(ctx, "r", 3, 0, dead); err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, "r", 0, -2); err == nil {
		t.Fatal("Abandon after step -2 was accepted")
	}
	if err := s.Abandon(ctx, "r", -1, 2); err == nil {
		t.Fatal("Abandon of rank -1 was accepted")
	}
	// The new start: each rank abandons what it left after step 2.
	for r := range 2 {
		if err := s.Abandon(ctx, "r", r, 2); err != nil {
			t.Fatal(err)
		}
	}
	fresh := State(1, 2, 4)
	fresh.Epoch = 3
	if err := s.Save(ctx, "r", 3, 1, fresh); err != nil {
		t.Fatal(err)
	}
	if step, err := s.Latest(ctx, "r"); err != nil || step != 2 {
		t.Fatalf("Latest = %d, %v: step 3 holds one rank of the new start and must not be complete", step, err)
	}
	if _, err := s.LoadStep(ctx, "r", 3); !errors.Is(err, checkpoint.ErrIncomplete) {
		t.Fatalf("LoadStep 3 = %v, want ErrIncomplete", err)
	}
	steps, complete := ListSteps(t, s, "r")
	if !slices.Equal(steps, []int64{1, 2, 3}) || !slices.Equal(complete, []bool{true, true, false}) {
		t.Fatalf("steps %v complete %v", steps, complete)
	}
	// A complete step after the resumed one (saved by a start that then
	// lost a later one) loses its marker and the rank's state; the steps
	// up to the resumed one and other runs stay.
	SaveStep(t, s, "r", 5, 2, 4, nil)
	if err := s.Abandon(ctx, "r", 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadStep(ctx, "r", 5); !errors.Is(err, checkpoint.ErrIncomplete) {
		t.Fatalf("LoadStep 5 after rank 1 abandoned it = %v, want ErrIncomplete", err)
	}
	if err := s.Abandon(ctx, "r", 0, -1); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int64{1, 2} {
		if _, err := s.Load(ctx, "r", step, 0); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("rank 0 of step %d after Abandon -1 = %v, want ErrNotFound", step, err)
		}
		if _, err := s.Load(ctx, "r", step, 1); err != nil {
			t.Fatalf("rank 1 of step %d: %v", step, err)
		}
	}
	if step, err := s.Latest(ctx, "other"); err != nil || step != 3 {
		t.Fatalf("Abandon of run r touched run other: Latest = %d, %v", step, err)
	}
}
