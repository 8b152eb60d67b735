package engine

import (
	"slices"
	"testing"
)

// An order drawn early is used only for the row counts it was drawn for,
// and only once.
func TestEarlyOrderTake(t *testing.T) {
	done := make(chan struct{})
	close(done)
	drawn := []int32{2, 0, 1, 4, 3}
	e := &earlyOrder{segments: []int64{3, 2}, order: slices.Clone(drawn), done: done}
	if got := e.take([]int64{2, 3}); got != nil {
		t.Errorf("taken for other counts: %v", got)
	}
	if got := e.take([]int64{3, 2}); !slices.Equal(got, drawn) {
		t.Errorf("taken for its counts: %v, want %v", got, drawn)
	}
	if got := e.take([]int64{3, 2}); got != nil {
		t.Errorf("taken twice: %v", got)
	}
	var none *earlyOrder
	if none.take([]int64{1}) != nil {
		t.Error("a nil draw gave an order")
	}
	none.wait()
}
