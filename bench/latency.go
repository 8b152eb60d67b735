package main

import (
	"context"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// latencyBucket adds a fixed delay to every range read, as an object store
// far away would: the time to first byte, not a bandwidth limit. Listing and
// Stat pass through unchanged. A delay of zero adds nothing, so the same
// wrapper serves as its own 0 ms reference.
type latencyBucket struct {
	storage.Bucket
	delay time.Duration
}

func withLatency(b storage.Bucket, delay time.Duration) storage.Bucket {
	return &latencyBucket{Bucket: b, delay: delay}
}

// Scheme is not "file": the stream counts the delay as a distant store's,
// not as a local read's CPU time (a zero delay alike, so that the 0 ms
// reference is read as the delayed ones are).
func (l *latencyBucket) Scheme() string { return "latency" }

// ReadAt waits for the delay, or for ctx to end, then reads.
func (l *latencyBucket) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	if l.delay > 0 {
		t := time.NewTimer(l.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
	return l.Bucket.ReadAt(ctx, obj, p, off)
}
