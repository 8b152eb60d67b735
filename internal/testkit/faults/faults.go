// Package faults wraps a storage bucket to inject the failures object stores
// have, for the tests and benchmarks that show what retries and prefetching
// hide. It is plumbing, not API: a user's program has no use for faults.
package faults

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Faults wraps a bucket and injects the failures object stores have: added
// latency, transient errors and truncated bodies, at seeded random. For
// tests and benchmarks of what retries and prefetching hide.
type Faults struct {
	storage.Bucket
	// Latency is added to every request.
	Latency time.Duration
	// ErrorRate is the fraction of requests that fail with a transient
	// error (wrapping storage.ErrTransient) before reaching the bucket.
	ErrorRate float64
	// TruncateRate is the fraction of range reads that deliver only part of
	// their bytes and end with io.ErrUnexpectedEOF, like a dropped body.
	TruncateRate float64

	mu       sync.Mutex
	r        *rand.Rand
	injected int
}

// New wraps b with the given seed; set the fields to choose faults.
func New(b storage.Bucket, seed uint64) *Faults {
	return &Faults{Bucket: b, r: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// Injected is the number of errors and truncations injected so far.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// roll draws whether a fault of the given rate happens.
func (f *Faults) roll(rate float64) bool {
	if rate <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	hit := f.r.Float64() < rate
	if hit {
		f.injected++
	}
	return hit
}

func (f *Faults) wait(ctx context.Context) error {
	if f.Latency <= 0 {
		return nil
	}
	select {
	case <-time.After(f.Latency):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Faults) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	if err := f.wait(ctx); err != nil {
		return 0, err
	}
	if f.roll(f.ErrorRate) {
		return 0, fmt.Errorf("injected fault reading %s at %d: %w", obj.Key, off, storage.ErrTransient)
	}
	if len(p) > 1 && f.roll(f.TruncateRate) {
		n, err := f.Bucket.ReadAt(ctx, obj, p[:len(p)/2], off)
		if err != nil {
			return n, err
		}
		return n, fmt.Errorf("injected short body reading %s at %d: %w", obj.Key, off, io.ErrUnexpectedEOF)
	}
	return f.Bucket.ReadAt(ctx, obj, p, off)
}

func (f *Faults) List(ctx context.Context, prefix string) ([]storage.Object, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	if f.roll(f.ErrorRate) {
		return nil, fmt.Errorf("injected fault listing %s: %w", prefix, storage.ErrTransient)
	}
	return f.Bucket.List(ctx, prefix)
}

func (f *Faults) Stat(ctx context.Context, key string) (storage.Object, error) {
	if err := f.wait(ctx); err != nil {
		return storage.Object{}, err
	}
	if f.roll(f.ErrorRate) {
		return storage.Object{}, fmt.Errorf("injected fault on %s: %w", key, storage.ErrTransient)
	}
	return f.Bucket.Stat(ctx, key)
}
