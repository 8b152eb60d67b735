package checkpoint

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// withPasses is st with its epochs read in passes passes, its fingerprint
// made again as a stream makes it.
func withPasses(st State, passes int) State {
	st.ShufflePasses = passes
	st.Fingerprint = st.OrderFingerprint()
	return st
}

// A state of several passes is written as version 5 and reads back
// whole; older payloads cannot hold the field; a state of one pass keeps
// the version and the fingerprint it had before passes were an option.
func TestShufflePassesVersions(t *testing.T) {
	one := testState(1, 2, 4)
	if withPasses(one, 0).Fingerprint != withPasses(one, 1).Fingerprint || withPasses(one, 1).Fingerprint != one.OrderFingerprint() {
		t.Fatal("one pass changed the fingerprint")
	}
	if withPasses(one, 4).Fingerprint == one.OrderFingerprint() {
		t.Fatal("the fingerprint does not cover ShufflePasses")
	}
	if b := mustEncode(t, withPasses(one, 1)); binary.BigEndian.Uint16(b[4:]) != 1 {
		t.Fatalf("a state of one pass is written as version %d, want 1", binary.BigEndian.Uint16(b[4:]))
	}
	for _, st := range []State{withPasses(one, 4), withPasses(withLeft(testState(0, 2, 4), 32, 7), 2)} {
		b := mustEncode(t, st)
		if v := binary.BigEndian.Uint16(b[4:]); v != 5 {
			t.Fatalf("a state of %d passes is written as version %d, want 5", st.ShufflePasses, v)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("round trip:\n%+v\n%+v", got, st)
		}
		p := b[frameHeader : len(b)-frameCRC]
		for _, v := range []uint16{1, 2, 3, 4} {
			if _, err := Decode(frame(v, p)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("v5 payload framed as v%d: %v", v, err)
			}
		}
	}
	if bad := withPasses(one, -1); bad.Validate() == nil {
		t.Fatal("negative passes accepted")
	}
}

// A state taken with 4 passes refuses to load where the dataset reads one,
// naming the field, and the other way round; 0 and 1 are the same order.
func TestShufflePassesSameOrder(t *testing.T) {
	four, one := withPasses(testState(0, 1, 2), 4), withPasses(testState(0, 1, 2), 1)
	for _, c := range [][2]State{{one, four}, {four, one}} {
		err := SameOrder(&c[0], &c[1])
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "field shuffle_passes") {
			t.Fatalf("dataset of %d passes, state of %d: %v", c[0].ShufflePasses, c[1].ShufflePasses, err)
		}
	}
	zero := withPasses(testState(0, 1, 2), 0)
	if err := SameOrder(&zero, &one); err != nil {
		t.Fatalf("0 and 1 pass: %v", err)
	}
}
