// Package formats turns URLs into fragments (one file each) with what their
// footers know, and reads a row range of a fragment with column projection as
// Arrow record batches. It knows nothing of splits, shuffles or streams.
//
// Planning and reading are separate: Plan fetches every footer once, up
// front and concurrently; Dataset.Read then fetches only the column chunks of
// the row groups a range needs.
package formats

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats/storage"
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
)

// Unit is a piece of a fragment that can be read on its own: a Parquet row
// group or an ORC stripe.
type Unit struct {
	// Rows is the exact row count, or -1 where the format does not know it
	// before reading (CSV, JSON).
	Rows int64
	// Bytes is the stored size of the selected columns of this unit: what
	// reading it fetches.
	Bytes int64
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
	// Rows is the exact row count, or -1 if not known before reading.
	Rows int64
	// Units are the row groups (or stripes) in file order.
	Units []Unit
	// Schema is the file's own Arrow schema (all columns).
	Schema *arrow.Schema

	src    storage.Source
	format Format
	meta   any // the format's parsed footer
	cache  Cache
}

// CacheKey names what a cache holds for f under a format's purpose: the
// object's location, size, modification time and ETag.
func (f *Fragment) CacheKey(purpose string) []byte {
	o := f.src.Object
	return fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%s", purpose, f.URL, o.Size, o.ModTime.UnixNano(), o.ETag)
}

// Cache is the plan's cache, or nil.
func (f *Fragment) Cache() Cache { return f.cache }

// Format is one file format. Implementations must be safe for concurrent
// use; Inspect and Read are called from many goroutines.
type Format interface {
	// Name is a short lower-case name such as "parquet".
	Name() string
	// Match reports whether a key found in a directory or glob listing is a
	// file of this format (by its name).
	Match(key string) bool
	// Inspect reads what the file's footer knows. It fills Units, Rows and
	// Schema, and may keep parsed metadata for Read. columns are the names
	// selected for the dataset (nil for all): Unit.Bytes counts only those.
	Inspect(ctx context.Context, f *Fragment, columns []string) error
	// Read delivers rows [start, end) of the fragment, projected onto schema
	// (whose fields the file has, possibly with narrower types), in batches
	// of at most batchRows rows. yield owns each batch and must release it.
	Read(ctx context.Context, f *Fragment, schema *arrow.Schema, start, end int64, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error
}

// Fetcher is implemented by formats that can fetch the stored bytes of a
// row range before decoding it, so that a reader keeps many fetches in
// flight (hiding storage latency) while only as many decodes run as there
// are cores. Read must equal Fetch followed by ReadFetched.
type Fetcher interface {
	// Fetch fetches what ReadFetched will need of [start, end).
	Fetch(ctx context.Context, f *Fragment, schema *arrow.Schema, start, end int64) (any, error)
	// FetchedBytes is the memory a Fetch result holds.
	FetchedBytes(fetched any) int64
	// ReadFetched decodes [start, end) from a Fetch result, a range within
	// the fetched one: one fetch of adjacent row ranges serves the decode of
	// each.
	ReadFetched(ctx context.Context, f *Fragment, fetched any, schema *arrow.Schema, start, end int64, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error
}

// Fetched is a row range of a fragment whose stored bytes are in memory,
// ready for Dataset.ReadFetched.
type Fetched struct {
	frag       int
	start, end int64
	data       any
	// Bytes is the memory the fetched bytes hold.
	Bytes int64
}

// Part is rows [start, end) of fe, sharing its bytes: a reader fetches
// adjacent row ranges in one request and decodes each range on its own.
// Its Bytes is 0, as the bytes are fe's.
func (fe *Fetched) Part(start, end int64) (*Fetched, error) {
	if start < fe.start || end > fe.end || end < start {
		return nil, fmt.Errorf("formats: rows [%d, %d) are not within the fetched [%d, %d)", start, end, fe.start, fe.end)
	}
	return &Fetched{frag: fe.frag, start: start, end: end, data: fe.data}, nil
}

// Cache keeps what a plan learned of a file between runs, so that a
// restarted job skips its footer reads. checkpoint.PebbleStore.KV gives one
// in the job's checkpoint database. Entries are keyed by the object's
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
	// Formats are the formats tried, in order. Default: Parquet only.
	Formats []Format
	// Cache, if set, keeps footers between plans. Default: none.
	Cache Cache
}

// Dataset is a planned set of fragments with one unified schema.
type Dataset struct {
	// Schema is the projected schema every batch has.
	Schema *arrow.Schema
	// Columns are the selected column names (Schema's field names).
	Columns   []string
	Fragments []*Fragment

	resolver *storage.Resolver
}

// Plan resolves urls (files, directories, prefixes and globs, see
// storage.Resolver.Resolve), reads every footer concurrently and unifies the
// schemas of the selected columns.
func Plan(ctx context.Context, urls []string, opts PlanOptions) (_ *Dataset, err error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("formats: no URLs given: %w", ErrEmpty)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	if len(opts.Formats) == 0 {
		opts.Formats = []Format{Parquet{}}
	}
	if opts.Columns != nil && len(opts.Columns) == 0 {
		return nil, fmt.Errorf("formats: %w: PlanOptions.Columns selects no column (nil selects all)", ErrSchema)
	}
	if dup := firstDuplicate(opts.Columns); dup != "" {
		return nil, fmt.Errorf("formats: %w: column %q selected twice", ErrSchema, dup)
	}
	res := storage.NewResolver(opts.Storage)
	defer func() {
		if err != nil {
			res.Close()
		}
	}()
	accept := func(key string) bool { return pickFormat(opts.Formats, key) != nil }
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
			f := pickFormat(opts.Formats, s.Object.Key)
			if f == nil {
				f = opts.Formats[0] // named explicitly: trust the caller
			}
			frags = append(frags, &Fragment{URL: s.URL, Rel: s.Rel, Format: f.Name(), Size: s.Object.Size, src: s, format: f, cache: opts.Cache})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, f := range frags {
		g.Go(func() error {
			return guard(f.URL, "footer", func() error { return f.format.Inspect(gctx, f, opts.Columns) })
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	schema, err := unify(frags, opts.Columns)
	if err != nil {
		return nil, err
	}
	cols := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = f.Name
	}
	return &Dataset{Schema: schema, Columns: cols, Fragments: frags, resolver: res}, nil
}

// Rows is the dataset's row count, or -1 if some fragment's is unknown.
func (d *Dataset) Rows() int64 {
	var n int64
	for _, f := range d.Fragments {
		if f.Rows < 0 {
			return -1
		}
		n += f.Rows
	}
	return n
}

// Read delivers rows [start, end) of fragment i in batches of at most
// batchRows rows. yield owns each batch and must release it. Errors name the
// file and the row range; a panic in a third-party decoder becomes an error
// wrapping ErrCorrupt.
func (d *Dataset) Read(ctx context.Context, i int, start, end int64, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	fe, err := d.Fetch(ctx, i, start, end)
	if err != nil {
		return err
	}
	return d.ReadFetched(ctx, fe, batchRows, mem, yield)
}

// Fetch fetches the stored bytes rows [start, end) of fragment i need,
// without decoding them. For formats that cannot fetch ahead it does
// nothing, and ReadFetched does all the work.
func (d *Dataset) Fetch(ctx context.Context, i int, start, end int64) (*Fetched, error) {
	if i < 0 || i >= len(d.Fragments) {
		return nil, fmt.Errorf("formats: fragment %d of a dataset of %d", i, len(d.Fragments))
	}
	f := d.Fragments[i]
	if start < 0 || end < start || (f.Rows >= 0 && end > f.Rows) {
		return nil, fmt.Errorf("formats: %s: row range [%d, %d) outside the file's %d rows", f.URL, start, end, f.Rows)
	}
	fe := &Fetched{frag: i, start: start, end: end}
	fetcher, ok := f.format.(Fetcher)
	if !ok {
		return fe, nil
	}
	err := guard(f.URL, fmt.Sprintf("rows [%d, %d)", start, end), func() (err error) {
		fe.data, err = fetcher.Fetch(ctx, f, d.Schema, start, end)
		return err
	})
	if err != nil {
		return nil, err
	}
	fe.Bytes = fetcher.FetchedBytes(fe.data)
	return fe, nil
}

// ReadFetched decodes what Fetch fetched, as Read does.
func (d *Dataset) ReadFetched(ctx context.Context, fe *Fetched, batchRows int, mem memory.Allocator, yield func(arrow.RecordBatch) error) error {
	f := d.Fragments[fe.frag]
	if batchRows <= 0 {
		batchRows = 8192
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	var yieldErr error
	keep := func(b arrow.RecordBatch) error {
		if e := yield(b); e != nil {
			yieldErr = e
			return e
		}
		return nil
	}
	err := guard(f.URL, fmt.Sprintf("rows [%d, %d)", fe.start, fe.end), func() error {
		if fetcher, ok := f.format.(Fetcher); ok {
			return fetcher.ReadFetched(ctx, f, fe.data, d.Schema, fe.start, fe.end, batchRows, mem, keep)
		}
		return f.format.Read(ctx, f, d.Schema, fe.start, fe.end, batchRows, mem, keep)
	})
	if yieldErr != nil && errors.Is(err, yieldErr) {
		return yieldErr // the consumer's own error, not the file's
	}
	return err
}

// Close releases the buckets the plan opened.
func (d *Dataset) Close() error { return d.resolver.Close() }

// guard runs fn, turning a panic (arrow-go panics on some malformed input)
// into an error, and names the file and the part being read in any error.
func guard(url, part string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("formats: %s: %s: %w: decoder panicked: %v\n%s", url, part, ErrCorrupt, r, firstFrames(debug.Stack()))
		}
	}()
	if err := fn(); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if msg := err.Error(); strings.Contains(msg, url) && strings.Contains(msg, part) {
			return err
		}
		return fmt.Errorf("formats: %s: %s: %w", url, part, err)
	}
	return nil
}

// firstFrames keeps a panic's stack short enough for an error message.
func firstFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	if len(lines) > 16 {
		lines = lines[:16]
	}
	return strings.Join(lines, "\n")
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

// unify computes the projected schema and checks every file against it.
// Types may differ only where they widen safely (see widen); nullability is
// the union.
func unify(frags []*Fragment, columns []string) (*arrow.Schema, error) {
	if len(frags) == 0 {
		return nil, fmt.Errorf("formats: %w", ErrEmpty)
	}
	first := frags[0]
	if columns == nil {
		for _, f := range first.Schema.Fields() {
			columns = append(columns, f.Name)
		}
	}
	fields := make([]arrow.Field, len(columns))
	from := make([]string, len(columns)) // which file set each field's type
	for i, name := range columns {
		idx := first.Schema.FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("formats: %w: column %q is not in %s (it has %s)", ErrSchema, name, first.URL, fieldNames(first.Schema))
		}
		fields[i] = first.Schema.Field(idx[0])
		from[i] = first.URL
	}
	for _, f := range frags[1:] {
		for i, name := range columns {
			idx := f.Schema.FieldIndices(name)
			if len(idx) == 0 {
				return nil, fmt.Errorf("formats: %w: column %q is in %s but not in %s", ErrSchema, name, from[i], f.URL)
			}
			got := f.Schema.Field(idx[0])
			wide, ok := widen(fields[i].Type, got.Type)
			if !ok {
				return nil, fmt.Errorf("formats: %w: column %q is %s in %s but %s in %s", ErrSchema, name, fields[i].Type, from[i], got.Type, f.URL)
			}
			if !arrow.TypeEqual(wide, fields[i].Type) {
				from[i] = f.URL
			}
			fields[i].Type = wide
			fields[i].Nullable = fields[i].Nullable || got.Nullable
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// widen returns the type both a and b convert to without loss, if any:
// integers to a wider integer of the same signedness, unsigned integers to a
// wider signed one, float32 to float64, and string/binary to their large
// forms.
func widen(a, b arrow.DataType) (arrow.DataType, bool) {
	if arrow.TypeEqual(a, b) {
		return a, true
	}
	if w, ok := widerOf(a, b); ok {
		return w, true
	}
	return widerOf(b, a)
}

func widerOf(narrow, wide arrow.DataType) (arrow.DataType, bool) {
	rank := func(t arrow.DataType) (signed, unsigned, float int) {
		switch t.ID() {
		case arrow.INT8:
			return 8, 0, 0
		case arrow.INT16:
			return 16, 0, 0
		case arrow.INT32:
			return 32, 0, 0
		case arrow.INT64:
			return 64, 0, 0
		case arrow.UINT8:
			return 0, 8, 0
		case arrow.UINT16:
			return 0, 16, 0
		case arrow.UINT32:
			return 0, 32, 0
		case arrow.UINT64:
			return 0, 64, 0
		case arrow.FLOAT32:
			return 0, 0, 32
		case arrow.FLOAT64:
			return 0, 0, 64
		}
		return 0, 0, 0
	}
	ns, nu, nf := rank(narrow)
	ws, wu, wf := rank(wide)
	switch {
	case ns > 0 && ws > ns:
		return wide, true
	case nu > 0 && (ws > nu || wu > nu):
		return wide, true
	case nf > 0 && wf > nf:
		return wide, true
	case narrow.ID() == arrow.STRING && wide.ID() == arrow.LARGE_STRING,
		narrow.ID() == arrow.BINARY && wide.ID() == arrow.LARGE_BINARY:
		return wide, true
	}
	return nil, false
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return strings.Join(names, ", ")
}

// sortedUnique sorts xs and drops repeats.
func sortedUnique(xs []int) []int {
	slices.Sort(xs)
	return slices.Compact(xs)
}
