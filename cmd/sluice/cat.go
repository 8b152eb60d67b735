package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/stream"
)

const catHead = `Usage: sluice cat [flags] URL...
       sluice cat [flags] --catalog SPEC namespace.table

Prints the rows one rank of a job receives in one epoch, in the order it
receives them, as JSON lines: one object per row, keys in column order
(--columns sets it). Without --shuffle rows come in storage order.

Values: integers and floats as JSON numbers (NaN, +Inf and -Inf as the
strings "NaN", "+Inf", "-Inf", as Arrow's JSON writes them; 64-bit integers
in full, beyond what JavaScript numbers hold exactly), strings as strings,
nulls as null, structs as objects with their fields in order, lists as
arrays, maps as arrays of {"key":..,"value":..}, binary as base64 strings,
decimals as exact strings ("1.50"), dates, times and timestamps as ISO 8601
strings (with the zone when the type has one: "2024-11-07T12:33:54Z"),
UUIDs as their canonical text, JSON-annotated strings as the JSON they hold,
VARIANT values as JSON of their own types. A value that cannot be decoded
(a malformed VARIANT, a string that is not UTF-8 unless --invalid-utf8
replace) ends the command with an error naming its file, row group, column
and row, exit status 1.

With --checkpoint STORE --run NAME, printing starts where that run's step
(--step, default the newest complete one) left off. The order options
(--columns, --shuffle, --seed, --clump-size, --shuffle-window, --num-splits,
--drop-remainder) and --world-size default to the state's; the plan must be
the same (same files, same --chunk-bytes), else the state is refused with
the field that differs.

With --positions (such as 10,20,100-200, ranges inclusive), only the rows at
those positions of the rank's order (or of --split's) in --epoch are
printed, in the order listed, read by random access rather than streamed.

Flags:
`

type catConfig struct {
	ds         datasetFlags
	launch     launchFlags
	rank       int
	batchSize  int
	limit      int64
	checkpoint string
	run        string
	step       int64
	positions  positionsFlag
	split      int
	badUTF8    string
	int96      string
}

func catFlags() (*flag.FlagSet, *catConfig) {
	cfg := &catConfig{}
	fs := newFlagSet("cat")
	cfg.ds.register(fs)
	fs.IntVar(&cfg.rank, "rank", 0, "`rank` whose rows to print")
	cfg.launch.register(fs)
	fs.IntVar(&cfg.batchSize, "batch-size", 0, "`rows` per batch: a rank takes batches from its splits in turn, so this sets how they interleave (default 1024)")
	fs.Int64Var(&cfg.limit, "limit", -1, "stop after `N` rows; -1 prints the whole epoch")
	fs.StringVar(&cfg.checkpoint, "checkpoint", "", "resume from a checkpoint `store` (a pebble directory or a bucket URL); needs --run")
	fs.StringVar(&cfg.run, "run", "", "`name` of the run in --checkpoint")
	fs.Int64Var(&cfg.step, "step", -1, "`step` of --run to resume from; -1 for the newest complete step")
	fs.Var(&cfg.positions, "positions", "print only the rows at these positions of the order: a `list` such as 10,20,100-200 (ranges inclusive)")
	fs.IntVar(&cfg.split, "split", -1, "with --positions, count them in this `split`'s order instead of the rank's")
	fs.StringVar(&cfg.badUTF8, "invalid-utf8", "error", "what a string that is not UTF-8 (a Parquet string, a CSV value or header name, a JSON string or key) does: `error` fails, naming file, column and row; replace reads it with U+FFFD")
	fs.StringVar(&cfg.int96, "int96", "us", "`unit` of Parquet INT96 timestamps: us (every year; digits below the microsecond fail) or ns (keeps them; years outside 1677-2262 fail)")
	return fs, cfg
}

func catUsage() string {
	fs, _ := catFlags()
	return catHead + flagDefaults(fs) + `
Examples:
  sluice cat data/ --limit 5
  sluice cat data/ --columns id,label --shuffle --seed 7 --world-size 4 --rank 1
  RANK=1 WORLD_SIZE=4 sluice cat data/ --rank-from-env --num-splits 8
  sluice cat data/ --checkpoint ckpt/ --run exp1 --rank 0 --limit 10
  sluice cat data/ --shuffle --seed 7 --epoch 3 --positions 10,20,100-200
`
}

func runCat(ctx context.Context, e *env, args []string) error {
	fs, cfg := catFlags()
	urls, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := cfg.check(fs, urls); err != nil {
		return err
	}
	if err := cfg.launch.apply(fs); err != nil {
		return err
	}

	var resume *checkpoint.State
	if cfg.checkpoint != "" {
		st, err := resumeState(ctx, cfg, isSet(fs, "world-size"))
		if err != nil {
			return err
		}
		adoptState(fs, &cfg.ds, st)
		resume = &st
	}
	if err := cfg.ds.check(); err != nil {
		return err
	}
	if cfg.rank < 0 || cfg.rank >= cfg.ds.opts.WorldSize {
		return usageErrorf("--rank %d is outside --world-size %d", cfg.rank, cfg.ds.opts.WorldSize)
	}
	var positions takeOrder
	if cfg.positions.set {
		var err error
		if positions, err = takeOrderOf(&cfg.ds, cfg.rank, cfg.split, cfg.batchSize, cfg.positions.list); err != nil {
			return err
		}
	}
	opts, tbl, err := cfg.ds.iceberg.open(ctx, urls, cfg.ds.options(urls))
	if err != nil {
		return err
	}
	if tbl != nil {
		defer tbl.Close()
	}
	cfg.readOptions(&opts)

	showProgress := !cfg.ds.noProgress && e.progress(true)
	ds, err := openDataset(ctx, e, opts, showProgress)
	if err != nil {
		return err
	}
	defer ds.Close()
	if resume != nil {
		if err := ds.LoadStateDict(*resume); err != nil {
			return fmt.Errorf("checkpoint %s run %q: %w", cfg.checkpoint, cfg.run, err)
		}
	}
	if cfg.positions.set {
		return catPositions(ctx, e, ds, positions)
	}
	if cfg.limit == 0 {
		return nil
	}
	return catStream(ctx, e, ds, cfg, showProgress)
}

// check refuses flags that contradict each other, before anything is read.
func (cfg *catConfig) check(fs *flag.FlagSet, urls []string) error {
	if len(urls) == 0 {
		return usageErrorf("no data URL given")
	}
	switch {
	case cfg.batchSize < 0:
		return usageErrorf("--batch-size %d must not be negative", cfg.batchSize)
	case cfg.limit < -1:
		return usageErrorf("--limit %d must be -1 (no limit) or more", cfg.limit)
	case cfg.checkpoint == "" && (cfg.run != "" || isSet(fs, "step")):
		return usageErrorf("--run and --step need --checkpoint")
	case cfg.checkpoint != "" && cfg.run == "":
		return usageErrorf("--checkpoint needs --run: a store holds many runs")
	case cfg.positions.set && cfg.checkpoint != "":
		return usageErrorf("--positions and --checkpoint exclude each other: positions count from the start of --epoch")
	case isSet(fs, "split") && !cfg.positions.set:
		return usageErrorf("--split needs --positions")
	case cfg.badUTF8 != "error" && cfg.badUTF8 != "replace":
		return usageErrorf("--invalid-utf8 %q must be error or replace", cfg.badUTF8)
	case cfg.int96 != "us" && cfg.int96 != "ns":
		return usageErrorf("--int96 %q must be us or ns", cfg.int96)
	case cfg.checkpoint != "" && isSet(fs, "epoch"):
		return usageErrorf("--epoch and --checkpoint exclude each other: the state says which epoch it is in")
	}
	return nil
}

// readOptions sets what cat reads as: its rank, its batch size, and how
// the Parquet driver takes strings that are not UTF-8 and INT96 timestamps.
func (cfg *catConfig) readOptions(opts *stream.Options) {
	opts.Rank = cfg.rank
	opts.BatchSize = cfg.batchSize
	replaceInvalidUTF8(opts, cfg.badUTF8)
	if cfg.int96 == "ns" {
		opts.Formats = slices.Clone(opts.Formats)
		for i, f := range opts.Formats {
			if pf, ok := f.(parquet.Format); ok {
				pf.INT96 = parquet.INT96Nanoseconds
				opts.Formats[i] = pf
			}
		}
	}
}

// replaceInvalidUTF8 makes the drivers read strings that are not UTF-8
// with U+FFFD where mode (--invalid-utf8, checked) is replace: Parquet
// strings, CSV values and header names, JSON strings and keys. inspect
// takes it too, as its sample reads header names and JSON keys.
func replaceInvalidUTF8(opts *stream.Options, mode string) {
	if mode != "replace" {
		return
	}
	opts.Formats = slices.Clone(opts.Formats)
	for i, f := range opts.Formats {
		if pf, ok := f.(parquet.Format); ok {
			pf.InvalidUTF8 = parquet.ReplaceInvalidUTF8
			opts.Formats[i] = pf
		}
		if tf, ok := f.(*text.Format); ok {
			opts.Formats[i] = tf.WithReplaceInvalidUTF8()
		}
	}
}

// catStream prints the rest of the rank's epoch (up to --limit rows) as
// JSON lines, drawing progress on stderr where asked.
func catStream(ctx context.Context, e *env, ds *stream.Dataset, cfg *catConfig, showProgress bool) error {
	total := remainingRows(ds, cfg.rank, cfg.ds.opts.WorldSize)
	if cfg.limit > 0 && (total < 0 || cfg.limit < total) {
		total = cfg.limit
	}
	var written atomic.Int64
	p := startProgress(e.stderr, showProgress, func(el time.Duration) string {
		n := written.Load()
		rate := humanCount(float64(n)/max(el.Seconds(), 1e-3)) + " rows/s"
		if total < 0 {
			return fmt.Sprintf("cat: %d rows, %s", n, rate)
		}
		return fmt.Sprintf("cat: %s %d/%d rows, %s", bar(n, total), n, total, rate)
	})
	defer p.Stop()

	epoch := ds.Epoch()
	enc := newRowEncoder(ds.Schema())
	out := bufio.NewWriterSize(e.stdout, 256<<10)
	var buf []byte
	var n int64
	for batch, err := range ds.Batches(ctx) {
		if err != nil {
			out.Flush() // the rows before the error are still true
			p.Stop()
			return err
		}
		rows := batch.NumRows()
		if cfg.limit > 0 {
			rows = min(rows, cfg.limit-n)
		}
		for i := range int(rows) {
			buf, err = enc.appendRow(buf[:0], batch, i)
			if err != nil {
				out.Flush() // the rows before it are still true
				p.Stop()
				return fmt.Errorf("row %d: %w", n+int64(i), err)
			}
			if _, err := out.Write(buf); err != nil {
				p.Stop()
				return fmt.Errorf("write: %w", err)
			}
		}
		n += rows
		written.Store(n)
		if cfg.limit > 0 && n >= cfg.limit {
			break // ends the iteration: Batches stops its readers
		}
	}
	p.Stop()
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if k := ds.SkippedRows(); k > 0 {
		// On stderr, so that stdout stays the rows alone.
		fmt.Fprintf(e.stderr, "cat: %d bad rows skipped (--skip-bad-rows)\n", k)
	}
	if n == 0 {
		// An empty output is not an error, but it should not pass for a
		// dataset read when it may be a wrong path or filter.
		fmt.Fprintln(e.stderr, noRowsNote(ds, epoch, cfg.rank, cfg.ds.opts.WorldSize, cfg.ds.opts.Filter != ""))
	}
	return nil
}

// noRowsNote says why cat printed no row: the dataset has none, or (where
// it has some, or may) none came to this rank in this epoch.
func noRowsNote(ds *stream.Dataset, epoch int64, rank, world int, filtered bool) string {
	files := ds.Files()
	var rows int64
	known := true
	for _, f := range files {
		known = known && f.Rows >= 0
		rows += max(f.Rows, 0)
	}
	if known && rows == 0 {
		what := fmt.Sprintf("%d files, none with a row", len(files))
		switch {
		case len(files) == 0:
			what = "no data files"
		case len(files) == 1:
			what = "1 file without rows"
		}
		return fmt.Sprintf("cat: no rows: the dataset is empty (%s)", what)
	}
	why := ""
	if filtered {
		why = ", after the filter"
	}
	if world > 1 {
		return fmt.Sprintf("cat: no rows for rank %d of %d in epoch %d%s", rank, world, epoch, why)
	}
	return fmt.Sprintf("cat: no rows in epoch %d%s", epoch, why)
}

// remainingRows is what the rank has still to receive this epoch, or -1
// where a split's count is unknown before reading.
func remainingRows(ds *stream.Dataset, rank, world int) int64 {
	st := ds.StateDict()
	var n int64
	for s, sp := range ds.Splits() {
		if s%world != rank {
			continue
		}
		if sp.Rows < 0 {
			return -1
		}
		n += sp.Rows - st.Cursors[s].Rows
	}
	return n
}

// resumeState loads what a rank resumes from: its own state when the store
// has one at the same world size (so even the order in which it takes its
// splits resumes), else the merge of all ranks' states, as
// stream.Checkpointer.Resume does.
func resumeState(ctx context.Context, cfg *catConfig, worldSet bool) (checkpoint.State, error) {
	store, err := openStore(ctx, cfg.checkpoint, true)
	if err != nil {
		return checkpoint.State{}, err
	}
	defer store.Close()
	step := cfg.step
	if step < 0 {
		if step, err = store.Latest(ctx, cfg.run); err != nil {
			return checkpoint.State{}, err
		}
	}
	st, err := store.Load(ctx, cfg.run, step, cfg.rank)
	if err == nil && (!worldSet || st.WorldSize == cfg.ds.opts.WorldSize) {
		return st, nil
	}
	return store.LoadStep(ctx, cfg.run, step)
}

// adoptState sets the order options the user left unset to the state's, so
// that resuming needs only the store, the run and the data.
func adoptState(fs *flag.FlagSet, d *datasetFlags, st checkpoint.State) {
	if !isSet(fs, "columns") {
		d.opts.Columns = slices.Clone(st.Columns)
	}
	if !isSet(fs, "shuffle") {
		d.opts.Shuffle = st.Shuffle
	}
	if !isSet(fs, "seed") {
		d.opts.Seed = st.Seed
	}
	if !isSet(fs, "clump-size") {
		d.opts.ClumpSize = st.ClumpSize
	}
	// The state's window is in rows; --shuffle-memory given resumes it
	// where its bytes buy the same rows.
	if !isSet(fs, "shuffle-window") && !isSet(fs, "shuffle-memory") {
		d.opts.ShuffleWindow = st.ShuffleWindow
	}
	if !isSet(fs, "shuffle-passes") {
		d.opts.ShufflePasses = st.ShufflePasses
	}
	if !isSet(fs, "num-splits") {
		d.opts.NumSplits = st.NumSplits
	}
	if !isSet(fs, "drop-remainder") {
		d.opts.DropRemainder = st.DropRemainder
	}
	if !isSet(fs, "world-size") && st.WorldSize > 0 {
		d.opts.WorldSize = st.WorldSize
	}
	d.opts.Epoch = st.Epoch
}
