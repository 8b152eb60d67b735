package prefetch

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkMap measures what a stage costs per item beyond Fn itself: Fn does next to nothing,
// so ns/op is the handing of one item from upstream to a worker to the consumer.
func BenchmarkMap(b *testing.B) {
	for _, tc := range []struct{ concurrency, ahead int }{{1, 0}, {4, 0}, {4, 64}} {
		b.Run(fmt.Sprintf("concurrency=%d/ahead=%d", tc.concurrency, effectiveAhead(tc.concurrency, tc.ahead)), func(b *testing.B) {
			st := Stage[int, int]{
				Concurrency: tc.concurrency,
				Ahead:       tc.ahead,
				Fn:          func(_ context.Context, i int) (int, error) { return i + 1, nil },
			}
			src := func(yield func(int, error) bool) {
				for i := range b.N {
					if !yield(i, nil) {
						return
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for v, err := range Map(context.Background(), src, st) {
				if err != nil || v != n+1 {
					b.Fatalf("got (%d, %v) at %d", v, err, n)
				}
				n++
			}
			if n != b.N {
				b.Fatalf("got %d items, want %d", n, b.N)
			}
		})
	}
}
