package planner

import (
	"fmt"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/stream/internal/price"
)

// windowRows is the ShuffleWindow that ShuffleMemory bytes of decoded
// rows buys in data: the rows are what the order is made of, and what a
// state checks, so the same bytes over the same files always give the
// same order.
func windowRows(memory int64, data *formats.Scan) (int, error) {
	rb, err := price.RowBytes(data)
	if err != nil {
		return 0, fmt.Errorf("stream: Options.ShuffleMemory: %w; set Options.ShuffleWindow in rows instead", err)
	}
	return int(max(min(float64(memory)/rb, float64(1<<31-1)), 1)), nil
}

// Price estimates what epoch ep, dealt from chunks of a plan of data,
// costs and gives with batches of batchSize rows, decoders windows decoded
// at once, shuffled or not (package price): the plan's files and decoded
// row size are this package's to know.
func Price(data *formats.Scan, chunks []split.Chunk, ep *split.Epoch, batchSize, decoders int, shuffled bool) price.Estimate {
	rows := make([]int64, len(data.Fragments))
	for i, f := range data.Fragments {
		rows[i] = f.Rows
	}
	rb, err := price.RowBytes(data)
	if err != nil {
		rb = 0 // unknown: the estimate says so
	}
	return price.Of(price.Options{Epoch: ep, Chunks: chunks, FileRows: rows, BatchSize: batchSize, RowBytes: rb, Decoders: decoders, Shuffled: shuffled})
}
