package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicedata/sluice/checkpoint"
)

// measureSaveLatency saves st as rank st.Rank of steps 0..n-1 of run, one
// at a time, and returns the median and 99th percentile of the time each
// Save took (nearest-rank percentiles). It deletes those steps afterwards,
// so run should be a name no job uses.
func measureSaveLatency(ctx context.Context, store checkpoint.Store, run string, n int, st checkpoint.State) (p50, p99 time.Duration, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("measure save latency: n %d must be at least 1", n)
	}
	took := make([]time.Duration, 0, n)
	defer func() {
		// Cleanup runs with its own context so that a cancelled measurement
		// does not leave its steps behind.
		clean := context.WithoutCancel(ctx)
		for step := range len(took) {
			err = errors.Join(err, store.Delete(clean, run, int64(step)))
		}
	}()
	for step := range n {
		start := time.Now()
		if err := store.Save(ctx, run, int64(step), st.Rank, st); err != nil {
			// The failed step may have been written partly; count it for
			// cleanup.
			took = append(took, 0)
			return 0, 0, err
		}
		took = append(took, time.Since(start))
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	return percentile(sorted, 50), percentile(sorted, 99), nil
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(i, 1)-1]
}
