package formats

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Names kept for one release after the house was redrawn (docs/design.md,
// "Names that changed").

// Dataset is the former name of Scan: a second Dataset beside package
// stream's made readers guess which one a call meant.
//
// Deprecated: use Scan.
type Dataset = Scan

// ReadFetched decodes what Fetch fetched, as Read does.
//
// Deprecated: use Decode, which also returns the rows the driver skipped.
func (d *Scan) ReadFetched(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	_, err := d.Decode(ctx, fe, batchRows, mem, yield)
	return err
}

// ReadFetchedSkips is Decode.
//
// Deprecated: use Decode.
func (d *Scan) ReadFetchedSkips(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) (int64, error) {
	return d.Decode(ctx, fe, batchRows, mem, yield)
}
