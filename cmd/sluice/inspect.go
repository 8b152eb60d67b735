package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/stream"
)

const inspectHead = `Usage: sluice inspect [flags] URL...
       sluice inspect [flags] --catalog SPEC namespace.table

Plans the dataset as stream.Open does, reading only the files' footers, and
prints its schema, its files with their rows, row groups and sizes, the
chunks, the splits of one epoch with the rank that owns each and its row
count, and two fingerprints:

  plan fingerprint   a hash of the files, their sizes and the chunk list
  order fingerprint  the plan and every order option (columns, seed,
                     shuffle, clump size, window, splits, drop remainder):
                     what a checkpoint of a job opened with the same
                     options carries ("sluice checkpoint show" prints it)

The splits depend on --num-splits, --shuffle, --seed and --epoch, never on
--world-size, which only says which rank owns which split.

It also prices the order before any data is read: the shuffle window's rows
(--shuffle-window, or the rows --shuffle-memory holds at the plan's estimate
of a decoded row), the places (pieces of the dataset) a window draws from,
the decoded memory of a window, and the mixing that batches of --batch-size
rows get on data sorted by label, the worst case: the mean total variation
distance between a batch's label histogram and the global one, as the bench
measures it (0.04 is a full shuffle's figure for 1024-row batches, 0.9 a
batch of one class). It runs the epoch's own order over the plan, for a
sample of windows.

Flags:
`

type inspectConfig struct {
	ds        datasetFlags
	json      bool
	rowGroups bool
	badUTF8   string
	batchSize int
}

func inspectFlags() (*flag.FlagSet, *inspectConfig) {
	cfg := &inspectConfig{}
	fs := newFlagSet("inspect")
	cfg.ds.register(fs)
	fs.BoolVar(&cfg.json, "json", false, "print one JSON document (every file, row group, chunk and piece) instead of tables")
	fs.BoolVar(&cfg.rowGroups, "row-groups", false, "list every row group of every file in the table")
	fs.StringVar(&cfg.badUTF8, "invalid-utf8", "error", "what a CSV header name or JSON key that is not UTF-8 does in the sample: `error` fails (a CSV header; a JSON file none of whose sampled records reads) or leaves the record out of the types (JSON), and a counted row with such a value is a bad row; replace reads it with U+FFFD, as cat --invalid-utf8 replace does")
	fs.IntVar(&cfg.batchSize, "batch-size", 0, "`rows` per batch of the expected mixing (default 1024)")
	return fs, cfg
}

func inspectUsage() string {
	fs, _ := inspectFlags()
	return inspectHead + flagDefaults(fs) + `
Examples:
  sluice inspect data/
  sluice inspect 'data/*.parquet' --num-splits 8 --world-size 4 --shuffle --seed 42 --epoch 3
  sluice inspect data/ --json | jq '.splits[].rows'
  sluice inspect data/ --filter "label = 3 AND x > 0.5"
  sluice inspect data/ --shuffle --seed 42 --shuffle-memory 2G --batch-size 1024
`
}

// The JSON document of inspect --json. Field names are snake_case and stable.
type inspectReport struct {
	URLs        []string       `json:"urls"`
	Options     inspectOptions `json:"options"`
	Schema      []columnInfo   `json:"schema"`
	Files       []fileInfo     `json:"files"`
	Totals      totalsInfo     `json:"totals"`
	Chunks      []chunkInfo    `json:"chunks"`
	Splits      []splitInfo    `json:"splits"`
	Ranks       []rankInfo     `json:"ranks"`
	Overlap     overlapInfo    `json:"overlap"`
	Pruning     *pruningInfo   `json:"pruning,omitempty"`
	Plan        string         `json:"plan"`
	Fingerprint string         `json:"fingerprint"`
	// Price is what the order costs and gives (stream.Estimate).
	Price priceInfo `json:"price"`

	// ORCWithoutRowIndex are ORC files whose cut stripes are read whole.
	ORCWithoutRowIndex []string `json:"orc_without_row_index,omitempty"`
	// Iceberg is set for a table (--iceberg).
	Iceberg *icebergInfo `json:"iceberg,omitempty"`
}

type inspectOptions struct {
	Columns       []string `json:"columns"`
	Shuffle       bool     `json:"shuffle"`
	Seed          uint64   `json:"seed"`
	Epoch         int64    `json:"epoch"`
	ClumpSize     int      `json:"clump_size"`
	ShuffleWindow int      `json:"shuffle_window"`
	ChunkBytes    int64    `json:"chunk_bytes"`
	NumSplits     int      `json:"num_splits"`
	WorldSize     int      `json:"world_size"`
	DropRemainder bool     `json:"drop_remainder"`
}

// priceInfo is stream.Estimate: -1 where row counts are unknown before
// reading (the mixing, the windows' rows), 0 where the bytes are.
type priceInfo struct {
	WindowRows     int     `json:"window_rows"`
	ShuffleMemory  int64   `json:"shuffle_memory,omitempty"`
	RowBytes       float64 `json:"row_bytes"`
	Windows        int     `json:"windows"`
	MeanWindowRows float64 `json:"mean_window_rows"`
	MaxWindowRows  int64   `json:"max_window_rows"`
	MeanPlaces     float64 `json:"mean_places"`
	MinPlaces      int     `json:"min_places"`
	WindowBytes    int64   `json:"window_bytes"`
	StoredBytes    int64   `json:"window_stored_bytes"`
	PeakBytes      int64   `json:"window_peak_bytes"`
	DecodersPeak   int64   `json:"decoders_peak_bytes"`
	BatchSize      int     `json:"batch_size"`
	Mixing         float64 `json:"mixing"`
	MixingBatches  int     `json:"mixing_batches"`
}

type columnInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

type fileInfo struct {
	URL    string `json:"url"`
	Rel    string `json:"rel"`
	Format string `json:"format"`
	Size   int64  `json:"size"`
	// Rows is -1 where the format does not know it before reading.
	Rows          int64      `json:"rows"`
	SelectedBytes int64      `json:"selected_bytes"`
	RowGroups     []unitInfo `json:"row_groups"`
	// Whole says why a CSV or JSON Lines file is read as one unit, not in
	// byte ranges (a quoted line end).
	Whole string `json:"whole,omitempty"`
	// Dialect says how a CSV or TSV file is read: its delimiter, quote,
	// escape, comment prefix, header and the lines skipped before it, as
	// detected or given by the flags.
	Dialect string `json:"dialect,omitempty"`
}

type unitInfo struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Pruned is set where --filter rules the row group out.
	Pruned bool `json:"pruned,omitempty"`
}

type totalsInfo struct {
	Files         int   `json:"files"`
	Rows          int64 `json:"rows"`
	RowGroups     int   `json:"row_groups"`
	Size          int64 `json:"size"`
	SelectedBytes int64 `json:"selected_bytes"`
	// EpochRows is the rows the epoch's splits hold: Rows less what
	// --drop-remainder drops.
	EpochRows int64 `json:"epoch_rows"`
}

type chunkInfo struct {
	File  int   `json:"file"`
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

type splitInfo struct {
	Split  int         `json:"split"`
	Rank   int         `json:"rank"`
	Rows   int64       `json:"rows"`
	Pieces []pieceInfo `json:"pieces"`
}

type pieceInfo struct {
	Chunk int   `json:"chunk"`
	File  int   `json:"file"`
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// overlapInfo is what the split boundaries cost: row groups they cut are
// read by pages where the file has a page index, whole by each side where
// it has none.
type overlapInfo struct {
	CutRowGroups   int   `json:"cut_row_groups"`
	PagedRowGroups int   `json:"paged_row_groups"`
	RefetchBytes   int64 `json:"refetch_bytes"`
}

type rankInfo struct {
	Rank   int   `json:"rank"`
	Splits []int `json:"splits"`
	Rows   int64 `json:"rows"`
}

func runInspect(ctx context.Context, e *env, args []string) error {
	fs, cfg := inspectFlags()
	urls, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(urls) == 0 {
		return usageErrorf("no data URL given")
	}
	if err := cfg.ds.check(); err != nil {
		return err
	}
	if cfg.badUTF8 != "error" && cfg.badUTF8 != "replace" {
		return usageErrorf("--invalid-utf8 %q must be error or replace", cfg.badUTF8)
	}
	if cfg.batchSize < 0 {
		return usageErrorf("--batch-size %d must not be negative", cfg.batchSize)
	}
	o := cfg.ds.options(urls)
	o.BatchSize = cfg.batchSize
	opts, tbl, err := cfg.ds.iceberg.open(ctx, urls, o)
	if err != nil {
		return err
	}
	if tbl != nil {
		defer tbl.Close()
	}
	replaceInvalidUTF8(&opts, cfg.badUTF8)
	ds, err := openDataset(ctx, e, opts, !cfg.ds.noProgress && e.progress(false))
	if err != nil {
		return err
	}
	defer ds.Close()
	rep := buildReport(urls, cfg, ds)
	if err := addPruning(ctx, rep, cfg.ds.opts.Filter, ds); err != nil {
		return err
	}
	if tbl != nil {
		rep.Iceberg = newIcebergInfo(tbl)
		if o := cfg.ds.iceberg.opened; o.Type != "" {
			rep.Iceberg.Catalog = fmt.Sprintf("%q (%s)", o.Name, o.From)
			rep.Iceberg.Table = urls[0]
		}
	}
	if cfg.json {
		return writeJSON(e.stdout, rep)
	}
	return writeInspect(e.stdout, rep, len(urls) == 1, cfg.rowGroups)
}

func buildReport(urls []string, cfg *inspectConfig, ds *stream.Dataset) *inspectReport {
	st := ds.StateDict()
	rep := &inspectReport{
		URLs: urls,
		Options: inspectOptions{
			Columns:       st.Columns,
			Shuffle:       st.Shuffle,
			Seed:          st.Seed,
			Epoch:         st.Epoch,
			ClumpSize:     st.ClumpSize,
			ShuffleWindow: st.ShuffleWindow,
			ChunkBytes:    cfg.ds.opts.ChunkBytes,
			NumSplits:     st.NumSplits,
			WorldSize:     cfg.ds.opts.WorldSize,
			DropRemainder: st.DropRemainder,
		},
		Plan:        ds.Fingerprint(),
		Fingerprint: st.Fingerprint,
	}
	if rep.Options.ChunkBytes == 0 {
		rep.Options.ChunkBytes = 1 << 20 // stream.Options.ChunkBytes' documented default
	}
	for _, f := range ds.Schema().Fields() {
		rep.Schema = append(rep.Schema, columnInfo{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable})
	}
	rowsKnown := true
	for _, f := range ds.Files() {
		fi := fileInfo{URL: f.URL, Rel: f.Rel, Format: f.Format, Size: f.Size, Rows: f.Rows, RowGroups: []unitInfo{}, Whole: text.Whole(f), Dialect: text.Dialect(f)}
		for _, u := range f.Units {
			fi.RowGroups = append(fi.RowGroups, unitInfo{Rows: u.Rows, Bytes: u.Bytes})
			fi.SelectedBytes += u.Bytes
		}
		rep.Files = append(rep.Files, fi)
		rep.Totals.Files++
		rep.Totals.RowGroups += len(f.Units)
		rep.Totals.Size += f.Size
		rep.Totals.SelectedBytes += fi.SelectedBytes
		if f.Rows < 0 {
			rowsKnown = false
		}
		rep.Totals.Rows += max(f.Rows, 0)
	}
	for _, c := range ds.Chunks() {
		rep.Chunks = append(rep.Chunks, chunkInfo{File: c.Fragment, Start: c.Start, End: c.End, Rows: c.Rows(), Bytes: c.Bytes})
	}
	world := cfg.ds.opts.WorldSize
	rep.Ranks = make([]rankInfo, world)
	for r := range rep.Ranks {
		rep.Ranks[r] = rankInfo{Rank: r, Splits: []int{}}
	}
	for s, sp := range ds.Splits() {
		si := splitInfo{Split: s, Rank: s % world, Rows: sp.Rows, Pieces: []pieceInfo{}}
		for _, p := range sp.Pieces {
			si.Pieces = append(si.Pieces, pieceInfo{Chunk: p.Chunk, File: p.Fragment, Start: p.Start, End: p.End})
		}
		rep.Splits = append(rep.Splits, si)
		ri := &rep.Ranks[si.Rank]
		ri.Splits = append(ri.Splits, s)
		if sp.Rows < 0 || ri.Rows < 0 {
			ri.Rows = -1
		} else {
			ri.Rows += sp.Rows
		}
		if sp.Rows < 0 {
			rowsKnown = false
		}
		rep.Totals.EpochRows += max(sp.Rows, 0)
	}
	if !rowsKnown {
		rep.Totals.Rows, rep.Totals.EpochRows = -1, -1
	}
	ov := ds.Overlap()
	rep.Overlap = overlapInfo{CutRowGroups: ov.CutUnits, PagedRowGroups: ov.PagedUnits, RefetchBytes: ov.Bytes}
	e := ds.Estimate()
	rep.Price = priceInfo{WindowRows: e.WindowRows, ShuffleMemory: cfg.ds.opts.ShuffleMemory, RowBytes: e.RowBytes,
		Windows: e.Windows, MeanWindowRows: e.MeanRows, MaxWindowRows: e.MaxRows, MeanPlaces: e.MeanPlaces, MinPlaces: e.MinPlaces,
		WindowBytes: e.WindowBytes, StoredBytes: e.WindowStoredBytes, PeakBytes: e.PeakBytes(cfg.ds.opts.Shuffle),
		DecodersPeak: e.DecodersPeakBytes,
		BatchSize:    max(cfg.batchSize, 0), Mixing: e.Mixing, MixingBatches: e.MixingBatches}
	if rep.Price.BatchSize == 0 {
		rep.Price.BatchSize = 1024 // stream.Options.BatchSize's documented default
	}
	rep.ORCWithoutRowIndex = orcWithoutRowIndex(ds.Files())
	return rep
}

func writeInspect(w io.Writer, rep *inspectReport, oneURL, rowGroups bool) error {
	t := rep.Totals
	if rep.Iceberg != nil {
		writeIcebergInfo(w, rep.Iceberg)
	}
	fmt.Fprintf(w, "dataset: %d %s, %s rows, %d %s, %s (%s in the selected columns)\n",
		t.Files, plural(t.Files, "file", "files"), count(t.Rows), t.RowGroups, plural(t.RowGroups, "row group", "row groups"),
		humanBytes(t.Size), humanBytes(t.SelectedBytes))

	fmt.Fprintln(w, "\nschema:")
	cols := newTable("COLUMN", "TYPE", "NULLABLE")
	for _, c := range rep.Schema {
		cols.add("  "+c.Name, c.Type, yesNo(c.Nullable))
	}
	cols.head[0] = "  COLUMN"
	cols.write(w)

	fmt.Fprintln(w)
	files := newTable("FILE", ">ROWS", ">ROW GROUPS", ">SIZE", ">SELECTED")
	for _, f := range rep.Files {
		name := f.URL
		if oneURL && f.Rel != "" {
			name = f.Rel // the argument already says where they are
		}
		files.add(name, count(f.Rows), strconv.Itoa(len(f.RowGroups)), humanBytes(f.Size), humanBytes(f.SelectedBytes))
		if rowGroups {
			for i, u := range f.RowGroups {
				name := fmt.Sprintf("  row group %d", i)
				if u.Pruned {
					name += " (pruned)"
				}
				files.add(name, count(u.Rows), "", "", humanBytes(u.Bytes))
			}
		}
	}
	files.add("total", count(t.Rows), strconv.Itoa(t.RowGroups), humanBytes(t.Size), humanBytes(t.SelectedBytes))
	files.write(w)
	for _, f := range rep.Files {
		if f.Whole != "" {
			fmt.Fprintf(w, "%s is read whole, not in byte ranges: %s\n", f.URL, f.Whole)
		}
	}
	// The files of one text format read alike (the planner refuses them
	// otherwise), so one line per format says how.
	dialects := map[string]bool{}
	for _, f := range rep.Files {
		if f.Dialect != "" && !dialects[f.Format] {
			dialects[f.Format] = true
			fmt.Fprintf(w, "%s files: %s (detected where --delimiter, --quote, --escape, --comment, --header or --no-header do not say)\n", f.Format, f.Dialect)
		}
	}

	o := rep.Options
	fmt.Fprintf(w, "\nchunks: %d%s (target %s of the selected columns)\n", len(rep.Chunks), chunkRange(rep.Chunks), humanBytes(o.ChunkBytes))

	order := "storage order"
	if o.Shuffle {
		order = fmt.Sprintf("shuffled (seed %d, clump size %d, window %d rows)", o.Seed, o.ClumpSize, o.ShuffleWindow)
	}
	fmt.Fprintf(w, "\nepoch %d, %s, %d splits, world size %d", o.Epoch, order, o.NumSplits, o.WorldSize)
	if o.DropRemainder && t.Rows >= 0 {
		fmt.Fprintf(w, ", %d rows dropped to even the splits", t.Rows-t.EpochRows)
	}
	fmt.Fprintln(w, ":")
	splits := newTable(">SPLIT", ">RANK", ">ROWS", ">PIECES")
	for _, s := range rep.Splits {
		splits.add(strconv.Itoa(s.Split), strconv.Itoa(s.Rank), count(s.Rows), strconv.Itoa(len(s.Pieces)))
	}
	splits.add("total", "", count(t.EpochRows), "")
	splits.write(w)
	if o.WorldSize > 1 {
		fmt.Fprintln(w)
		ranks := newTable(">RANK", "SPLITS", ">ROWS")
		for _, r := range rep.Ranks {
			ranks.add(strconv.Itoa(r.Rank), joinInts(r.Splits), count(r.Rows))
		}
		ranks.write(w)
	}

	if ov := rep.Overlap; ov.CutRowGroups > 0 {
		fmt.Fprintf(w, "\nrow groups cut by split boundaries: %d, %d read page by page (page index), %d fetched whole by each side",
			ov.CutRowGroups, ov.PagedRowGroups, ov.CutRowGroups-ov.PagedRowGroups)
		if ov.RefetchBytes > 0 {
			fmt.Fprintf(w, ": %s fetched again (files without a page index: write them with one, or use fewer splits or smaller row groups)", humanBytes(ov.RefetchBytes))
		}
		fmt.Fprintln(w)
	}

	writePrice(w, rep.Price, o.Shuffle)
	writePruning(w, rep.Pruning)
	if n := len(rep.ORCWithoutRowIndex); n > 0 {
		fmt.Fprintf(w, "\nORC files without a row index: %d (their stripes are the row groups above; one cut by a split boundary is read whole by each side)\n", n)
	}

	fmt.Fprintf(w, "\nplan fingerprint:   %s\norder fingerprint:  %s\n", rep.Plan, rep.Fingerprint)
	return nil
}

func chunkRange(chunks []chunkInfo) string {
	if len(chunks) == 0 {
		return ""
	}
	lo, hi := chunks[0], chunks[0]
	for _, c := range chunks {
		if c.Rows < lo.Rows {
			lo = c
		}
		if c.Rows > hi.Rows {
			hi = c
		}
	}
	if lo.Rows < 0 {
		return ""
	}
	if lo.Rows == hi.Rows {
		return fmt.Sprintf(" of %d rows", lo.Rows)
	}
	return fmt.Sprintf(" of %d to %d rows", lo.Rows, hi.Rows)
}

// count writes a row count, or "?" where the format does not know it.
func count(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// writePrice writes what the order costs and gives.
func writePrice(w io.Writer, p priceInfo, shuffled bool) {
	from := ""
	if p.ShuffleMemory > 0 {
		from = fmt.Sprintf(" (what --shuffle-memory %s holds at %.1f bytes a decoded row)", humanBytes(p.ShuffleMemory), p.RowBytes)
	}
	if !shuffled {
		from += ", read in storage order (--shuffle shuffles them)"
	}
	fmt.Fprintf(w, "\nshuffle window: %d rows%s\n", p.WindowRows, from)
	if p.Windows == 0 {
		return
	}
	fmt.Fprintf(w, "  windows:        %d, ", p.Windows)
	if p.MaxWindowRows < 0 {
		fmt.Fprintln(w, "rows unknown before reading")
	} else {
		fmt.Fprintf(w, "%.0f rows on average, %d at most (a window holds at least a row group)\n", p.MeanWindowRows, p.MaxWindowRows)
	}
	fmt.Fprintf(w, "  places:         %.1f a window on average, %d at least (the pieces of the dataset a window draws from)\n", p.MeanPlaces, p.MinPlaces)
	if p.WindowBytes > 0 {
		while := "decoded"
		if shuffled {
			while = "decoded and permuted"
		}
		fmt.Fprintf(w, "  memory:         about %s decoded for the largest window (%.1f bytes a row), %s stored; it peaks at about %s while it is %s, and each window read ahead holds as much; the windows decoded at once, about %s\n",
			humanBytes(p.WindowBytes), p.RowBytes, humanBytes(p.StoredBytes), humanBytes(p.PeakBytes), while, humanBytes(p.DecodersPeak))
	}
	if p.Mixing >= 0 {
		fmt.Fprintf(w, "  mixing:         %.3f expected for %d-row batches on label-sorted data, the worst case (0 perfect, about 0.04 a full shuffle, 0.9 one class a batch; %d batches of the epoch's order)\n", p.Mixing, p.BatchSize, p.MixingBatches)
	} else {
		fmt.Fprintln(w, "  mixing:         unknown: row counts are not known before reading")
	}
}
