package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

// TestMixStores runs the mix-state suite against a bucket store; package
// pebblestore runs it against its own.
func TestMixStores(t *testing.T) {
	storetest.Mix(t, func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
		return openBucketStore(t, memblob.OpenBucket(nil))
	})
}

func TestMixStateRoundTrip(t *testing.T) {
	st := storetest.MixState(1, 2, 6)
	b, err := checkpoint.EncodeMix(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.DecodeMix(b)
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, st)
	}
	// Every truncation and every flipped bit is refused as corrupt.
	for n := range len(b) {
		if _, err := checkpoint.DecodeMix(b[:n]); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range len(b) {
		c := bytes.Clone(b)
		c[i] ^= 1 << (i % 8)
		if _, err := checkpoint.DecodeMix(c); err == nil {
			t.Fatalf("bit flipped at byte %d: decoded", i)
		}
	}
	// A dataset's state is named as one.
	ds, err := checkpoint.Encode(storetest.State(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.DecodeMix(ds); !errors.Is(err, checkpoint.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("dataset's state")) {
		t.Fatalf("a dataset's state decoded as a mix's: %v", err)
	}
	// A newer format version is a VersionError, not damage.
	newer := mixFrame(checkpoint.MixStateVersion+1, []byte(`{}`))
	var ve *checkpoint.VersionError
	if _, err := checkpoint.DecodeMix(newer); !errors.As(err, &ve) {
		t.Fatalf("a newer version: %v", err)
	}
	// Payloads that are JSON but not a valid state are corrupt.
	for _, p := range []string{`{}`, `{"version":1}`, `[]`, `{"version":1,"bogus":2}`, `{"version":1,"fingerprint":"f","num_splits":2,"world_size":1,"rank":0,"cursors":[1,-2],"taken":[[0,0]]}`} {
		if _, err := checkpoint.DecodeMix(mixFrame(checkpoint.MixStateVersion, []byte(p))); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("payload %s: %v", p, err)
		}
	}
}

// mixFrame frames a payload as encode's comment spells it out.
func mixFrame(version uint16, payload []byte) []byte {
	b := []byte("SLMX")
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func TestMergeMix(t *testing.T) {
	a, b := storetest.MixState(0, 2, 4), storetest.MixState(1, 2, 4)
	m, err := checkpoint.MergeMix(b, a)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 4 {
		src := []checkpoint.MixState{a, b}[s%2]
		if m.Cursors[s] != src.Cursors[s] || m.Taken[1][s] != src.Taken[1][s] {
			t.Fatalf("split %d not taken from rank %d", s, s%2)
		}
	}
	if m.Rank != -1 || m.Next != 0 {
		t.Fatalf("merged rank %d next %d", m.Rank, m.Next)
	}
	other := b
	other.Fingerprint = "another"
	restarted := b
	restarted.Incarnation = "b"
	for name, states := range map[string][]checkpoint.MixState{
		"one missing":         {a},
		"twice":               {a, a},
		"another mix":         {a, other},
		"another incarnation": {a, restarted},
	} {
		if _, err := checkpoint.MergeMix(states...); !errors.Is(err, checkpoint.ErrMismatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMergeMixAcrossEpochs: a rank whose epoch ended (its state is at the
// start of the next) merges with one still in the last; each split keeps
// its rank's epoch, and the merge round-trips as a version 2 state.
func TestMergeMixAcrossEpochs(t *testing.T) {
	a, b := storetest.MixState(0, 2, 4), storetest.MixState(1, 2, 4)
	b.Epoch++
	for s := 1; s < 4; s += 2 {
		b.Cursors[s] = 0
	}
	m, err := checkpoint.MergeMix(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != a.Epoch || !reflect.DeepEqual(m.Epochs, []int64{a.Epoch, b.Epoch, a.Epoch, b.Epoch}) {
		t.Fatalf("merged epoch %d, epochs %v", m.Epoch, m.Epochs)
	}
	for s := range 4 {
		if m.SplitEpoch(s) != []checkpoint.MixState{a, b}[s%2].Epoch {
			t.Fatalf("split %d at epoch %d", s, m.SplitEpoch(s))
		}
	}
	enc, err := checkpoint.EncodeMix(m)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(enc[4:]); v != 2 {
		t.Fatalf("a mix state with split epochs is written as version %d", v)
	}
	got, err := checkpoint.DecodeMix(enc)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// Without epochs or an incarnation, version 1, which older builds read;
	// a version 1 payload with either is corrupt.
	plain, err := checkpoint.EncodeMix(a)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(plain[4:]); v != 1 {
		t.Fatalf("a plain mix state is written as version %d", v)
	}
	p := bytes.Replace(enc[10:len(enc)-4], []byte(`"version":2`), []byte(`"version":1`), 1)
	if _, err := checkpoint.DecodeMix(mixFrame(1, p)); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("version 1 with epochs: %v", err)
	}
	// Epochs that contradict the state are refused.
	bad := m.Clone()
	bad.Epochs[0] = m.Epoch - 1
	if err := bad.Validate(); err == nil {
		t.Fatal("a split before the state's epoch was accepted")
	}
}

func FuzzDecodeMix(f *testing.F) {
	b, err := checkpoint.EncodeMix(storetest.MixState(0, 1, 3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(mixFrame(checkpoint.MixStateVersion, []byte(`{"version":1,"num_splits":99999999}`)))
	f.Add([]byte("SLMX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := checkpoint.DecodeMix(b)
		if err != nil {
			return
		}
		// What decodes is valid and encodes back to what decodes the same.
		if err := st.Validate(); err != nil {
			t.Fatalf("decoded an invalid state: %v", err)
		}
		again, err := checkpoint.EncodeMix(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := checkpoint.DecodeMix(again)
		if err != nil || !reflect.DeepEqual(st, st2) {
			t.Fatalf("re-encoded state decodes to %+v, %v", st2, err)
		}
	})
}

// A mix state's round-robin position is past the splits its rank owns:
// refused, as a dataset's state is.
func TestMixNextPastOwnedSplits(t *testing.T) {
	st := storetest.MixState(1, 2, 4)
	st.Next = 2
	if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "next") {
		t.Errorf("next 2 of rank 1's 2 splits: %v, want an error naming next", err)
	}
	st.Next = 1
	if err := st.Validate(); err != nil {
		t.Errorf("next 1 of rank 1's 2 splits: %v", err)
	}
}
