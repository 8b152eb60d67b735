package formats_test

import (
	"slices"
	"testing"

	"github.com/sluicedata/sluice/formats"
)

func TestMemoryCache(t *testing.T) {
	var c formats.MemoryCache
	ctx := t.Context()
	if _, err := c.Get(ctx, []byte("k")); err == nil {
		t.Fatal("an empty cache found a key")
	}
	v := []byte("value")
	if err := c.Set(ctx, []byte("k"), v); err != nil {
		t.Fatal(err)
	}
	v[0] = 'V' // the cache keeps its own copy
	got, err := c.Get(ctx, []byte("k"))
	if err != nil || string(got) != "value" {
		t.Fatalf("Get = %q, %v; want \"value\"", got, err)
	}
	if c.Hits() != 1 || !slices.Equal(c.Keys(), []string{"k"}) {
		t.Fatalf("%d hits, keys %q; want 1 hit, [k]", c.Hits(), c.Keys())
	}
}
