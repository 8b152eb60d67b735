// Package trips counts the round trips a set of requests waited: what a
// start costs at any latency, told apart from the machine's load.
package trips

import (
	"slices"
	"time"
)

// Span is when a request was sent and when it was answered.
type Span struct{ Sent, Answered time.Time }

// Count is the longest chain of spans each sent after the one before it
// in the chain was answered: the round trips the requests waited, one
// where they all went out together, n where each waited for the last.
func Count(spans []Span) int {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.Answered.Compare(b.Answered) })
	chain := make([]int, len(spans))
	most := 0
	for i, s := range spans {
		chain[i] = 1
		for j := range i {
			if !spans[j].Answered.After(s.Sent) {
				chain[i] = max(chain[i], chain[j]+1)
			}
		}
		most = max(most, chain[i])
	}
	return most
}
