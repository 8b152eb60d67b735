//go:build cgo

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/formats/iceberg/catalogs"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// catalogTerms are the Python options that messages about catalogs name.
var catalogTerms = catalogs.Terms{Spec: "option catalog", Name: "option catalog_name"}

// openSources opens what a dataset reads through beside its URLs, as the
// CLI's flags do: an Iceberg table by its metadata location (iceberg) or
// by a catalog (catalog, the --catalog specs), a plan cache and a plan
// store. It sets them in so and returns what to close after the dataset.
func (o *openOptions) openSources(ctx context.Context, so *stream.Options) (_ []io.Closer, err error) {
	table := o.Iceberg || o.Catalog != ""
	switch {
	case o.Iceberg && o.Catalog != "":
		return nil, usageErr("options iceberg and catalog both name a table: iceberg=True reads it by its metadata location, catalog by its catalog; give one")
	case o.CatalogName != "" && o.Catalog == "":
		return nil, usageErr("option catalog_name needs option catalog")
	case !table && (o.SnapshotID != 0 || o.Ref != "" || o.AsOf != "" || len(o.Rewrite) > 0):
		return nil, usageErr("options snapshot_id, ref, as_of and rewrite need iceberg=True or catalog")
	case table && len(o.URLs) != 1:
		return nil, usageErr("a table is read from one location or identifier, not %d", len(o.URLs))
	case table && o.Format != "":
		return nil, usageErr("option format and a table exclude each other: a table names its data files' formats")
	case o.PlanStoreWait < 0:
		return nil, usageErr("option plan_store_wait %g is negative", o.PlanStoreWait)
	case o.PlanStoreWait > 0 && o.PlanStoreAt == "":
		return nil, usageErr("option plan_store_wait needs option plan_store")
	}
	var closers []io.Closer
	defer func() {
		if err != nil {
			err = errors.Join(err, closeAll(closers))
		}
	}()
	if o.PlanCacheAt != "" {
		b, prefix, err := openBucketAt(ctx, "plan_cache", o.PlanCacheAt, false)
		if err != nil {
			return nil, err
		}
		closers = append(closers, b)
		so.PlanCache = &bucketCache{b: b, prefix: prefix, shown: o.PlanCacheAt}
	}
	if o.PlanStoreAt != "" {
		b, key, err := openBucketAt(ctx, "plan_store", o.PlanStoreAt, true)
		if err != nil {
			return nil, err
		}
		closers = append(closers, b)
		if key == "" || strings.HasSuffix(key, "/") {
			return nil, usageErr("option plan_store %s names a folder, not the plan's object (such as .../run-7/plan.json)", redactURL(o.PlanStoreAt))
		}
		so.PlanStore = &stream.PlanStore{Bucket: b, Key: key, Wait: time.Duration(o.PlanStoreWait * float64(time.Second))}
	}
	if !table {
		return closers, nil
	}
	to := iceberg.Options{SnapshotID: o.SnapshotID, Ref: o.Ref, Rewrite: o.Rewrite, Storage: so.Storage, Cache: so.PlanCache}
	if o.AsOf != "" {
		if to.AsOf, err = time.Parse(time.RFC3339Nano, o.AsOf); err != nil {
			return nil, usageErr("option as_of %q is not an RFC 3339 time: %v", o.AsOf, err)
		}
	}
	var tbl *iceberg.Table
	if o.Catalog != "" {
		spec, err := catalogs.Parse(o.Catalog, o.CatalogName, catalogTerms)
		if err != nil {
			return nil, err
		}
		tbl, err = spec.OpenTable(ctx, o.URLs[0], to)
		if err != nil {
			return nil, err
		}
	} else if tbl, err = iceberg.Open(ctx, o.URLs[0], to); err != nil {
		return nil, err
	}
	closers = append(closers, tbl)
	so.URLs = nil
	so.Plan = tbl.Plan
	return closers, nil
}

func closeAll(cs []io.Closer) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i].Close())
	}
	return errors.Join(errs...)
}

// openBucketAt opens the bucket a URL or local path names and returns the
// key (or prefix) the rest of it names. A local path is a bucket at the
// file system's root, whose folders are made as objects are written;
// sidecar says whether it keeps fileblob's metadata files beside them.
func openBucketAt(ctx context.Context, option, raw string, sidecar bool) (*blob.Bucket, string, error) {
	local := !strings.Contains(raw, "://")
	p := raw
	var u *url.URL
	if !local {
		var err error
		if u, err = url.Parse(raw); err != nil {
			return nil, "", usageErr("option %s %s is not a URL", option, redactURL(raw))
		}
		if local = u.Scheme == "file"; local {
			p = u.Path
		}
	}
	if local {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, "", usageErr("option %s %s: %v", option, p, err)
		}
		key := strings.TrimPrefix(filepath.ToSlash(abs), "/")
		if strings.HasSuffix(p, "/") {
			key += "/"
		}
		opts := &fileblob.Options{NoTempDir: true}
		if !sidecar {
			opts.Metadata = fileblob.MetadataDontWrite
		}
		b, err := fileblob.OpenBucket("/", opts)
		if err != nil {
			return nil, "", fmt.Errorf("option %s %s: %w", option, p, err)
		}
		return b, key, nil
	}
	bucketURL := u.Scheme + "://" + u.Host
	if u.RawQuery != "" {
		bucketURL += "?" + u.RawQuery
	}
	b, err := storage.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, "", fmt.Errorf("option %s: open bucket %s: %w", option, redactURL(raw), scrub(err, u.RawQuery))
	}
	return b, strings.TrimPrefix(u.Path, "/"), nil
}

// redactURL is a URL without its query and user information, where
// credentials may be.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

// scrub removes a URL's query, where credentials may be, from an error's
// text, keeping what it wraps.
func scrub(err error, query string) error {
	if query == "" || !strings.Contains(err.Error(), query) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), query, "…"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// bucketCache is a plan cache (formats.Cache) of one object per key under
// a prefix of a bucket: a local folder or an object-store prefix that
// every process of a job (DataLoader workers, ranks on other machines)
// can share, where a pebble store's directory is one process's at a time.
// Objects are named by the SHA-256 of their key; a write is whole or
// absent, so concurrent writers of one key leave one of their (equal)
// values.
type bucketCache struct {
	b      *blob.Bucket
	prefix string
	shown  string
}

var _ formats.Cache = (*bucketCache)(nil)

func (c *bucketCache) name(key []byte) string {
	h := sha256.Sum256(key)
	p := c.prefix
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p + hex.EncodeToString(h[:])
}

func (c *bucketCache) Get(ctx context.Context, key []byte) ([]byte, error) {
	b, err := c.b.ReadAll(ctx, c.name(key))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("plan cache %s: %w", redactURL(c.shown), formats.ErrNotFound)
	}
	return b, err
}

func (c *bucketCache) Set(ctx context.Context, key, value []byte) error {
	if err := c.b.WriteAll(ctx, c.name(key), value, nil); err != nil {
		return fmt.Errorf("plan cache %s: %w", redactURL(c.shown), err)
	}
	return nil
}
