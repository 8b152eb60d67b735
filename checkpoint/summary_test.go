package checkpoint

import (
	"crypto/md5"
	"encoding/binary"
	"reflect"
	"testing"
)

// FuzzDecodeSummary: a summary comes from a bucket; whatever its bytes, it
// decodes to one that fits its marker, or to none, never a panic.
func FuzzDecodeSummary(f *testing.F) {
	m := stepMarker{world: 2, incarnation: "start-1"}
	parts := []State{testState(0, 2, 8), testState(1, 2, 8)}
	for i := range parts {
		parts[i].Incarnation = m.incarnation
	}
	st, err := Merge(parts...)
	if err != nil {
		f.Fatal(err)
	}
	enc, err := Encode(st)
	if err != nil {
		f.Fatal(err)
	}
	good := append([]byte(summaryMagic), markerBytes(2, "start-1")...)
	good = binary.AppendUvarint(good, 2)
	for r := range 2 {
		sum := md5.Sum([]byte{byte(r)})
		good = append(binary.AppendUvarint(good, uint64(r)), sum[:]...)
	}
	good = append(good, enc...)
	if _, got, ok := decodeSummary(good, m); !ok || !reflect.DeepEqual(got, st) {
		f.Fatalf("a summary as summarize writes it decoded to %+v, %t", got, ok)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(summaryMagic + "2 start-1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sums, got, ok := decodeSummary(b, m)
		if !ok {
			return
		}
		if got.WorldSize != m.world || got.Incarnation != m.incarnation || len(sums) < m.world {
			t.Fatalf("accepted a summary of world %d, incarnation %q, %d ranks for marker %+v", got.WorldSize, got.Incarnation, len(sums), m)
		}
	})
}
