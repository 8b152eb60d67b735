package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicedata/sluice/formats"
)

func sampleObject() *Object {
	return &Object{Version: Version, Plan: "p", Columns: []string{"a"}, ChunkBytes: 1 << 20, ShuffleWindow: 64, Asked: "columns null",
		Files: []File{
			{URL: "file:///a", Size: 10, Rows: 3, Inspected: 3, Footer: "d", SchemaOf: "file:///a", Units: []formats.Unit{{Rows: 1, Bytes: 5, Offset: 4, Decoded: 8, Paged: true}, {Rows: 2, Bytes: 1 << 40, Offset: -1, Decoded: 0}}, hasUnits: true},
			{URL: "file:///b", Size: 4, Rows: 0, Footer: "e", SchemaOf: "file:///a", Units: []formats.Unit{}, hasUnits: true},
		},
		Cache: []CacheEntry{{Key: []byte("k"), Value: []byte{0, 1, 2}}, {Key: []byte("k2"), Value: []byte{}}}}
}

// The binary object gives back every field it was made of.
func TestObjectRoundTrip(t *testing.T) {
	sp := sampleObject()
	raw, err := sp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Object
	if err := got.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	sp.byURL = map[string]int{"file:///a": 0, "file:///b": 1}
	if !reflect.DeepEqual(&got, sp) {
		t.Fatalf("got %+v\nwant %+v", got, *sp)
	}
	// Every truncation is refused as corrupt, never a panic.
	for n := range len(raw) {
		if err := new(Object).UnmarshalBinary(raw[:n]); err == nil {
			t.Fatalf("the object cut to %d of %d bytes was accepted", n, len(raw))
		}
	}
}

// footerDigest is the text it always hashed: plan objects written by
// earlier builds keep their digests, which a rank compares with its own.
func TestFooterDigestText(t *testing.T) {
	f := &formats.Fragment{Format: "parquet", Size: 1234, Rows: 30, Units: []formats.Unit{{Rows: 10, Bytes: 100, Offset: 4, Paged: true}, {Rows: 20, Bytes: -1, Offset: 0}}}
	h := sha256.New()
	fmt.Fprintf(h, "%s %d %d\n", f.Format, f.Size, f.Rows)
	for _, u := range f.Units {
		fmt.Fprintf(h, "u %d %d %d %v\n", u.Rows, u.Bytes, u.Offset, u.Paged)
	}
	if want := hex.EncodeToString(h.Sum(nil)[:16]); footerDigest(f) != want {
		t.Fatalf("digest %s, want %s", footerDigest(f), want)
	}
}
