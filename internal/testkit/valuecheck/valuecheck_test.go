package valuecheck

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Text is valid UTF-8 of 0 to 200 bytes, and differs between neighbours.
func TestText(t *testing.T) {
	lens := map[int]bool{}
	for id := range int64(5000) {
		s := Text(id)
		if !utf8.ValidString(s) || len(s) > 200 {
			t.Fatalf("Text(%d) = %q: %d bytes, valid %v", id, s, len(s), utf8.ValidString(s))
		}
		lens[len(s)] = true
		if id > 0 && len(s) > 4 && s == Text(id-1) {
			t.Fatalf("Text(%d) == Text(%d)", id, id-1)
		}
	}
	if len(lens) < 150 {
		t.Fatalf("only %d lengths", len(lens))
	}
}

// A record built from the columns passes Batch; the same record with one
// value changed, two rows swapped, or a column missing does not.
func TestBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := Record(mem, All, 100, 300)
	defer rec.Release()
	ids, err := Batch(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 300 || ids[0] != 100 || ids[299] != 399 {
		t.Fatalf("ids %d..%d of %d", ids[0], ids[len(ids)-1], len(ids))
	}
	// Every column's values against the neighbouring row's: each column
	// must tell rows apart somewhere, or it checks nothing.
	for c, col := range All {
		if c == 0 {
			continue
		}
		other := Record(mem, []Column{All[0], col}, 101, 300)
		shifted := array.NewRecordBatch(Schema([]Column{All[0], col}), []arrow.Array{rec.Column(0), other.Column(1)}, 300)
		var m *Mismatch
		if _, err := Batch(shifted, nil); !errors.As(err, &m) || m.Column != col.Name {
			t.Errorf("column %s: values of the next row passed (%v)", col.Name, err)
		}
		shifted.Release()
		other.Release()
	}
	if _, err := Batch(rec, []string{"id", "i8"}); err == nil {
		t.Fatal("a batch with other columns than wanted passed")
	}
	// Once: every wanted id once, no other.
	o := NewOnce()
	o.Add([]int64{1, 2, 3})
	if err := o.Exactly([]int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	o.Add([]int64{2})
	if err := o.Exactly([]int64{1, 2, 3}); err == nil {
		t.Fatal("an id twice passed")
	}
	if err := NewOnce().Exactly([]int64{1}); err == nil {
		t.Fatal("a missing id passed")
	}
}
