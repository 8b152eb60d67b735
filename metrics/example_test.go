package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicedata/sluice/metrics"
)

// A health line every ten seconds: rows/s over the last ten seconds rather than since the start,
// so a slowdown late in a long run shows at once; the diagnosis and stall cover the Pipeline's
// window, whatever the interval.
func ExampleSnapshot_Since() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := metrics.New() // in a real program, the stream's Pipeline

	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	prev := p.Snapshot()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := p.Snapshot()
			window := now.Since(prev)
			slog.Info("sluice health", "line", window.String(), "diagnosis", window.Diagnosis())
			prev = now
		}
	}
}

func ExampleSnapshot_String() {
	s := metrics.Snapshot{
		ElapsedSeconds:        2,
		RawQueueItems:         8,
		RawQueueCapacity:      8,
		RawQueueBytes:         64e6,
		PrefetchQueueCapacity: 4,
		ConsumedRows:          4096,
		ConsumedBatches:       4,
		FetchSeconds:          0.9,
		TransformSeconds:      3.8,
		ConsumerWaitSeconds:   1.2,
		ReadBytes:             70e6,
		ReadRequests:          9,
		Recent: metrics.Recent{
			Seconds:             10,
			RawQueueItems:       7.6,
			PrefetchQueueItems:  0.3,
			ConsumerWaitSeconds: 6,
			ConsumedBatches:     20,
			TransformSeconds:    19,
		},
		DataStallFraction: 0.6,
		RowsPerSecond:     2048,
	}
	fmt.Println(s)
	// Output: transform-bound: 2048 rows/s, stall 60.0%, raw 7.6/8 (64.0 MB), prefetch 0.3/4 (0.0 MB), fetch 0.9s, transform 3.8s, read 70.0 MB in 9 requests, 0 rows unscanned
}
