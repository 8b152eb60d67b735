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
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
	// inspected is what the driver found (Inspected).
	inspected KnownFile
	// late, if set, is a fragment planned from a KnownFile, whose driver
	// inspects it on its first read.
	late *lateInspect
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

// Settler is implemented by a format whose files' schemas are settled
// together once every file is inspected: a text format infers column types
// from a sample of its first files and widens them across files, which no
// single Inspect can do. Plan calls Settle once per such format with its
// fragments in dataset order, before it unifies the schemas; Settle may
// replace their Schema and fill in their units' row counts.
type Settler interface {
	Settle(ctx context.Context, frags []*Fragment) error
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

// String formats a range for errors.
func (r Range) String() string {
	if r.Known() {
		return fmt.Sprintf("rows [%d, %d)", r.Start, r.End)
	}
	return fmt.Sprintf("units [%d, %d)", r.FirstUnit, r.EndUnit)
}
