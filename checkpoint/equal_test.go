package checkpoint

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// withLeft is st counting left batches of batchSize rows, as a rank with
// equal batches saves it.
func withLeft(st State, batchSize int, left int64) State {
	st.BatchSize, st.BatchesLeft = batchSize, left
	return st
}

func TestEqualBatchesVersions(t *testing.T) {
	for _, st := range []State{withLeft(testState(1, 2, 4), 32, 17), withLeft(withSkipped(1, 2, 4), 32, 0)} {
		b := mustEncode(t, st)
		if v := binary.BigEndian.Uint16(b[4:]); v != 4 {
			t.Fatalf("a state counting batches left is written as version %d, want 4", v)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("round trip:\n%+v\n%+v", got, st)
		}
		// A version 4 payload must hold the counts; older ones must not.
		p := b[frameHeader : len(b)-frameCRC]
		for _, v := range []uint16{1, 2, 3} {
			if _, err := Decode(frame(v, p)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("v3 payload framed as v%d: %v", v, err)
			}
		}
	}
	v2 := mustEncode(t, withSkipped(1, 2, 4))
	if _, err := Decode(frame(4, v2[frameHeader:len(v2)-frameCRC])); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 4 has 20") {
		t.Fatalf("v2 payload framed as v4: %v", err)
	}
	for name, st := range map[string]State{
		"negative size": withLeft(testState(0, 1, 2), -1, 0),
		"negative left": withLeft(testState(0, 1, 2), 8, -2),
		"left, no size": withLeft(testState(0, 1, 2), 0, 5),
	} {
		if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "batches_left") {
			t.Errorf("%s: Validate gave %v", name, err)
		}
	}
}

// Ranks with equal batches step together: their states of one step and
// epoch have the same count left, and a merge of counts that differ there is
// refused as states of different steps. Ranks at an epoch's boundary (one
// still in the last, one in the next) count different epochs and merge. A
// merge carries no count: its cursors give every rank's.
func TestMergeEqualBatches(t *testing.T) {
	a, b := withLeft(testState(0, 2, 4), 16, 5), withLeft(testState(1, 2, 4), 16, 5)
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.BatchesLeft != 0 || m.BatchSize != 0 {
		t.Fatalf("merged state counts %d batches of %d left", m.BatchesLeft, m.BatchSize)
	}
	for _, c := range []State{withLeft(testState(1, 2, 4), 16, 4), withLeft(testState(1, 2, 4), 8, 5), testState(1, 2, 4)} {
		if _, err := Merge(a, c); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "batches_left") {
			t.Errorf("merge with %d of %d left: %v", c.BatchesLeft, c.BatchSize, err)
		}
	}
	if _, err := Merge(withLeft(testState(0, 2, 4), 16, 0), withLeft(atBoundary(1, 2, 4), 16, 9)); err != nil {
		t.Errorf("merge at an epoch's boundary: %v", err)
	}
}
