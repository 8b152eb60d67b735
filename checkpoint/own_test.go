package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// many is a split count past sparseSplits: a rank's state of it is
// written with its own splits' entries only.
const many = 2 * sparseSplits

// sparseStates are rank states of many splits, one of each kind a
// version 6 payload must hold: plain, with skipped rows, with splits in a
// later epoch and an incarnation, counting batches left, of several
// passes, and one rank of a world that owns one split.
func sparseStates() map[string]State {
	skipped := withSkipped(3, 8, many)
	later := testState(5, 8, many)
	epochs := make([]int64, many)
	for s := range epochs {
		epochs[s] = later.Epoch
		if s%16 == 5 {
			epochs[s] = later.Epoch + 2
		}
	}
	later.SetEpochs(epochs)
	later.Incarnation = "start-2"
	one := testState(many-1, many, many)
	one.Next = 0
	return map[string]State{
		"rank":           testState(1, 4, many),
		"skipped":        skipped,
		"epochs":         later,
		"batches left":   withLeft(testState(0, 2, many), 64, 11),
		"passes":         withPasses(withSkipped(2, 4, many), 3),
		"one split each": one,
	}
}

// A rank's state of more than sparseSplits splits is written as version 6,
// holding its own splits' entries only, and reads back whole: the other
// splits' entries are as a rank's dataset leaves them.
func TestEncodeSparse(t *testing.T) {
	for name, st := range sparseStates() {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, st)
			if v := binary.BigEndian.Uint16(b[4:]); v != 6 {
				t.Fatalf("written as version %d, want 6", v)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, st) {
				t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, st)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, b) {
				t.Fatal("re-encoding a decoded state gave other bytes")
			}
			// The dense form writes the other splits' entries too: a zero
			// cursor is 4 bytes of it.
			var dense bytes.Buffer
			lists := own{cursors: st.Cursors, skipped: st.Skipped}
			if st.hasEpochs() {
				lists.epochs = st.Epochs
			}
			if err := encodePayload(&dense, &st, &lists, 5); err != nil {
				t.Fatal(err)
			}
			others := st.NumSplits - st.owned()
			if saved := dense.Len() - (len(b) - frameHeader - frameCRC); saved < 4*others {
				t.Fatalf("version 6 saves %d bytes of the dense payload's %d, want 4 for each of %d other splits", saved, dense.Len(), others)
			}
			// decodeOwn reads the own entries as Merge takes them apart.
			o, err := decodeOwn(b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := st.own()
			if err != nil {
				t.Fatal(err)
			}
			want.head.Version = StateVersion
			if !reflect.DeepEqual(o, want) {
				t.Fatalf("decodeOwn:\n got %+v\nwant %+v", o, want)
			}
		})
	}
}

// Below sparseSplits, and for what a version 6 payload cannot say, the
// older versions are written as before: a state builds before version 6
// read, and nothing lost.
func TestEncodeDenseWhereSparseCannotHold(t *testing.T) {
	other := testState(1, 4, many)
	other.Cursors[2] = Cursor{Window: 1, Offset: 3, Rows: 9} // another rank's split
	otherSkipped := withSkipped(1, 4, many)
	otherSkipped.Skipped[0] = 5
	merged, err := Merge(testState(0, 2, many), testState(1, 2, many))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		st      State
		version uint16
	}{
		"at sparseSplits":          {testState(1, 4, sparseSplits), 1},
		"whole job":                {testState(0, 1, many), 1},
		"merged":                   {merged, 1},
		"another split's cursor":   {other, 1},
		"another split's skipped":  {otherSkipped, 2},
		"passes at sparseSplits":   {withPasses(testState(1, 4, sparseSplits), 2), 5},
		"skipped at sparseSplits":  {withSkipped(1, 4, sparseSplits), 2},
		"left at sparseSplits":     {withLeft(testState(1, 4, sparseSplits), 8, 1), 4},
		"one rank of sparseSplits": {testState(sparseSplits-1, sparseSplits, sparseSplits), 1},
	} {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, tc.st)
			if v := binary.BigEndian.Uint16(b[4:]); v != tc.version {
				t.Fatalf("written as version %d, want %d", v, tc.version)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.st) {
				t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, tc.st)
			}
			// decodeOwn takes an older version apart as Merge does.
			o, err := decodeOwn(b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tc.st.own()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o, want) {
				t.Fatalf("decodeOwn:\n got %+v\nwant %+v", o, want)
			}
		})
	}
}

// A version 6 payload whose lists do not fit the splits its state speaks
// for is refused as corrupt, by Decode and by a store's reading alike.
func TestDecodeSparseRefusesBadLists(t *testing.T) {
	st := withSkipped(1, 4, many) // 128 own splits
	arr := func(n int, elem ...byte) []byte {
		b := []byte{0xdc, byte(n >> 8), byte(n)}
		for range n {
			b = append(b, elem...)
		}
		return b
	}
	cursor := []byte{0x93, 1, 2, 3}
	for name, tc := range map[string]struct {
		over map[string][]byte
		want string
	}{
		"a cursor per split":     {map[string][]byte{"cursors": arr(many, cursor...)}, "512 cursors for the 128 splits it speaks for"},
		"a cursor short":         {map[string][]byte{"cursors": arr(127, cursor...)}, "127 cursors for the 128 splits"},
		"skipped per split":      {map[string][]byte{"skipped": arr(many, 1)}, "512 skipped counts for the 128 splits"},
		"epochs short":           {map[string][]byte{"epochs": arr(3, 9)}, "3 split epochs for the 128 splits"},
		"negative own cursor":    {map[string][]byte{"cursors": append(arr(128, cursor...)[:3+127*4], 0x93, 0, 0xff, 0)}, "cursor 509 is negative"},
		"epoch before the state": {map[string][]byte{"epochs": arr(128, 1)}, "split 1 is at epoch 1, before the state's epoch 3"},
		"rank outside its world": {map[string][]byte{"rank": {9}}, "rank 9 is outside world_size 4"},
	} {
		t.Run(name, func(t *testing.T) {
			over := map[string]func(*msgpack.Encoder){}
			for k, raw := range tc.over {
				over[k] = func(e *msgpack.Encoder) { _ = e.Encode(msgpack.RawMessage(raw)) }
			}
			b := frame(6, v1Payload(t, st, over, -1))
			if got, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode gave %+v, %v; want ErrCorrupt saying %q", got, err, tc.want)
			}
			if got, err := decodeOwn(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decodeOwn gave %+v, %v; want ErrCorrupt saying %q", got, err, tc.want)
			}
		})
	}
	// Unmodified, the helper's payload decodes: the cases above fail for
	// their own reasons.
	if b := mustEncode(t, st); binary.BigEndian.Uint16(b[4:]) != 6 {
		t.Fatalf("the state is written as version %d, not 6", binary.BigEndian.Uint16(b[4:]))
	}
	if _, err := Decode(frame(6, v1Payload(t, st, nil, -1))); err != nil {
		t.Fatalf("unmodified payload: %v", err)
	}
}

// Merge reads only each state's own splits: another split's entry, which
// no reader uses, neither fails it nor reaches the merge.
func TestMergeReadsOwnSplitsOnly(t *testing.T) {
	states := []State{testState(0, 2, 8), testState(1, 2, 8)}
	want, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	states[0].Cursors[1] = Cursor{Window: -1} // rank 1's split, in rank 0's state
	states[1].Cursors[0] = Cursor{Window: 70, Offset: 1, Rows: 1}
	got, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge took another rank's entry:\n got %+v\nwant %+v", got, want)
	}
	// Its own entries are checked as Validate checks them.
	states[1].Cursors[3].Rows = -1
	if _, err := Merge(states...); err == nil || !strings.Contains(err.Error(), "cursor 3 is negative") {
		t.Fatalf("merge of a negative own cursor: %v", err)
	}
}

// MergeEncoded merges encoded states, of any version, as Merge merges them
// decoded, and names a state that does not decode by its index.
func TestMergeEncoded(t *testing.T) {
	states := []State{withSkipped(0, 4, many), testState(1, 4, many), withSkipped(2, 4, many), testState(3, 4, many)}
	states[3].Cursors[1] = Cursor{Window: 2} // another rank's split: written dense (version 1)
	want, err := Merge(states...)
	if err != nil {
		t.Fatal(err)
	}
	enc := make([][]byte, len(states))
	for i, st := range states {
		enc[i] = mustEncode(t, st)
	}
	if v := binary.BigEndian.Uint16(enc[3][4:]); v != 1 {
		t.Fatalf("rank 3 written as version %d, want the dense 1", v)
	}
	got, err := MergeEncoded(enc...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MergeEncoded:\n got %+v\nwant %+v", got, want)
	}
	enc[2] = enc[2][:len(enc[2])-1]
	if _, err := MergeEncoded(enc...); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checkpoint: state 2 of 4: corrupt state: truncated") {
		t.Fatalf("MergeEncoded of a truncated state: %v", err)
	}
	if _, err := MergeEncoded(enc[:1]...); !errors.Is(err, ErrMismatch) {
		t.Fatalf("MergeEncoded of one rank of four: %v", err)
	}
}
