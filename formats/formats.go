// Package formats is the house of sluice's file formats: the driver
// interface a format implements (Format), and the planner that turns URLs
// into fragments with what their footers know and reads row ranges of them
// with column projection. It knows nothing of splits, shuffles or streams,
// and no format is built in: drivers live in their own packages
// (formats/parquet) and can be written outside this module, as a
// database/sql driver can.
//
// Planning and reading are separate, as in iceberg-go: Plan fetches every
// footer once, up front and concurrently; Scan.Fetch then fetches only
// the stored bytes a range needs, and Scan.Decode decodes them.
//
// What the planner gives the drivers' readers on top of their own work:
// row masks (rows of a file that are not part of the dataset, such as
// Iceberg position deletes) and row filters are applied to what a driver
// decodes, so a driver that only reads rows is complete; a driver may use
// the filter to skip what its statistics rule out.
package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/storage"
)

// Sentinel errors callers can test with errors.Is.
var (
	// ErrCorrupt is wrapped when a file is not a valid file of its format:
	// truncated, empty, or with a malformed footer or page.
	ErrCorrupt = errors.New("corrupt or unreadable file")
	// ErrSchema is wrapped when files disagree on a column's type, or a
	// requested column is missing.
	ErrSchema = errors.New("schema mismatch")
	// ErrEmpty is wrapped when the URLs name no file of a known format.
	ErrEmpty = errors.New("no data files")
	// ErrNotFound is wrapped when a file or object does not exist. It is
	// storage.ErrNotFound, named here so that a caller of formats need not
	// import storage to test for it.
	ErrNotFound = storage.ErrNotFound
	// ErrChanged is wrapped when a file or object is not the version that
	// was planned (rewritten since): storage.ErrChanged, named here as
	// ErrNotFound is.
	ErrChanged = storage.ErrChanged
)

// Unit is a piece of a fragment that can be read on its own: a Parquet row
// group, an ORC stripe, a byte range of a text file.
type Unit struct {
	// Rows is the exact row count, or -1 where the format does not know it
	// before reading (CSV, JSON).
	Rows int64
	// Bytes is the stored size of the selected columns of this unit: what
	// reading it fetches.
	Bytes int64
	// Offset is where the unit starts in the file, for formats whose units
	// are byte ranges; informational otherwise.
	Offset int64
	// Paged is set where a read of some of the unit's rows fetches only
	// what those rows need (a Parquet row group with a page index), not the
	// whole unit: a unit cut by a split boundary is then fetched about once.
	Paged bool
	// Decoded estimates the bytes the unit's selected columns take once
	// decoded into Arrow memory, as far as the footer tells: what a
	// window's memory is sized by (stream.Options.ShuffleMemory). The
	// Parquet driver counts fixed-width columns exactly from their Arrow
	// type and the others by their column chunks' uncompressed size
	// (close for plain-encoded strings; a dictionary-encoded column counts
	// its dictionary once, so it is low). 0 where the driver cannot tell
	// before reading.
	Decoded int64
}

// RowMask names rows of a file that are not part of the dataset, such as
// the rows an Iceberg position delete removes. Rows are the file's own row
// numbers, from 0.
type RowMask struct {
	// Deleted holds the masked rows, ascending, each once.
	Deleted []int64
}

// Fragment is one file of a dataset.
type Fragment struct {
	// URL names the file for errors and logs.
	URL string
	// Rel is the file's key relative to the URL it was found under; plans
	// fingerprint Rel, not URL, so a copied dataset is the same plan.
	Rel string
	// Format is the name of the fragment's format ("parquet").
	Format string
	// Size is the file size in bytes.
	Size int64
	// Rows is the exact row count, or -1 if not known before reading. With
	// a mask it counts the rows left; with a filter it is -1.
	Rows int64
	// Units are the row groups (or stripes, or byte ranges) in file order,
	// as planning sees them: masked rows left out, counts unknown (-1)
	// behind a filter.
	Units []Unit
	// Schema is the file's own Arrow schema (all columns).
	Schema *arrow.Schema
	// Source reaches the file's bytes: Source.ReaderAt(ctx) reads ranges,
	// with retries, request limits and byte accounting.
	Source storage.Source
	// Meta is the driver's own state for the file, set by Inspect (a parsed
	// footer), read by Fetch and Decode.
	Meta any
	// Mask, if set, names rows that reads leave out.
	Mask *RowMask

	format Format
	cache  Cache
	// filter, if set, is the fragment's own row filter (PlanFiles): rows
	// it fails are left out after the mask.
	filter Filter
	// fileCols maps the dataset's read columns onto the file's, where a
	// caller named them (PlanFiles): a dataset column the map lacks reads
	// as null. nil: the names are the same.
	fileCols map[string]string
	// readSchema is the dataset's read schema in the file's names, holding
	// only the columns the file has (with fileCols), else nil.
	readSchema *arrow.Schema
	// inspect and mapColumns are File.Inspect and File.Columns.
	inspect    []string
	mapColumns func(*arrow.Schema) (map[string]string, error)
	// evolve is what File.Convert and File.Defaults give, else nil.
	evolve *evolution
	// fileStarts[u] is the file row unit u starts at (len(Units)+1
	// entries), where the driver knows its counts.
	fileStarts []int64
}

// CacheKey names what a cache holds for f under a format's purpose: the
// object's location, size, modification time and ETag.
func (f *Fragment) CacheKey(purpose string) []byte {
	o := f.Source.Object
	return fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%s", purpose, f.URL, o.Size, o.ModTime.UnixNano(), o.ETag)
}

// Cache is the plan's cache, or nil.
func (f *Fragment) Cache() Cache { return f.cache }

// Format is one file format: a driver. Implementations must be safe for
// concurrent use: Inspect, Fetch and Decode are called from many goroutines.
type Format interface {
	// Name is a short lower-case name such as "parquet".
	Name() string
	// Match reports whether a key found in a directory or glob listing is a
	// file of this format (by its name).
	Match(key string) bool
	// Inspect reads what the file's footer knows. It fills Units, Rows and
	// Schema, and may keep parsed metadata in Meta. columns are the names
	// read from the file (nil for all): Unit.Bytes counts only those.
	Inspect(ctx context.Context, f *Fragment, columns []string) error
	// Fetch fetches the stored bytes r needs before decoding, so that a
	// reader keeps many fetches in flight while only as many decodes run as
	// there are cores. A format that reads as it decodes returns nil.
	Fetch(ctx context.Context, f *Fragment, r *Read) (Buffer, error)
	// Decode delivers the rows of r, projected onto r.Schema, in batches of
	// at most r.BatchRows rows, from a Fetch result whose range holds r's
	// (nil if Fetch returned nil). The consumer owns each batch.
	Decode(ctx context.Context, f *Fragment, fetched Buffer, r *Read) iter.Seq2[arrow.RecordBatch, error]
}

// PageFinder is implemented by a format that can find, ahead of reading,
// where the pages of a unit lie when the file does not say (a Parquet row
// group without a page index, whose page headers are walked): a read of
// part of the unit then fetches only its pages. FindPages keeps what it
// found where the format keeps such things (the fragment's Meta and the
// plan's Cache); a unit it would not read by pages is left alone.
type PageFinder interface {
	FindPages(ctx context.Context, f *Fragment, unit int) error
}

// FindPages has the format of fragment i find the pages of its unit ahead
// of reading, where it is a PageFinder (else it does nothing). Streams
// call it at plan time for the units split boundaries cut.
func (d *Scan) FindPages(ctx context.Context, i, unit int) error {
	if i < 0 || i >= len(d.Fragments) {
		return fmt.Errorf("formats: fragment %d of a dataset of %d", i, len(d.Fragments))
	}
	f := d.Fragments[i]
	pf, ok := f.format.(PageFinder)
	if !ok {
		return nil
	}
	return guard(f.URL, fmt.Sprintf("unit %d", unit), func() error { return pf.FindPages(ctx, f, unit) })
}

// Settler is implemented by a format whose files' schemas are settled
// together once every file is inspected: a text format infers column types
// from a sample of its first files and widens them across files, which no
// single Inspect can do. Plan calls Settle once per such format with its
// fragments in dataset order, before it unifies the schemas; Settle may
// replace their Schema and fill in their units' row counts.
type Settler interface {
	Settle(ctx context.Context, frags []*Fragment) error
}

// settle runs each Settler format over its own fragments.
func settle(ctx context.Context, fs []Format, frags []*Fragment) error {
	for _, f := range fs {
		s, ok := f.(Settler)
		if !ok {
			continue
		}
		var mine []*Fragment
		for _, fr := range frags {
			if fr.format == f {
				mine = append(mine, fr)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if err := s.Settle(ctx, mine); err != nil {
			return fmt.Errorf("formats: %s: %w", f.Name(), err)
		}
	}
	return nil
}

// Buffer is what a Fetch holds in memory for Decode.
type Buffer interface {
	// Size is the memory the buffer holds, in bytes.
	Size() int64
}

// Range is a part of a file: rows [Start, End) where the file's counts are
// known, and units [FirstUnit, EndUnit), the units that hold those rows or,
// where counts are unknown (Start and End -1), the units to read whole.
type Range struct {
	Start, End         int64
	FirstUnit, EndUnit int
}

// Known reports whether the range is in rows.
func (r Range) Known() bool { return r.Start >= 0 }

// Read is one read of a fragment, as a driver gets it.
type Read struct {
	// Range is in the file's own rows and units.
	Range Range
	// Schema is what batches carry: columns of the file, possibly of wider
	// types than the file's (see Plan).
	Schema *arrow.Schema
	// Filter, if set, is the dataset's row filter. The planner applies it
	// to what Decode yields; a driver may use it to skip units or pages
	// its statistics show cannot match, and must not drop rows otherwise.
	Filter Filter
	// BatchRows bounds the rows of a batch.
	BatchRows int
	// Mem allocates the batches.
	Mem memory.Allocator
	// Skipped, if set, is told of rows the driver leaves out because they
	// do not fit the schema (a text format's BadRowsSkip), so that a
	// stream can count them. A driver reports each such row of the read
	// once, from the goroutine running Decode, and reads that cut one
	// unit in rows report its rows once between them.
	Skipped func(rows int64)
}

// Filter is a row predicate over a dataset's columns.
type Filter interface {
	// Columns are the top-level columns the predicate reads.
	Columns() []string
	// Keep returns, for each row of b, whether it passes (a null counts as
	// false). b holds at least Columns().
	Keep(ctx context.Context, b arrow.RecordBatch) (*array.Boolean, error)
	// String is the predicate's canonical text: it goes into the plan's
	// fingerprint.
	String() string
}

// Cache keeps what a plan learned of a file between runs, so that a
// restarted job skips its footer reads. pebblestore.Store.KV (package
// checkpoint/pebblestore) gives one in the job's checkpoint database. Entries are keyed by the object's
// location, size, modification time and ETag, so a changed object misses;
// any error from Get counts as a miss.
type Cache interface {
	Get(ctx context.Context, key []byte) ([]byte, error)
	Set(ctx context.Context, key, value []byte) error
}

// PlanOptions configure Plan.
type PlanOptions struct {
	// Columns selects columns by top-level name, in the order the batches
	// will carry them. Default (nil): every column of the first file.
	Columns []string
	// Concurrency is the number of footers fetched at once. Default 16:
	// footer reads are latency-bound, not CPU-bound.
	Concurrency int
	// Storage configures how URLs are opened (openers, wrappers).
	Storage storage.Options
	// Formats are the drivers tried, in order: a file is read by the first
	// whose Match accepts its name; a file named explicitly that none
	// matches, by what its first bytes are (Parquet's, ORC's or Avro's
	// magic, else CSV, JSON or JSON Lines where they look like text), else
	// by the first.
	// Required: no format is built in.
	Formats []Format
	// Format, if set, names the driver of Formats (by its Name, such as
	// "csv") that reads every file whatever its name: files named
	// otherwise (.tbl, .dat, .txt, none) and every file of a directory or
	// glob listing (names starting with '.' or '_' are still skipped).
	// A name no driver of Formats has is refused. Default "": each file
	// is read by the first driver whose Match accepts its name.
	Format string
	// Cache, if set, keeps footers between plans. Default: none.
	Cache Cache
	// Filter, if set, keeps only the rows it passes. Row counts behind a
	// filter are unknown until read. A filter with a method
	// Check(*arrow.Schema) error (package filter's) is checked against the
	// unified schema by Plan.
	Filter Filter
	// Masks, if set, gives the rows to leave out of a file, by URL.
	Masks map[string]*RowMask
	// Schema, for PlanFiles only, is the dataset's own schema, such as a
	// table's: every column the batches may carry, by its current name.
	// A column takes the wider of its type here and the files' (a table's
	// promoted types), and reads as null from a file that lacks it (see
	// File.Columns). Default (nil): the files' schemas decide, as in Plan.
	Schema *arrow.Schema

	// named is the driver Format names, found by check.
	named Format
}

// Scan is a planned set of fragments with one unified schema, the
// projection and the filter: what Plan and PlanFiles make, and what Fetch
// and Decode read. (Package stream's Dataset is the stream over a Scan.)
type Scan struct {
	// Schema is the projected schema every batch has.
	Schema *arrow.Schema
	// Columns are the selected column names (Schema's field names).
	Columns   []string
	Fragments []*Fragment
	// Version names what the files are a version of, such as an Iceberg
	// snapshot ("iceberg snapshot 123"); streams put it in the plan's
	// fingerprint. Default "": the files alone.
	Version string

	// read is Schema with the filter's columns that Schema lacks after it.
	read     *arrow.Schema
	filter   Filter
	resolver *storage.Resolver
}

// Plan resolves urls (files, directories, prefixes and globs, see
// storage.Resolver.Resolve), reads every footer concurrently and unifies the
// schemas of the selected columns.
func Plan(ctx context.Context, urls []string, opts PlanOptions) (_ *Scan, err error) {
	if opts.Schema != nil {
		return nil, errors.New("formats: PlanOptions.Schema is for PlanFiles, whose files name their columns")
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("formats: no URLs given: %w", ErrEmpty)
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	res := storage.NewResolver(opts.Storage)
	defer func() {
		if err != nil {
			res.Close()
		}
	}()
	accept := func(key string) bool { return pickFormat(opts.Formats, key) != nil }
	if opts.named != nil {
		accept = func(string) bool { return true } // every file, whatever its name
	}
	var frags []*Fragment
	seen := map[string]bool{}
	for _, u := range urls {
		srcs, err := res.Resolve(ctx, u, accept)
		if err != nil {
			return nil, fmt.Errorf("formats: %w", err)
		}
		for _, s := range srcs {
			if seen[s.URL] {
				continue // named twice (a directory and a glob): read once
			}
			seen[s.URL] = true
			f := opts.driver(s.Object.Key)
			if opts.named == nil && pickFormat(opts.Formats, s.Object.Key) == nil {
				// Named explicitly with no extension a driver knows: what
				// the bytes are decides.
				f = byContent(ctx, opts.Formats, s, f)
			}
			frags = append(frags, &Fragment{URL: s.URL, Rel: s.Rel, Format: f.Name(), Size: s.Object.Size, Source: s, format: f, cache: opts.Cache, Mask: opts.Masks[s.URL]})
		}
	}
	return finish(ctx, res, frags, opts)
}

// check validates what Plan and PlanFiles share of o, after each has
// checked its own input, and fills in the defaults.
func (o *PlanOptions) check() error {
	if len(o.Formats) == 0 {
		return errors.New("formats: PlanOptions.Formats names no format (import a driver such as formats/parquet)")
	}
	if o.Format != "" {
		o.named = Named(o.Formats, o.Format)
		if o.named == nil {
			return fmt.Errorf("formats: PlanOptions.Format %q names none of the drivers of PlanOptions.Formats (%s)", o.Format, strings.Join(Names(o.Formats), ", "))
		}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Columns != nil && len(o.Columns) == 0 {
		return fmt.Errorf("formats: %w: PlanOptions.Columns selects no column (nil selects all)", ErrSchema)
	}
	if dup := firstDuplicate(o.Columns); dup != "" {
		return fmt.Errorf("formats: %w: column %q selected twice", ErrSchema, dup)
	}
	return nil
}

// finish inspects the fragments and unifies their schemas: the half of
// planning that Plan and PlanFiles share.
func finish(ctx context.Context, res *storage.Resolver, frags []*Fragment, opts PlanOptions) (*Scan, error) {
	// Files are inspected for the selected columns and the filters'.
	inspected := opts.Columns
	if inspected != nil {
		var extra []string
		if opts.Filter != nil {
			extra = append(extra, opts.Filter.Columns()...)
		}
		for _, f := range frags {
			if f.filter != nil {
				extra = append(extra, f.filter.Columns()...)
			}
		}
		for _, c := range extra {
			if !slices.Contains(inspected, c) {
				inspected = append(slices.Clone(inspected), c)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, f := range frags {
		g.Go(func() error {
			cols := inspected
			if f.fileCols != nil {
				cols = f.fileColumns(inspected)
			}
			return guard(f.URL, "footer", func() error { return f.format.Inspect(gctx, f, cols) })
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := settle(ctx, opts.Formats, frags); err != nil {
		return nil, err
	}
	for _, f := range frags {
		if err := f.planUnits(opts.Filter != nil || f.filter != nil); err != nil {
			return nil, err
		}
	}
	// Checked before unify, which would report a filter's missing column
	// as a missing selected one.
	if opts.Filter != nil && len(frags) > 0 && opts.Schema == nil {
		for _, c := range opts.Filter.Columns() {
			if len(frags[0].Schema.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("formats: %w: the filter reads column %q, which %s lacks", ErrSchema, c, frags[0].URL)
			}
		}
	}
	var read *arrow.Schema
	var err error
	if opts.Schema != nil {
		read, err = unifyMapped(frags, inspected, opts.Schema)
	} else {
		read, err = unify(frags, inspected)
	}
	if err != nil {
		return nil, err
	}
	if c, ok := opts.Filter.(interface{ Check(*arrow.Schema) error }); ok {
		// A filter that can type-check itself (package filter's) does so
		// here, at plan time, not at the first batch.
		if err := c.Check(read); err != nil {
			return nil, fmt.Errorf("formats: %w: %w", ErrSchema, err)
		}
	}
	d := &Scan{read: read, filter: opts.Filter, Fragments: frags, resolver: res}
	d.Schema = read
	if opts.Columns != nil {
		d.Schema = arrow.NewSchema(read.Fields()[:len(opts.Columns)], nil)
	}
	for _, f := range d.Schema.Fields() {
		d.Columns = append(d.Columns, f.Name)
	}
	return d, nil
}

// planUnits records where the driver's units start and turns them into
// what planning sees: masked rows left out, counts hidden behind a filter.
func (f *Fragment) planUnits(filtered bool) error {
	known := true
	f.fileStarts = make([]int64, len(f.Units)+1)
	for i, u := range f.Units {
		if u.Rows < 0 {
			known = false
		}
		f.fileStarts[i+1] = f.fileStarts[i] + max(u.Rows, 0)
	}
	if !known {
		f.fileStarts = nil
		if f.Mask != nil {
			return fmt.Errorf("formats: %s: a row mask needs exact row counts, which %s files do not have", f.URL, f.Format)
		}
	}
	if f.Mask != nil {
		del := f.Mask.Deleted
		if !slices.IsSorted(del) || len(slices.Compact(slices.Clone(del))) != len(del) {
			return fmt.Errorf("formats: %s: row mask is not ascending and unique", f.URL)
		}
		if n := len(del); n > 0 && (del[0] < 0 || del[n-1] >= f.fileStarts[len(f.Units)]) {
			return fmt.Errorf("formats: %s: row mask names rows outside the file's %d", f.URL, f.fileStarts[len(f.Units)])
		}
		f.Rows = 0
		for i := range f.Units {
			lo, _ := slices.BinarySearch(del, f.fileStarts[i])
			hi, _ := slices.BinarySearch(del, f.fileStarts[i+1])
			f.Units[i].Rows -= int64(hi - lo)
			f.Rows += f.Units[i].Rows
		}
	}
	if filtered {
		f.Rows = -1
		for i := range f.Units {
			f.Units[i].Rows = -1
		}
	}
	return nil
}

// Rows is the dataset's row count, or -1 if some fragment's is unknown.
func (d *Scan) Rows() int64 {
	var n int64
	for _, f := range d.Fragments {
		if f.Rows < 0 {
			return -1
		}
		n += f.Rows
	}
	return n
}

// Fetched is a range of a fragment whose stored bytes are in memory, ready
// for Scan.Decode.
type Fetched struct {
	frag int
	rng  Range
	data Buffer
	// Bytes is the memory the fetched bytes hold.
	Bytes int64
	// holds counts, for a Buffer that is a Recycler, the Fetched of its
	// bytes not yet released: the one Fetch made and its parts.
	holds    *atomic.Int64
	released atomic.Bool
}

// Part is the part r of fe, sharing its bytes: a reader fetches adjacent
// ranges in one request and decodes each on its own. Its Bytes is 0, as the
// bytes are fe's.
func (fe *Fetched) Part(r Range) (*Fetched, error) {
	within := r.FirstUnit >= fe.rng.FirstUnit && r.EndUnit <= fe.rng.EndUnit && r.FirstUnit <= r.EndUnit
	if r.Known() {
		within = r.Start >= fe.rng.Start && r.End <= fe.rng.End && r.Start <= r.End
	}
	if !within {
		return nil, fmt.Errorf("formats: %v is not within the fetched %v", r, fe.rng)
	}
	if fe.released.Load() {
		return nil, fmt.Errorf("formats: a part of %v, which was released", fe.rng)
	}
	if fe.holds != nil {
		fe.holds.Add(1)
	}
	return &Fetched{frag: fe.frag, rng: r, data: fe.data, holds: fe.holds}, nil
}

// String formats a range for errors.
func (r Range) String() string {
	if r.Known() {
		return fmt.Sprintf("rows [%d, %d)", r.Start, r.End)
	}
	return fmt.Sprintf("units [%d, %d)", r.FirstUnit, r.EndUnit)
}

// Read delivers range r of fragment i (in planning's terms: masked rows are
// not counted) in batches of at most batchRows rows. yield owns each batch
// and must release it. Errors name the file and the range; a panic in a
// third-party decoder becomes an error wrapping ErrCorrupt.
func (d *Scan) Read(ctx context.Context, i int, r Range, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	fe, err := d.Fetch(ctx, i, r)
	if err != nil {
		return err
	}
	defer fe.Release()
	_, err = d.Decode(ctx, fe, batchRows, mem, yield)
	return err
}

// RowRange is the Range of rows [start, end) of fragment i, with the units
// that hold them. It needs the fragment's counts: where they are unknown
// (a text file, a filter), read by units with Range{Start: -1, End: -1,
// FirstUnit: a, EndUnit: b}.
func (d *Scan) RowRange(i int, start, end int64) Range {
	r := Range{Start: start, End: end, FirstUnit: -1}
	if i < 0 || i >= len(d.Fragments) {
		return Range{Start: start, End: end} // for Read to refuse
	}
	f := d.Fragments[i]
	var at int64
	for u, unit := range f.Units {
		next := at + max(unit.Rows, 0)
		if r.FirstUnit < 0 && next > start {
			r.FirstUnit = u
		}
		if next >= end && r.FirstUnit >= 0 {
			r.EndUnit = u + 1
			break
		}
		at = next
	}
	if r.FirstUnit < 0 || start == end {
		r.FirstUnit, r.EndUnit = 0, 0
	}
	return r
}

// fileRange turns a planning range of f into the driver's: live rows into
// the file rows that hold them, units into rows where the driver knows the
// counts.
func (f *Fragment) fileRange(r Range) (Range, error) {
	n := len(f.Units)
	if r.FirstUnit < 0 || r.EndUnit > n || r.FirstUnit > r.EndUnit {
		return r, fmt.Errorf("formats: %s: units [%d, %d) outside the file's %d", f.URL, r.FirstUnit, r.EndUnit, n)
	}
	if !r.Known() {
		if r.Start != -1 || r.End != -1 {
			return r, fmt.Errorf("formats: %s: row range [%d, %d) is not a range", f.URL, r.Start, r.End)
		}
		if f.fileStarts != nil {
			r.Start, r.End = f.fileStarts[r.FirstUnit], f.fileStarts[r.EndUnit]
		}
		return r, nil
	}
	if r.End < r.Start || (f.Rows >= 0 && r.End > f.Rows) {
		return r, fmt.Errorf("formats: %s: row range [%d, %d) outside the file's %d rows", f.URL, r.Start, r.End, f.Rows)
	}
	if f.Mask == nil || r.Start == r.End {
		return r, nil
	}
	r.Start = f.Mask.fileRow(r.Start)
	r.End = f.Mask.fileRow(r.End-1) + 1
	return r, nil
}

// fileRow is the file row of the live row n: the n-th row not masked.
func (m *RowMask) fileRow(n int64) int64 {
	// The answer x satisfies x - (masked rows <= x) == n, x not masked; the
	// masked rows before it are found by search over the list.
	lo, hi := 0, len(m.Deleted)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Deleted[mid]-int64(mid) <= n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return n + int64(lo)
}

// Fetch fetches the stored bytes range r of fragment i needs, without
// decoding them. For formats that cannot fetch ahead it does nothing, and
// Decode does all the work.
func (d *Scan) Fetch(ctx context.Context, i int, r Range) (*Fetched, error) {
	if i < 0 || i >= len(d.Fragments) {
		return nil, fmt.Errorf("formats: fragment %d of a dataset of %d", i, len(d.Fragments))
	}
	f := d.Fragments[i]
	fr, err := f.fileRange(r)
	if err != nil {
		return nil, err
	}
	fe := &Fetched{frag: i, rng: r}
	err = guard(f.URL, r.String(), func() (err error) {
		fe.data, err = f.format.Fetch(ctx, f, d.request(f, fr, 0, nil))
		return err
	})
	if err != nil {
		return nil, err
	}
	if fe.data != nil {
		fe.Bytes = fe.data.Size()
	}
	if _, ok := fe.data.(Recycler); ok {
		fe.holds = new(atomic.Int64)
		fe.holds.Store(1)
	}
	return fe, nil
}

func (d *Scan) request(f *Fragment, r Range, batchRows int, mem memory.Allocator) *Read {
	rd := &Read{Range: r, Schema: d.read, BatchRows: batchRows, Mem: mem}
	if f.readSchema != nil {
		rd.Schema = f.readSchema
	}
	if f.Mask == nil && f.readSchema == nil {
		// Pruning would move the rows a mask names.
		rd.Filter = d.filter
	}
	return rd
}

func (d *Scan) readFetched(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error, skipped func(int64)) error {
	f := d.Fragments[fe.frag]
	if fe.released.Load() {
		return fmt.Errorf("formats: %s: %v decoded after it was released", f.URL, fe.rng)
	}
	if batchRows <= 0 {
		batchRows = 8192
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	fr, err := f.fileRange(fe.rng)
	if err != nil {
		return err
	}
	var yieldErr error
	keep := func(b arrow.RecordBatch) error {
		if e := yield(b); e != nil {
			yieldErr = e
			return e
		}
		return nil
	}
	err = guard(f.URL, fe.rng.String(), func() error {
		next := fr.Start // the file row the next batch starts at
		rq := d.request(f, fr, batchRows, mem)
		rq.Skipped = skipped
		for b, err := range f.format.Decode(ctx, f, fe.data, rq) {
			if err != nil {
				return err
			}
			at := next
			next += b.NumRows()
			if err := d.deliver(ctx, f, b, at, mem, keep); err != nil {
				return err
			}
		}
		if fr.Known() && next != fr.End && d.filter == nil && f.filter == nil {
			return fmt.Errorf("%w: read %d rows of %d", ErrCorrupt, next-fr.Start, fr.End-fr.Start)
		}
		return nil
	})
	if yieldErr != nil && errors.Is(err, yieldErr) {
		return yieldErr // the consumer's own error, not the file's
	}
	return err
}

// deliver applies f's mask to b, whose first row is file row at, then the
// filter and the projection onto the dataset's schema (see pass). It takes
// b.
func (d *Scan) deliver(ctx context.Context, f *Fragment, b arrow.RecordBatch, at int64, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	if f.Mask == nil || at < 0 {
		return d.pass(ctx, f, b, mem, yield)
	}
	del := f.Mask.Deleted
	lo, _ := slices.BinarySearch(del, at)
	hi, _ := slices.BinarySearch(del, at+b.NumRows())
	if lo == hi {
		return d.pass(ctx, f, b, mem, yield)
	}
	defer b.Release()
	// The runs between masked rows go on as slices: no copy.
	start := at
	for _, row := range append(del[lo:hi:hi], at+b.NumRows()) {
		if row > start {
			if err := d.pass(ctx, f, b.NewSlice(start-at, row-at), mem, yield); err != nil {
				return err
			}
		}
		start = row + 1
	}
	return nil
}

// pass applies the filters to b and projects it onto the dataset's schema,
// dropping the columns only the filters read. It takes b.
func (d *Scan) pass(ctx context.Context, f *Fragment, b arrow.RecordBatch, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	if f.readSchema != nil {
		var err error
		if b, err = d.rename(f, b, mem); err != nil {
			return err
		}
	}
	for _, flt := range []Filter{f.filter, d.filter} {
		if flt == nil {
			continue
		}
		keep, err := flt.Keep(ctx, b)
		if err != nil {
			b.Release()
			return fmt.Errorf("filter %s: %w", flt, err)
		}
		if keepsAll(keep, b.NumRows()) {
			keep.Release() // the batch goes on as it is: no copy
			continue
		}
		filtered, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), b, keep, compute.DefaultFilterOptions())
		keep.Release()
		b.Release()
		if err != nil {
			return fmt.Errorf("filter %s: %w", flt, err)
		}
		b = filtered
	}
	if d.read.NumFields() > d.Schema.NumFields() {
		out := array.NewRecordBatch(d.Schema, b.Columns()[:d.Schema.NumFields()], b.NumRows())
		b.Release()
		b = out
	}
	if b.NumRows() == 0 {
		b.Release()
		return nil
	}
	return yield(b)
}

// keepsAll reports whether a filter's answer keeps every one of n rows (a
// wrong length is left to the filter kernel's error).
func keepsAll(keep *array.Boolean, n int64) bool {
	if keep.NullN() > 0 || int64(keep.Len()) != n {
		return false
	}
	return bitutil.CountSetBits(keep.Data().Buffers()[1].Bytes(), keep.Data().Offset(), keep.Len()) == keep.Len()
}

// Close releases the buckets the plan opened.
func (d *Scan) Close() error { return d.resolver.Close() }

// guard runs fn, turning a panic (arrow-go panics on some malformed input)
// into an error that says what it tells of the file (see panics.New), and
// names the file and the part being read in any error.
func guard(url, part string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			pe := panics.New(r)
			// The stack helps whoever fixes the decoder, not the user: it
			// goes to the debug log, and the error stays one line.
			slog.Debug("formats: decoder panicked", "file", url, "part", part, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: %s: %w: %w", url, part, ErrCorrupt, pe)
		}
	}()
	if err := fn(); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if msg := err.Error(); strings.Contains(msg, url) && strings.Contains(msg, part) {
			return err
		}
		return fmt.Errorf("%s: %s: %w", url, part, err)
	}
	return nil
}

// driver is the driver that reads the file at key: the one Format names,
// else the first whose Match accepts the name, else (a file named
// explicitly: trust the caller) the first.
func (o *PlanOptions) driver(key string) Format {
	if o.named != nil {
		return o.named
	}
	if f := pickFormat(o.Formats, key); f != nil {
		return f
	}
	return o.Formats[0]
}

// byContent picks the driver of a file whose name none matches by its
// first bytes: Parquet's magic (PAR1, or PARE encrypted), ORC's, Avro's
// container magic (Obj 1), else, where they look like text, JSON (a first
// '[', or a '{' whose line does not close it), JSON Lines (a first line
// that is an object) or CSV. Without a match among fs, or where the bytes
// cannot be read, it is def (the first driver), as before.
func byContent(ctx context.Context, fs []Format, s storage.Source, def Format) Format {
	head := make([]byte, min(s.Object.Size, 4<<10))
	if len(head) == 0 {
		return def
	}
	if n, err := s.ReaderAt(ctx).ReadAt(head, 0); n < len(head) && err != nil {
		return def
	}
	name := ""
	textual := LooksLikeText(head)
	if !textual && int64(len(head)) == s.Object.Size {
		textual = LooksLikeText(append(head, '\n')) // a whole file of one line
	}
	switch {
	case bytes.HasPrefix(head, []byte("PAR1")), bytes.HasPrefix(head, []byte("PARE")):
		name = "parquet"
	case bytes.HasPrefix(head, []byte("ORC")):
		name = "orc"
	case bytes.HasPrefix(head, []byte("Obj\x01")):
		name = "avro"
	case textual:
		name = "csv"
		text := bytes.TrimLeft(trimBOM(head), " \t\r\n")
		line, _, _ := bytes.Cut(text, []byte("\n"))
		switch {
		case bytes.HasPrefix(text, []byte("[")):
			name = "json"
		case bytes.HasPrefix(text, []byte("{")) && bytes.HasSuffix(bytes.TrimRight(line, " \t\r"), []byte("}")):
			name = "jsonl"
		case bytes.HasPrefix(text, []byte("{")):
			name = "json"
		}
	}
	if f := Named(fs, name); f != nil {
		return f
	}
	return def
}

// Named is the driver of fs whose Name is name (compared without case),
// or nil.
func Named(fs []Format, name string) Format {
	for _, f := range fs {
		if strings.EqualFold(f.Name(), name) {
			return f
		}
	}
	return nil
}

// Names are the drivers' names, in order, each once.
func Names(fs []Format) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.Name()) {
			out = append(out, f.Name())
		}
	}
	return out
}

func pickFormat(fs []Format, key string) Format {
	for _, f := range fs {
		if f.Match(key) {
			return f
		}
	}
	return nil
}

func firstDuplicate(names []string) string {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}
