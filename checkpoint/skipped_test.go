package checkpoint

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// withSkipped is testState with skipped counts on the splits rank owns.
func withSkipped(rank, world, splits int) State {
	st := testState(rank, world, splits)
	st.Skipped = make([]int64, splits)
	for s := range st.Skipped {
		if st.Owns(s) {
			st.Skipped[s] = int64(10*s + 3)
		}
	}
	return st
}

func TestSkippedVersions(t *testing.T) {
	st := withSkipped(1, 2, 4)
	b := mustEncode(t, st)
	if v := binary.BigEndian.Uint16(b[4:]); v != 2 {
		t.Fatalf("a state with skipped rows is written as version %d, want 2", v)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip:\n%+v\n%+v", got, st)
	}
	if got.TotalSkipped() != 13+33 {
		t.Fatalf("TotalSkipped %d, want 46", got.TotalSkipped())
	}

	// No skipped rows, or only zeros: version 1, which older builds read,
	// and reading it back gives no counts.
	for _, sk := range [][]int64{nil, make([]int64, 4)} {
		plain := testState(1, 2, 4)
		plain.Skipped = sk
		b := mustEncode(t, plain)
		if v := binary.BigEndian.Uint16(b[4:]); v != 1 {
			t.Fatalf("skipped %v: written as version %d, want 1", sk, v)
		}
		got, err := Decode(b)
		if err != nil || got.Skipped != nil || got.TotalSkipped() != 0 {
			t.Fatalf("skipped %v: got %v, %v", sk, got.Skipped, err)
		}
	}

	// A version 2 payload must hold "skipped"; a version 1 payload must not.
	v1 := mustEncode(t, testState(1, 2, 4))
	p := v1[frameHeader : len(v1)-frameCRC]
	if _, err := Decode(frame(2, p)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 2 has 16") {
		t.Fatalf("v1 payload framed as v2: %v", err)
	}
	v2 := mustEncode(t, st)
	if _, err := Decode(frame(1, v2[frameHeader:len(v2)-frameCRC])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v2 payload framed as v1: %v", err)
	}
}

func TestSkippedValidate(t *testing.T) {
	for name, sk := range map[string][]int64{
		"short":    {1, 2},
		"negative": {0, -1, 0, 0},
	} {
		st := testState(0, 1, 4)
		st.Skipped = sk
		if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "skipped") {
			t.Errorf("%s: Validate gave %v", name, err)
		}
		if _, err := Encode(st); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
}

// TestSkippedMerge checks that merging takes each split's count from its
// owner, and that a merged state gives every rank of another world size
// the counts of its own splits.
func TestSkippedMerge(t *testing.T) {
	var states []State
	for r := range 4 {
		st := withSkipped(r, 4, 8)
		// A count a rank holds for a split it does not own (split r+1 is
		// rank r+1's) is not its to give: merging ignores it.
		st.Skipped[(r+1)%8] = 999
		states = append(states, st)
	}
	m, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 8)
	var total int64
	for s := range want {
		want[s] = int64(10*s + 3)
		total += want[s]
	}
	if !reflect.DeepEqual(m.Skipped, want) || m.TotalSkipped() != total {
		t.Fatalf("merged %v (total %d), want %v (%d)", m.Skipped, m.TotalSkipped(), want, total)
	}
	again, err := Decode(mustEncode(t, m))
	if err != nil || !reflect.DeepEqual(again.Skipped, want) {
		t.Fatalf("merged state round trip: %v, %v", again.Skipped, err)
	}
	// Ranks that never skipped merge to none.
	m, err = Merge(testState(0, 2, 4), testState(1, 2, 4))
	if err != nil || m.Skipped != nil {
		t.Fatalf("merge without skips: %v, %v", m.Skipped, err)
	}
}
