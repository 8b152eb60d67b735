package formats

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ReadFetchedSkips is ReadFetched that also returns how many rows of the
// range the driver left out as not fitting the schema (see Read.Skipped):
// a stream counts them per window. Rows a filter or a mask leaves out are
// not among them. On error the count is of the rows met before it.
func (d *Dataset) ReadFetchedSkips(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) (int64, error) {
	var n int64
	err := d.readFetched(ctx, fe, batchRows, mem, yield, func(rows int64) {
		if rows > 0 {
			n += rows
		}
	})
	return n, err
}
