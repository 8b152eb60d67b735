package planner

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
)

// findCutPages finds, on the rank that writes the shared plan, the pages
// of the units the opening epoch's split boundaries cut where their files
// do not say (Parquet row groups without a page index: their page headers
// are walked to the chunks' ends), so that the walks travel in the plan
// and each cut unit is walked once for the job, not by every rank that
// reads part of it. A walk that fails is left to the read that needs it,
// which walks again and names what is wrong; only a cancelled context
// fails the plan. Later epochs cut other units: those are walked by the
// ranks that read them, as far as their rows, and kept in the plan cache.
func findCutPages(ctx context.Context, o Options, p Planned) error {
	order := o.Order
	order.ShuffleWindow = p.ShuffleWindow
	units, err := cutUnits(p.Data, p.Chunks, order, o.Epoch)
	if err != nil {
		return nil // Open deals the epoch next, and reports it
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(o.Plan.Concurrency, 16))
	for _, u := range units {
		g.Go(func() error {
			_ = p.Data.FindPages(gctx, u.fragment, u.unit)
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("stream: finding the pages of cut row groups: %w", err)
	}
	return nil
}

// unitRef names a unit of a plan: its fragment and its index there.
type unitRef struct{ fragment, unit int }

// cutUnits are the units read by pages (formats.Unit.Paged) that a piece
// of epoch n's splits reads part of, in order o, in plan order: the
// units whose pages a read must find, cut by a split boundary or by the
// plan's cutting of a large unit into chunks.
func cutUnits(data *formats.Scan, chunks []split.Chunk, o permutation.Order, n int64) ([]unitRef, error) {
	ep, err := split.NewEpoch(chunks, o, n)
	if err != nil {
		return nil, err
	}
	cut := map[unitRef]bool{}
	for _, sp := range ep.Splits {
		for _, p := range sp.Pieces {
			if p.Start < 0 {
				continue // whole units: never cut
			}
			var at int64
			for u, un := range data.Fragments[p.Fragment].Units {
				lo, hi := at, at+un.Rows
				at = hi
				if hi > p.Start && lo < p.End && un.Paged && (p.Start > lo || p.End < hi) {
					cut[unitRef{p.Fragment, u}] = true
				}
			}
		}
	}
	return slices.SortedFunc(maps.Keys(cut), func(a, b unitRef) int {
		return cmp.Or(cmp.Compare(a.fragment, b.fragment), cmp.Compare(a.unit, b.unit))
	}), nil
}
