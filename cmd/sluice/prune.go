package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/stream"
)

// pruningInfo is what inspect --filter reports: the row groups whose
// statistics (or bloom filters) rule the filter out, which a read never
// fetches.
type pruningInfo struct {
	// Filter is the filter's canonical text, as the plan fingerprint holds it.
	Filter          string `json:"filter"`
	RowGroups       int    `json:"row_groups"`
	PrunedRowGroups int    `json:"pruned_row_groups"`
	Bytes           int64  `json:"bytes"`
	PrunedBytes     int64  `json:"pruned_bytes"`
}

// addPruning fills rep.Pruning and marks the pruned row groups, asking
// each Parquet file's driver what the filter rules out; other formats
// prune nothing (their rows are filtered as read).
func addPruning(ctx context.Context, rep *inspectReport, text string, ds *stream.Dataset) error {
	if text == "" {
		return nil
	}
	flt, err := filter.Parse(text)
	if err != nil {
		return err // stream.Open has already accepted it: not reached
	}
	p := &pruningInfo{Filter: flt.String()}
	for i, f := range ds.Files() {
		for _, u := range f.Units {
			p.RowGroups++
			p.Bytes += u.Bytes
		}
		if f.Format != (parquet.Format{}).Name() {
			continue
		}
		pr, pruned := parquet.Format{}.Prune(ctx, f, flt)
		p.PrunedRowGroups += pr.Pruned
		p.PrunedBytes += pr.PrunedBytes
		for u, yes := range pruned {
			rep.Files[i].RowGroups[u].Pruned = yes
		}
	}
	rep.Pruning = p
	return nil
}

func writePruning(w io.Writer, p *pruningInfo) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nfilter: %s\npruning skips %d of %d row groups, %s of %s (by statistics and bloom filters; rows behind a filter are counted when read)\n",
		p.Filter, p.PrunedRowGroups, p.RowGroups, humanBytes(p.PrunedBytes), humanBytes(p.Bytes))
}
