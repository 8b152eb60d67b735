package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
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
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, sc := range []*arrow.Schema{nil, schema} {
		f := &formats.Fragment{Format: "parquet", Size: 1234, Rows: 30, Schema: sc, Units: []formats.Unit{{Rows: 10, Bytes: 100, Offset: 4, Paged: true}, {Rows: 20, Bytes: -1, Offset: 0}}}
		h := sha256.New()
		fmt.Fprintf(h, "%s %d %d\n", f.Format, f.Size, f.Rows)
		for _, u := range f.Units {
			fmt.Fprintf(h, "u %d %d %d %v\n", u.Rows, u.Bytes, u.Offset, u.Paged)
		}
		text := ""
		if sc != nil {
			text = sc.String()
			fmt.Fprintln(h, text)
		}
		if want, got := hex.EncodeToString(h.Sum(nil)[:16]), footerDigest(f, text); got != want {
			t.Fatalf("digest %s, want %s", got, want)
		}
	}
}

// planHash is the text it always hashed: a plan's fingerprint is in every
// state saved of it, and a state resumes only where it is the same.
func TestPlanHashText(t *testing.T) {
	data := &formats.Scan{Fragments: []*formats.Fragment{{Rel: "a/p\"q.parquet", Size: 99, Rows: 7}, {Rel: "b", Size: 1, Rows: -1}}}
	chunks := []split.Chunk{{Fragment: 0, Start: 0, End: 3}, {Fragment: 0, Start: 3, End: 7, Paged: true}, {Fragment: 1, Start: -1, End: -1, FirstUnit: 2, EndUnit: 5}}
	h := sha256.New()
	for _, f := range data.Fragments {
		fmt.Fprintf(h, "f %q %d %d\n", f.Rel, f.Size, f.Rows)
	}
	fmt.Fprintf(h, "c %d %d %d\n", 0, 0, 3)
	fmt.Fprintf(h, "p %d %d %d\n", 0, 3, 7)
	fmt.Fprintf(h, "u %d %d %d\n", 1, 2, 5)
	if want, got := hex.EncodeToString(h.Sum(nil)[:16]), planHash(data, chunks, nil, nil); got != want {
		t.Fatalf("fingerprint %s, want %s", got, want)
	}
}
