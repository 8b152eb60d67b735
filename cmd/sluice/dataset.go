package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// datasetFlags are the stream options inspect and cat share: the ones that
// decide which rows each split holds and in which order, so that both show
// what a job opened with the same values gets. The flags fill opts in
// place: a flag is its stream option, under the option's default.
type datasetFlags struct {
	opts       stream.Options
	noProgress bool
	iceberg    icebergFlags
	text       textFlags
}

// textFlags are the options of CSV, TSV and JSON files.
type textFlags struct {
	delimiter   string
	quote       string
	escape      string
	comment     string
	noHeader    bool
	header      bool
	nullStrings listFlag
	nullPadding bool
	countRows   bool
	skipBadRows bool
}

func (d *datasetFlags) register(fs *flag.FlagSet) {
	fs.Var((*listFlag)(&d.opts.Columns), "columns", "select and order columns by top-level `names`, comma-separated (default: every column of the first file)")
	fs.BoolVar(&d.opts.Shuffle, "shuffle", false, "shuffle chunk order and rows within windows, by --seed and --epoch")
	fs.Uint64Var(&d.opts.Seed, "seed", 0, "`seed` of the shuffle")
	fs.Int64Var(&d.opts.Epoch, "epoch", 0, "`epoch` whose order to use")
	fs.IntVar(&d.opts.ClumpSize, "clump-size", 0, "`rows` that stay together when a window is shuffled (default 1)")
	fs.IntVar(&d.opts.ShuffleWindow, "shuffle-window", 0, "`rows` read and shuffled together per split (default 65536)")
	fs.IntVar(&d.opts.ShufflePasses, "shuffle-passes", 0, "read every chunk `k` times an epoch, each pass keeping a disjoint part of its rows: windows of k times as many places, at k times the bytes read and decoded (inspect prints the price; default 1)")
	fs.Var((*sizeFlag)(&d.opts.ShuffleMemory), "shuffle-memory", "size the shuffle window in decoded bytes instead of rows, such as 512M or 2G: the window is the rows that `size` holds (inspect prints them, the memory and the mixing they buy); not with --shuffle-window")
	fs.Var((*sizeFlag)(&d.opts.ChunkBytes), "chunk-bytes", "chunk target `size` in stored bytes of the selected columns, such as 512K or 4M (default 1M)")
	fs.IntVar(&d.opts.NumSplits, "num-splits", 0, "`splits` an epoch is dealt into; a multiple of --world-size (default: --world-size)")
	fs.IntVar(&d.opts.WorldSize, "world-size", 1, "`ranks` of the job")
	fs.BoolVar(&d.opts.DropRemainder, "drop-remainder", false, "drop fewer than --num-splits rows so every split has as many rows")
	fs.BoolVar(&d.noProgress, "no-progress", false, "never draw progress on stderr")
	fs.StringVar(&d.opts.Filter, "filter", "", "keep only the rows for which the SQL-like `condition` holds, such as \"label = 3 AND x > 0.5\" (see README, Row filters); Parquet row groups it rules out are not read")
	fs.StringVar(&d.opts.Format, "format", "", "read every file as `name`: parquet, orc, avro, csv, tsv, jsonl or json, whatever the file is called (default: by extension; a file named explicitly without a known one by its first bytes: Parquet, ORC or Avro magic, else CSV or JSON where they look like text)")
	fs.StringVar(&d.opts.CacheDir, "cache-dir", "", "keep the bytes read from object stores in this local `folder`, shared by every process of the machine that names it: later epochs and other ranks read them from there (see docs/storage.md)")
	fs.Var((*sizeFlag)(&d.opts.CacheBytes), "cache-bytes", "bound of --cache-dir, such as 50G: past it the least recently read blocks go (default 10G)")
	d.iceberg.register(fs)
	fs.StringVar(&d.text.delimiter, "delimiter", "", "CSV field `delimiter`, one byte (default: detected from ',', '|', ';' and tab; tab for .tsv)")
	fs.StringVar(&d.text.quote, "quote", "", "CSV quote `character`, one byte, or none (default: detected: \", ' or none)")
	fs.StringVar(&d.text.escape, "escape", "", "CSV escape `character` inside quotes, one byte; the quote itself is doubling (default: detected: doubling, \\ or the other quote)")
	fs.StringVar(&d.text.comment, "comment", "", "CSV comment `prefix`, one byte, or none: lines it starts are skipped and it ends a row (default: detected: none or '#')")
	fs.BoolVar(&d.text.noHeader, "no-header", false, "CSV files have no header line: columns are column0, column1, ... (default: detected)")
	fs.BoolVar(&d.text.header, "header", false, "the first line of CSV files names the columns (default: detected)")
	fs.Var(&d.text.nullStrings, "null-strings", "unquoted CSV `values` read as null, comma-separated (default: the empty value)")
	fs.BoolVar(&d.text.nullPadding, "null-padding", false, "read a CSV row with fewer fields than the header as if its missing values were null (a longer row stays an error)")
	fs.BoolVar(&d.text.countRows, "count-rows", false, "count the rows of text files when planning (reads them once; --drop-remainder needs it)")
	fs.BoolVar(&d.text.skipBadRows, "skip-bad-rows", false, "skip text records that do not fit the schema instead of failing")
}

// formats are the drivers the commands read: Parquet and ORC, then the
// text formats with the text flags.
func (d *datasetFlags) formats() []formats.Format {
	o := text.Options{NoHeader: d.text.noHeader, Header: d.text.header, NullStrings: d.text.nullStrings, NullPadding: d.text.nullPadding, Count: d.text.countRows}
	if d.text.delimiter != "" {
		o.Delimiter = d.text.delimiter[0]
	}
	// check has refused what these do not read.
	o.Quote, o.NoQuote, _ = text.DialectByte(d.text.quote, true)
	o.Escape, _, _ = text.DialectByte(d.text.escape, false)
	o.Comment, o.NoComment, _ = text.DialectByte(d.text.comment, true)
	if d.text.skipBadRows {
		o.BadRows = text.BadRowsSkip
	}
	return append(slices.Clone(dataFormats), text.All(o)...)
}

// check refuses, as usage errors, values stream.Open would refuse later as
// failures: they are mistakes in the command line, not in the data.
func (d *datasetFlags) check() error {
	switch {
	case d.opts.WorldSize < 1:
		return usageErrorf("--world-size %d must be at least 1", d.opts.WorldSize)
	case d.opts.NumSplits < 0:
		return usageErrorf("--num-splits %d must not be negative", d.opts.NumSplits)
	case d.opts.NumSplits > 0 && d.opts.NumSplits%d.opts.WorldSize != 0:
		return usageErrorf("--num-splits %d is not a multiple of --world-size %d", d.opts.NumSplits, d.opts.WorldSize)
	case d.opts.Epoch < 0:
		return usageErrorf("--epoch %d must not be negative", d.opts.Epoch)
	case d.opts.ClumpSize < 0:
		return usageErrorf("--clump-size %d must not be negative", d.opts.ClumpSize)
	case d.opts.ShuffleWindow < 0:
		return usageErrorf("--shuffle-window %d must not be negative", d.opts.ShuffleWindow)
	case d.opts.ShufflePasses < 0:
		return usageErrorf("--shuffle-passes %d must not be negative", d.opts.ShufflePasses)
	case d.opts.CacheBytes < 0:
		return usageErrorf("--cache-bytes %d must not be negative", d.opts.CacheBytes)
	case d.opts.ShuffleMemory < 0:
		return usageErrorf("--shuffle-memory %d must not be negative", d.opts.ShuffleMemory)
	case d.opts.ShuffleWindow > 0 && d.opts.ShuffleMemory > 0:
		return usageErrorf("--shuffle-window and --shuffle-memory both size the shuffle window: give one")
	case len(d.text.delimiter) > 1:
		return usageErrorf("--delimiter %q is more than one byte", d.text.delimiter)
	case d.text.header && d.text.noHeader:
		return usageErrorf("--header and --no-header contradict each other")
	case d.opts.Format != "" && formats.Named(d.formats(), d.opts.Format) == nil:
		return usageErrorf("--format %q is not a format (%s)", d.opts.Format, strings.Join(formats.Names(d.formats()), ", "))
	case d.opts.Format != "" && (d.iceberg.table || d.iceberg.catalog != ""):
		return usageErrorf("--format and --iceberg or --catalog exclude each other: a table names its data files' formats")
	}
	for _, f := range []struct {
		name, v string
		off     bool
	}{{"quote", d.text.quote, true}, {"escape", d.text.escape, false}, {"comment", d.text.comment, true}} {
		if _, _, err := text.DialectByte(f.v, f.off); err != nil {
			return usageErrorf("--%s %v", f.name, err)
		}
	}
	if d.opts.Filter != "" {
		if _, err := filter.Parse(d.opts.Filter); err != nil {
			return usageErrorf("--filter: %v", err)
		}
	}
	return nil
}

// options are the flags' stream options over urls, with the drivers the
// text flags configure.
func (d *datasetFlags) options(urls []string) stream.Options {
	o := d.opts
	o.URLs = urls
	o.Formats = d.formats()
	return o
}

// openDataset opens the dataset, showing on a terminal how many footers
// have been read so far: on object storage with thousands of files, planning
// is the slow part of both inspect and cat.
func openDataset(ctx context.Context, e *env, opts stream.Options, showProgress bool) (*stream.Dataset, error) {
	var (
		mu    sync.Mutex
		files = map[string]bool{}
		bytes atomic.Int64
	)
	userWrap := opts.Storage.Wrap
	opts.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		if userWrap != nil {
			b = userWrap(b)
		}
		c := storage.NewCounting(b)
		c.OnRead = func(key string, _ int64, n int) {
			bytes.Add(int64(n))
			mu.Lock()
			files[key] = true
			mu.Unlock()
		}
		return c
	}
	p := startProgress(e.stderr, showProgress, func(el time.Duration) string {
		mu.Lock()
		n := len(files)
		mu.Unlock()
		return fmt.Sprintf("planning: %d footers read, %s, %.0fs", n, humanBytes(bytes.Load()), el.Seconds())
	})
	ds, err := stream.Open(ctx, opts)
	p.Stop()
	return ds, err
}
