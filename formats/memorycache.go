package formats

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
)

// errMiss is what MemoryCache.Get returns for a key it does not hold.
var errMiss = errors.New("formats: not in the memory cache")

// MemoryCache is a Cache held in memory, safe for concurrent use: plans
// made again in one process (a benchmark, a notebook) skip their footer
// reads, and tests see what planning cached. Its zero value is empty and
// ready to use.
type MemoryCache struct {
	mu   sync.Mutex
	m    map[string][]byte
	hits int
}

// Get returns the value set for key, or an error if there is none.
func (c *MemoryCache) Get(_ context.Context, key []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(key)]
	if !ok {
		return nil, errMiss
	}
	c.hits++
	return v, nil
}

// Set keeps a copy of value under key.
func (c *MemoryCache) Set(_ context.Context, key, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[string(key)] = slices.Clone(value)
	return nil
}

// Hits is how many Gets found their key.
func (c *MemoryCache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// Keys are the keys the cache holds, sorted.
func (c *MemoryCache) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.m))
}
