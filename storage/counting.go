package storage

import (
	"context"
	"sync/atomic"
)

// Counting wraps a bucket and counts the range reads that go through it.
// Listing and Stat calls are counted as requests but carry no bytes.
type Counting struct {
	Bucket
	bytes    atomic.Int64
	requests atomic.Int64
	// OnRead, if set, sees every range read after it completes: the object
	// key, offset and bytes delivered. It must be safe for concurrent use.
	OnRead func(key string, off int64, n int)
}

// NewCounting wraps b.
func NewCounting(b Bucket) *Counting { return &Counting{Bucket: b} }

// Bytes is the number of bytes delivered by range reads so far.
func (c *Counting) Bytes() int64 { return c.bytes.Load() }

// Requests is the number of requests (range reads, lists, stats) so far.
func (c *Counting) Requests() int64 { return c.requests.Load() }

// Reset sets the counts to zero.
func (c *Counting) Reset() {
	c.bytes.Store(0)
	c.requests.Store(0)
}

func (c *Counting) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	n, err := c.Bucket.ReadAt(ctx, obj, p, off)
	c.bytes.Add(int64(n))
	c.requests.Add(1)
	if c.OnRead != nil {
		c.OnRead(obj.Key, off, n)
	}
	return n, err
}

func (c *Counting) List(ctx context.Context, prefix string) ([]Object, error) {
	c.requests.Add(1)
	return c.Bucket.List(ctx, prefix)
}

func (c *Counting) Stat(ctx context.Context, key string) (Object, error) {
	c.requests.Add(1)
	return c.Bucket.Stat(ctx, key)
}
