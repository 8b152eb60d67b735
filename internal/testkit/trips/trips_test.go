package trips

import (
	"testing"
	"time"
)

func TestCount(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(sent, answered int) Span {
		return Span{t0.Add(time.Duration(sent) * time.Millisecond), t0.Add(time.Duration(answered) * time.Millisecond)}
	}
	for _, tc := range []struct {
		spans []Span
		want  int
	}{
		{nil, 0},
		{[]Span{at(0, 20)}, 1},
		{[]Span{at(0, 20), at(1, 22)}, 1},              // together
		{[]Span{at(0, 20), at(21, 41)}, 2},             // one after the other
		{[]Span{at(21, 41), at(0, 20), at(42, 60)}, 3}, // in any order
		{[]Span{at(0, 20), at(5, 25), at(22, 40), at(26, 50)}, 2},
		{[]Span{at(0, 100), at(1, 10), at(11, 20), at(21, 30)}, 3}, // a long one beside a chain
	} {
		if got := Count(tc.spans); got != tc.want {
			t.Errorf("Count(%v) = %d, want %d", tc.spans, got, tc.want)
		}
	}
}
