package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/stream"
)

// Random access from the command line: cat --positions prints the rows at
// positions of an epoch's order, locate says where they come from.

// maxPositions bounds what one --positions list may expand to, so that a
// typo such as 0-1000000000000 is an error, not a long wait.
const maxPositions = 10_000_000

// takeRequest is how many positions cat takes at once: a request's units
// are read once between them, and its output batch stays small.
const takeRequest = 4096

// positionsFlag is a list of positions and inclusive ranges: 10,20,100-200.
type positionsFlag struct {
	list []int64
	set  bool
}

func (p *positionsFlag) String() string {
	if p == nil || !p.set {
		return ""
	}
	parts := make([]string, len(p.list))
	for i, x := range p.list {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, ",")
}

func (p *positionsFlag) Set(s string) error {
	list, err := parsePositions(s)
	if err != nil {
		return err
	}
	p.list, p.set = append(p.list, list...), true
	if len(p.list) > maxPositions {
		return fmt.Errorf("more than %d positions", maxPositions)
	}
	return nil
}

// parsePositions reads "10,20,100-200": positions from 0, a-b meaning a to
// b inclusive, in the order written.
func parsePositions(s string) ([]int64, error) {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty position in %q", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("position %q is not a number from 0", part)
		}
		if !isRange {
			out = append(out, a)
			continue
		}
		b, err := strconv.ParseInt(hi, 10, 64)
		if err != nil || b < a {
			return nil, fmt.Errorf("range %q is not FIRST-LAST with LAST >= FIRST", part)
		}
		if b-a >= maxPositions-int64(len(out)) {
			return nil, fmt.Errorf("range %q holds more than %d positions", part, maxPositions)
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	return out, nil
}

// takeOrder is the order whose positions a command counts: one split's
// (split >= 0) or one rank's.
type takeOrder struct {
	epoch           int64
	split           int
	rank, worldSize int
	positions       []int64
}

func (o takeOrder) take(ctx context.Context, ds *stream.Dataset, pos []int64) (arrow.RecordBatch, error) {
	if o.split >= 0 {
		return ds.TakeSplit(ctx, o.epoch, o.split, pos)
	}
	return ds.TakeRank(ctx, o.epoch, o.rank, o.worldSize, pos)
}

func (o takeOrder) locate(ds *stream.Dataset, pos []int64) ([]stream.Location, error) {
	if o.split >= 0 {
		return ds.LocateSplit(o.epoch, o.split, pos)
	}
	return ds.LocateRank(o.epoch, o.rank, o.worldSize, pos)
}

// takeError turns a position out of range into a usage error: the user
// asked for a row that is not there.
func takeError(err error) error {
	if errors.Is(err, split.ErrPosition) {
		return &usageError{err.Error()}
	}
	return err
}

// catPositions prints the rows at the positions, in the order given.
func catPositions(ctx context.Context, e *env, ds *stream.Dataset, o takeOrder) error {
	enc := newRowEncoder(ds.Schema())
	out := bufio.NewWriterSize(e.stdout, 256<<10)
	var buf []byte
	for pos := o.positions; len(pos) > 0; {
		n := min(len(pos), takeRequest)
		b, err := o.take(ctx, ds, pos[:n])
		if err != nil {
			out.Flush()
			return takeError(err)
		}
		for i := range int(b.NumRows()) {
			if buf, err = enc.appendRow(buf[:0], b, i); err != nil {
				b.Release()
				out.Flush() // the rows before it are still true
				return fmt.Errorf("position %d: %w", pos[i], err)
			}
			if _, err := out.Write(buf); err != nil {
				b.Release()
				return fmt.Errorf("write: %w", err)
			}
		}
		b.Release()
		pos = pos[n:]
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

const locateHead = `Usage: sluice locate [flags] URL...

Says where each position of an epoch's order comes from: the split and its
offset in the split's order, the window, the file, the row group and the
row of the row group (and of the file). Positions count from 0 in the order
one rank receives (--rank, --world-size; by default the one rank of a job
of one: every split, round-robin, --batch-size rows at a time), or in one
split's order with --split. Nothing but the footers is read.

Flags:
`

type locateConfig struct {
	ds        datasetFlags
	rank      int
	split     int
	batchSize int
	positions positionsFlag
	json      bool
}

func locateFlags() (*flag.FlagSet, *locateConfig) {
	cfg := &locateConfig{}
	fs := newFlagSet("locate")
	cfg.ds.register(fs)
	fs.IntVar(&cfg.rank, "rank", 0, "`rank` whose order the positions count in")
	fs.IntVar(&cfg.split, "split", -1, "count positions in this `split`'s order instead of a rank's")
	fs.IntVar(&cfg.batchSize, "batch-size", 0, "`rows` per batch: how a rank's splits interleave (default 1024)")
	fs.Var(&cfg.positions, "positions", "`list` of positions and inclusive ranges, such as 10,20,100-200 (required)")
	fs.BoolVar(&cfg.json, "json", false, "one JSON object per position instead of a table")
	return fs, cfg
}

func locateUsage() string {
	fs, _ := locateFlags()
	return locateHead + flagDefaults(fs) + `
Examples:
  sluice locate data/ --shuffle --seed 7 --epoch 3 --positions 5123000-5123009
  sluice locate data/ --num-splits 8 --split 2 --positions 0,1000 --json
`
}

func runLocate(ctx context.Context, e *env, args []string) error {
	fs, cfg := locateFlags()
	urls, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(urls) == 0 {
		return usageErrorf("no data URL given")
	}
	if !cfg.positions.set {
		return usageErrorf("--positions is required")
	}
	o, err := takeOrderOf(&cfg.ds, cfg.rank, cfg.split, cfg.batchSize, cfg.positions.list)
	if err != nil {
		return err
	}
	if err := cfg.ds.check(); err != nil {
		return err
	}
	o0 := cfg.ds.options(urls)
	o0.BatchSize = cfg.batchSize
	opts, tbl, err := cfg.ds.iceberg.open(ctx, urls, o0)
	if err != nil {
		return err
	}
	if tbl != nil {
		defer tbl.Close()
	}
	ds, err := openDataset(ctx, e, opts, !cfg.ds.noProgress && e.progress(false))
	if err != nil {
		return err
	}
	defer ds.Close()
	locs, err := o.locate(ds, o.positions)
	if err != nil {
		return takeError(err)
	}
	out := bufio.NewWriter(e.stdout)
	if cfg.json {
		enc := json.NewEncoder(out)
		for _, l := range locs {
			if err := enc.Encode(l); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "POSITION\tSPLIT\tOFFSET\tWINDOW\tFILE\tROW GROUP\tROW\tFILE ROW")
		for _, l := range locs {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", l.Position, l.Split, l.SplitOffset, l.Window, l.URL, l.Unit, l.UnitRow, l.Row)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// takeOrderOf checks the flags that choose an order and returns it.
func takeOrderOf(d *datasetFlags, rank, split, batchSize int, positions []int64) (takeOrder, error) {
	if err := d.check(); err != nil {
		return takeOrder{}, err
	}
	switch {
	case batchSize < 0:
		return takeOrder{}, usageErrorf("--batch-size %d must not be negative", batchSize)
	case split < -1:
		return takeOrder{}, usageErrorf("--split %d must not be negative", split)
	case rank < 0 || rank >= d.opts.WorldSize:
		return takeOrder{}, usageErrorf("--rank %d is outside --world-size %d", rank, d.opts.WorldSize)
	}
	numSplits := d.opts.NumSplits
	if numSplits == 0 {
		numSplits = d.opts.WorldSize
	}
	if split >= numSplits {
		return takeOrder{}, usageErrorf("--split %d is outside --num-splits %d", split, numSplits)
	}
	return takeOrder{epoch: d.opts.Epoch, split: split, rank: rank, worldSize: d.opts.WorldSize, positions: positions}, nil
}
