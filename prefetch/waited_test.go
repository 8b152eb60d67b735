package prefetch

import (
	"context"
	"testing"
)

// TestWaited checks that Waited is true for the item the consumer takes
// next and false for the items after it, and that it follows the consumer
// while an item is in Fn.
func TestWaited(t *testing.T) {
	first := make(chan struct{})  // item 1 has looked
	taken0 := make(chan struct{}) // the consumer has item 0
	var w0, w1Before, w1After bool
	st := Stage[int, int]{
		Concurrency: 2,
		Waited:      true,
		Fn: func(ctx context.Context, i int) (int, error) {
			switch i {
			case 0:
				w0 = Waited(ctx)
				<-first
			case 1:
				w1Before = Waited(ctx)
				close(first)
				<-taken0
				w1After = Waited(ctx)
			}
			return i, nil
		},
	}
	var got []int
	for v, err := range Map(context.Background(), FromSeq(func(yield func(int) bool) {
		for i := range 2 {
			if !yield(i) {
				return
			}
		}
	}), st) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
		if v == 0 {
			close(taken0)
		}
	}
	if len(got) != 2 {
		t.Fatalf("got %v, want [0 1]", got)
	}
	if !w0 {
		t.Error("item 0, the consumer's next, was not waited for")
	}
	if w1Before {
		t.Error("item 1 was waited for before item 0 was taken")
	}
	if !w1After {
		t.Error("item 1 was not waited for once item 0 was taken")
	}
}

// TestWaitedOff checks that Waited is false without Stage.Waited and
// outside any stage.
func TestWaitedOff(t *testing.T) {
	if Waited(context.Background()) {
		t.Error("Waited true outside a stage")
	}
	seen := false
	for _, err := range Map(context.Background(), FromSeq(func(yield func(int) bool) { yield(0) }), Stage[int, int]{
		Fn: func(ctx context.Context, i int) (int, error) {
			seen = Waited(ctx)
			return i, nil
		},
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen {
		t.Error("Waited true for a stage without Stage.Waited")
	}
}
