package split

import (
	"errors"
	"testing"

	"github.com/sluicedata/sluice/permutation"
)

// Storage-order reads cut a paged chunk at twice the window; a cursor
// counted in the windows of the cut at the window (a state taken before)
// is rebased to the same row, and every other cursor is left for
// CheckCursor.
func TestRebaseOldWindows(t *testing.T) {
	// A paged chunk of 100,000 rows, an unpaged one of 3,000 after it.
	chunks := []Chunk{
		{Fragment: 0, Start: 0, End: 100_000, FirstUnit: 0, EndUnit: 1, Paged: true},
		{Fragment: 1, Start: 0, End: 3000, FirstUnit: 0, EndUnit: 1},
	}
	o := permutation.Order{ShuffleWindow: 4096, NumSplits: 1}
	ep, err := NewEpoch(chunks, o, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 13 windows of 7,692-7,693 rows (at most twice 4,096), then the
	// unpaged chunk's.
	if got := len(ep.Windows[0]); got != 14 {
		t.Fatalf("%d windows in storage order, want 13 of the paged chunk and 1", got)
	}
	for _, w := range ep.Windows[0][:13] {
		if w.Rows > 2*4096 || w.Rows < 7692 {
			t.Fatalf("window %+v of the paged chunk, want 7,692-7,693 rows", w)
		}
	}
	// The old windows: 25 of 4,000 rows, then the unpaged chunk's.
	for _, c := range []struct {
		old, want Cursor
	}{
		{Cursor{Window: 2, Offset: 1000, Rows: 9000}, Cursor{Window: 1, Offset: 9000 - 7693, Rows: 9000}},
		{Cursor{Window: 1, Offset: 0, Rows: 4000}, Cursor{Window: 0, Offset: 4000, Rows: 4000}},
		{Cursor{Window: 25, Offset: 10, Rows: 100_010}, Cursor{Window: 13, Offset: 10, Rows: 100_010}},
		{Cursor{Window: 26, Offset: 0, Rows: 103_000}, Cursor{Window: 14, Offset: 0, Rows: 103_000}},
	} {
		if err := ep.CheckCursor(0, c.old); err == nil {
			t.Fatalf("old cursor %+v fits the new windows: the case tests nothing", c.old)
		}
		got := ep.Rebase(chunks, 0, c.old)
		if got != c.want {
			t.Fatalf("Rebase(%+v) = %+v, want %+v", c.old, got, c.want)
		}
		if err := ep.CheckCursor(0, got); err != nil {
			t.Fatalf("rebased cursor %+v: %v", got, err)
		}
	}
	// Cursors of neither layout, and any cursor of a shuffled order, stay
	// as they are.
	for _, c := range []Cursor{
		{Window: 2, Offset: 1 << 40, Rows: 9000},
		{Window: 2, Offset: 1000, Rows: 9001},
		{Window: 27, Offset: 0, Rows: 103_000},
		{Window: 1, Offset: 0, Rows: 7693}, // fits the new windows
	} {
		if got := ep.Rebase(chunks, 0, c); got != c {
			t.Fatalf("Rebase(%+v) = %+v, want it unchanged", c, got)
		}
	}
	o.Shuffle = true
	sh, err := NewEpoch(chunks, o, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := Cursor{Window: 2, Offset: 1 << 40, Rows: 9000}
	if got := sh.Rebase(chunks, 0, bad); got != bad {
		t.Fatalf("a shuffled order's cursor was rebased to %+v", got)
	}
	if err := sh.CheckCursor(0, bad); !errors.Is(err, ErrCursor) {
		t.Fatalf("a shuffled cursor past its window: %v", err)
	}
}
