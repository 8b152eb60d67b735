package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// CountRows is the counting pass EqualBatches needs where the plan does not
// know every chunk's rows (a filter, Iceberg equality deletes, CSV and JSON
// without a driver's own count): it reads each such chunk as the stream
// reads it, so with the filter, the deletes and the bad rows left out, and
// counts what comes. rows[c] is chunk c's count, -1 where the plan knows it.
// Counts are kept in the plan cache under the file's identity, the chunk's
// units and everything else that decides which rows pass, so a restarted
// job counts nothing again. It reads with o's ReadConcurrency,
// ReadBatchSize and Allocator; filter is the filter's canonical text.
func CountRows(ctx context.Context, o Options, cache formats.Cache, data *formats.Scan, chunks []split.Chunk, filter string) ([]int64, error) {
	if err := passesCounted(o, data, chunks); err != nil {
		return nil, err // before a counting pass that could not help
	}
	rows := make([]int64, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Limits.ReadConcurrency, 1))
	for i, c := range chunks {
		rows[i] = -1
		if c.Rows() >= 0 {
			continue
		}
		g.Go(func() error {
			f := data.Fragments[c.Fragment]
			key := countKey(f, data, c, filter)
			if cache != nil {
				if v, err := cache.Get(gctx, key); err == nil {
					if n, k := binary.Varint(v); k == len(v) && n >= 0 {
						rows[i] = n
						return nil
					}
				}
			}
			rng := formats.Range{Start: -1, End: -1, FirstUnit: c.FirstUnit, EndUnit: c.EndUnit}
			fe, err := data.Fetch(gctx, c.Fragment, rng)
			if err != nil {
				return fmt.Errorf("stream: counting pass (EqualBatches): %w", err)
			}
			defer fe.Release() // decoded once, below
			var n int64
			_, err = data.Decode(gctx, fe, o.Limits.ReadBatchSize, o.Allocator, func(b arrow.RecordBatch) error {
				n += b.NumRows()
				b.Release()
				return nil
			})
			if err != nil {
				return fmt.Errorf("stream: counting pass (EqualBatches): %w", err)
			}
			rows[i] = n
			if cache != nil {
				// A cache that fails to keep it costs a count next time.
				_ = cache.Set(gctx, key, binary.AppendVarint(nil, rows[i]))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rows, nil
}

// countKey names a chunk's count in the plan cache: the file's identity
// (location, size, modification time, ETag), its units, and what decides
// which of their rows pass: the filter, the columns read (a text driver's
// bad rows depend on them) and what the files are a version of (an Iceberg
// snapshot, with its deletes).
func countKey(f *formats.Fragment, data *formats.Scan, c split.Chunk, filter string) []byte {
	purpose := fmt.Sprintf("sluice count v1\x00%d\x00%d\x00%q\x00%q\x00%q", c.FirstUnit, c.EndUnit, filter, strings.Join(data.Columns, "\x00"), data.Version)
	return f.CacheKey(purpose)
}
