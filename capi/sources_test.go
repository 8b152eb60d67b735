//go:build cgo

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
)

// TestOpenSourcesRefusesContradictions: options that name a table, a plan
// store or a catalog in ways that cannot hold together are usage errors
// that name the options, before anything is opened.
func TestOpenSourcesRefusesContradictions(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ js, says string }{
		{`{"urls":["m.json"],"iceberg":true,"catalog":"sqlite:///c.db"}`, "give one"},
		{`{"urls":["db.t"],"catalog_name":"lake"}`, "catalog_name needs option catalog"},
		{`{"urls":["u"],"snapshot_id":3}`, "need iceberg=True or catalog"},
		{`{"urls":["a","b"],"iceberg":true}`, "not 2"},
		{`{"urls":["m.json"],"iceberg":true,"format":"csv"}`, "format"},
		{`{"urls":["u"],"plan_store_wait":3}`, "plan_store_wait needs option plan_store"},
		{`{"urls":["u"],"plan_store":"` + dir + `/"}`, "names a folder"},
		{`{"urls":["u"],"iceberg":true,"as_of":"yesterday"}`, "RFC 3339"},
		{`{"urls":["db.t"],"catalog":"mysql://u:s3cret@x/db"}`, "option catalog"},
	} {
		_, err := openDataset([]byte(c.js))
		if kindOf(err) != "usage" || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v (kind %s), want a usage error saying %q", c.js, err, kindOf(err), c.says)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the message shows the password: %v", c.js, err)
		}
	}
}

// TestBucketCache: a plan cache in a folder keeps values by key, misses
// what it does not hold, and is shared by every cache opened on the folder
// (DataLoader workers open one each).
func TestBucketCache(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "plans")
	open := func() *bucketCache {
		b, prefix, err := openBucketAt(ctx, "plan_cache", dir, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return &bucketCache{b: b, prefix: prefix, shown: dir}
	}
	a, b := open(), open()
	if _, err := a.Get(ctx, []byte("k1")); !errors.Is(err, formats.ErrNotFound) {
		t.Fatalf("a missing key: %v", err)
	}
	keys := [][]byte{[]byte("k1"), []byte("k2"), make([]byte, 4096)} // a key longer than a file name may be
	for i, k := range keys {
		if err := a.Set(ctx, k, []byte{byte(i), 'v'}); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		v, err := b.Get(ctx, k)
		if err != nil || string(v) != string([]byte{byte(i), 'v'}) {
			t.Errorf("key %d through the other cache: %q, %v", i, v, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != len(keys) {
		t.Errorf("the folder holds %d entries (%v), want one a key, no metadata files", len(ents), err)
	}
}
