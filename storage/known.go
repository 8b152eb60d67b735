package storage

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// Known is the object rawURL names, as the store described it before (its
// size, time and tag, kept by the caller from an earlier Resolve), without
// asking the store again: where a stat per file would cost a request each,
// as for the data files of a table planned from a cache. The URL is taken
// as one object's, never as a folder or a pattern.
func (r *Resolver) Known(ctx context.Context, rawURL string, obj Object) (_ Source, err error) {
	loc, err := parseLocation(rawURL)
	if err != nil {
		return Source{}, err
	}
	defer func() { err = scrub(err, loc.query) }()
	if loc.key == "" || strings.HasSuffix(loc.key, "/") {
		return Source{}, fmt.Errorf("%s names no object", redact(rawURL))
	}
	if obj.Size < 0 {
		return Source{}, fmt.Errorf("%s: size %d", redact(rawURL), obj.Size)
	}
	b, err := r.bucket(ctx, loc)
	if err != nil {
		return Source{}, err
	}
	return Source{URL: loc.display(loc.key), Rel: path.Base(loc.key), Bucket: b, Object: Object{Key: loc.key, Size: obj.Size, ModTime: obj.ModTime, ETag: obj.ETag, Version: obj.Version}}, nil
}
