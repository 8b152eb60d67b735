package parquet

import (
	"context"

	"github.com/sluicedata/sluice/formats"
)

// planParquet plans with this driver (for the package's internal tests).
func planParquet(ctx context.Context, urls []string, opts formats.PlanOptions) (*formats.Scan, error) {
	if opts.Formats == nil {
		opts.Formats = []formats.Format{Format{}}
	}
	return formats.Plan(ctx, urls, opts)
}

// PagedFile is pagedFile, for the fuzz seeds of the external tests.
var PagedFile = pagedFile

// WalkAll makes every cut row group without a page index walked, however
// small, and returns what undoes it.
func WalkAll() func() {
	old := walkMinBytes
	walkMinBytes = 0
	return func() { walkMinBytes = old }
}
