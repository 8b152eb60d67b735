package formats

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Decode decodes what Fetch fetched, as Read does, and returns how many
// rows of the range the driver left out as not fitting the schema (see
// Read.Skipped): a stream counts them per window. Rows a filter or a mask
// leaves out are not among them. On error the count is of the rows met
// before it. Fetch and Decode are Read in two steps, so that a caller can
// fetch ahead of decoding.
func (d *Scan) Decode(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) (skipped int64, err error) {
	err = d.readFetched(ctx, fe, batchRows, mem, yield, func(rows int64) {
		if rows > 0 {
			skipped += rows
		}
	})
	return skipped, err
}
