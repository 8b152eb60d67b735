package checkpoint

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// atBoundary is rank's state after its loop ended epoch 3: epoch 4, every
// cursor at its start.
func atBoundary(rank, world, splits int) State {
	st := testState(rank, world, splits)
	st.Epoch = 4
	st.Next = 0
	clear(st.Cursors)
	return st
}

// TestMergeAcrossEpochs: ranks whose loops ended (at the start of epoch 4)
// merge with ranks still in epoch 3, each split keeping its rank's epoch
// and cursor; the merge round-trips as version 3 and merges again as it is.
func TestMergeAcrossEpochs(t *testing.T) {
	states := []State{testState(0, 4, 8), atBoundary(1, 4, 8), testState(2, 4, 8), atBoundary(3, 4, 8)}
	m, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 3 {
		t.Fatalf("merged epoch %d, want the least, 3", m.Epoch)
	}
	for s := range 8 {
		src := states[s%4]
		if m.SplitEpoch(s) != src.Epoch || m.Cursors[s] != src.Cursors[s] {
			t.Fatalf("split %d: epoch %d cursor %+v, want rank %d's %d %+v", s, m.SplitEpoch(s), m.Cursors[s], s%4, src.Epoch, src.Cursors[s])
		}
	}
	b := mustEncode(t, m)
	if v := binary.BigEndian.Uint16(b[4:]); v != 3 {
		t.Fatalf("a state with split epochs is written as version %d, want 3", v)
	}
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if again, err := Merge(got); err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("merge of the merge: %v", err)
	}
	// All ranks past the boundary: one epoch again, no split epochs.
	all, err := Merge(atBoundary(0, 2, 4), atBoundary(1, 2, 4))
	if err != nil || all.Epoch != 4 || all.Epochs != nil {
		t.Fatalf("merge at the boundary: epoch %d epochs %v, %v", all.Epoch, all.Epochs, err)
	}
	if v := binary.BigEndian.Uint16(mustEncode(t, all)[4:]); v != 1 {
		t.Fatalf("written as version %d, want 1", v)
	}
}

func TestEpochsValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		epochs []int64
		word   string
	}{
		"short":  {[]int64{3, 4}, "split epochs"},
		"before": {[]int64{3, 2, 3, 3}, "before the state's epoch"},
	} {
		st := testState(0, 1, 4)
		st.Rank = -1
		st.Epochs = tc.epochs
		if err := st.Validate(); err == nil || !strings.Contains(err.Error(), tc.word) {
			t.Errorf("%s: Validate gave %v", name, err)
		}
	}
	// A version 2 payload must not hold the fields of version 3.
	st := atBoundary(0, 1, 2)
	st.Incarnation = "job-7"
	v3 := mustEncode(t, st)
	if _, err := Decode(frame(2, v3[frameHeader:len(v3)-frameCRC])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v3 payload framed as v2: %v", err)
	}
	v1 := mustEncode(t, testState(0, 1, 2))
	if _, err := Decode(frame(3, v1[frameHeader:len(v1)-frameCRC])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v1 payload framed as v3: %v", err)
	}
}

func TestIncarnation(t *testing.T) {
	st := testState(1, 2, 4)
	st.Incarnation = "slurm-8812.0.r3"
	b := mustEncode(t, st)
	if v := binary.BigEndian.Uint16(b[4:]); v != 3 {
		t.Fatalf("a state with an incarnation is written as version %d", v)
	}
	if got, err := Decode(b); err != nil || got.Incarnation != st.Incarnation {
		t.Fatalf("round trip: %q, %v", got.Incarnation, err)
	}
	for _, bad := range []string{"two words", "tab\there", "nul\x00", "é", strings.Repeat("x", MaxIncarnation+1)} {
		st.Incarnation = bad
		if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "incarnation") {
			t.Errorf("incarnation %q: Validate gave %v", bad, err)
		}
	}
	a := testState(0, 2, 4)
	a.Incarnation = "a"
	b2 := testState(1, 2, 4)
	b2.Incarnation = "b"
	if _, err := Merge(a, b2); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "field incarnation") {
		t.Fatalf("merge of two incarnations: %v", err)
	}
}
