// Package planner plans every dataset package stream opens, shared or
// not: it turns the fragments that formats.Plan (or a table's planner)
// found into the chunk list and its fingerprint, and, where the ranks of
// a job share one plan through a Store, lets one rank read every footer
// and the others plan from the object it writes.
//
// It owns the plan object's layout and its check against a rank's own
// plan (ErrMismatch names the first difference). It cuts chunks (package
// split), and deals the opening epoch only to find the pages its split
// boundaries cut, and reads no rows: it imports formats (and the drivers
// Options.Plan.Format names by default: Parquet, ORC and text), filter,
// storage, split and permutation, never the engine or stream.
package planner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/filter"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/split"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/localcache"
)

// ErrMismatch is wrapped when the plan in a Store was made for other files
// or other options than this rank's: the ranks of one job must stream one
// plan, or their splits would not be the same rows. stream.ErrPlanMismatch
// is this error.
var ErrMismatch = errors.New("stream: shared plan does not match")

// Store is where the ranks of a job share one plan (stream.PlanStore says
// how): an object in a bucket, and how long a rank other than 0 waits for
// it.
type Store struct {
	Bucket *blob.Bucket
	Key    string
	// Wait defaults to 5 minutes.
	Wait time.Duration
}

// Options are what planning needs of a dataset's options (stream.Options
// documents the fields of the same names).
type Options struct {
	// Store, if set, shares the plan among the ranks.
	Store *Store
	// Rank plans and writes the plan when the Store has none: rank 0 at
	// once, another after Store.Wait.
	Rank int
	// Table, if set, finds the fragments instead of formats.Plan over URLs
	// (a table format's planner: stream.Options.Plan).
	Table func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error)
	URLs  []string
	// Plan are formats.Plan's options as the dataset's options give them:
	// Formats empty is the default Parquet driver, and Format names the
	// driver of every file (see Drivers); planning resolves both, sets
	// Filter from the text below, and counts every read to OnRead.
	Plan formats.PlanOptions
	// Filter is the filter's text.
	Filter string
	// OnRead, if set, is told the bytes of every read of every bucket the
	// planner opens: the dataset keeps those buckets for its own reads.
	OnRead func(scheme string, n int)
	// CacheDir, if set, is the folder of a node-local cache (package
	// localcache, bounded by CacheBytes) that every bucket the planner
	// opens, but local files, reads through; OnCacheHit and OnCacheEvict,
	// if set, are told what it serves and evicts.
	CacheDir     string
	CacheBytes   int64
	OnCacheHit   func(bytes int)
	OnCacheEvict func(blocks int, bytes int64)
	// ChunkBytes sizes the chunks, with Order.ShuffleWindow.
	ChunkBytes int64
	// Order is the dataset's order. Its ShuffleWindow sizes the chunks
	// (unless ShuffleMemory does); with Epoch it names the units the
	// opening epoch's split boundaries cut, whose pages the rank that
	// writes the Store's plan finds (findCutPages).
	Order permutation.Order
	Epoch int64
	// ShuffleMemory, if positive, sizes the window in decoded bytes
	// instead of Order.ShuffleWindow: the window is the rows that many
	// bytes hold at the plan's RowBytes (Planned.ShuffleWindow).
	ShuffleMemory int64
}

// planOptions are what the planner gets: the columns and filter, the
// drivers tried, and the storage options with every read told to OnRead.
func (o Options) planOptions() (formats.PlanOptions, error) {
	po := o.Plan
	userWrap := po.Storage.Wrap
	po.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		if userWrap != nil {
			b = userWrap(b)
		}
		c := storage.NewCounting(b)
		if o.OnRead != nil {
			c.OnRead = func(_ string, _ int64, n int) { o.OnRead(b.Scheme(), n) }
		}
		return c
	}
	if o.CacheDir != "" {
		c, err := localcache.Open(localcache.Options{Dir: o.CacheDir, MaxBytes: o.CacheBytes, OnHit: o.OnCacheHit, OnEvict: o.OnCacheEvict})
		if err != nil {
			return formats.PlanOptions{}, fmt.Errorf("stream: Options.CacheDir %s (CacheBytes %d): %w", o.CacheDir, o.CacheBytes, err)
		}
		po.Storage.Cache = c.Wrap
	}
	var err error
	if po.Formats, err = Drivers(po.Format, po.Formats); err != nil {
		return formats.PlanOptions{}, err
	}
	if po.Format != "" && o.Table != nil {
		return formats.PlanOptions{}, fmt.Errorf("stream: Options.Format %q names the driver of the files Options.URLs list; Options.Plan (a table) names its files' formats itself", po.Format)
	}
	if o.Filter != "" {
		flt, err := filter.Parse(o.Filter)
		if err != nil {
			return po, fmt.Errorf("stream: open: Options.Filter: %w", err)
		}
		po.Filter = flt
	}
	return po, nil
}

// Drivers are the drivers planning tries, given a dataset's Format and
// Formats (stream.Options'): Formats, or Parquet where it is empty; with a Format,
// Formats must have a driver of that name, and where it is empty the
// Format's built-in driver (package drivers) is the one. It refuses a name that is
// neither known nor a driver's of Formats, listing the known ones, and a
// known name that Formats, given, has no driver for: the two options would
// say different things.
func Drivers(format string, fs []formats.Format) ([]formats.Format, error) {
	if format == "" {
		if len(fs) == 0 {
			return []formats.Format{drivers.Default()}, nil
		}
		return fs, nil
	}
	if len(fs) > 0 {
		if formats.Named(fs, format) != nil {
			return fs, nil
		}
		if drivers.Named(format) != nil {
			return nil, fmt.Errorf("stream: Options.Format %q conflicts with Options.Formats, which has no %s driver (it has %s): add one to Options.Formats, or leave Options.Formats empty to read with the default %s driver", format, format, strings.Join(formats.Names(fs), ", "), format)
		}
		return nil, fmt.Errorf("stream: Options.Format %q is not a known format (%s) nor a driver of Options.Formats (%s)", format, strings.Join(drivers.Names, ", "), strings.Join(formats.Names(fs), ", "))
	}
	b := drivers.Named(format)
	if b == nil {
		return nil, fmt.Errorf("stream: Options.Format %q is not a known format (%s; another driver goes in Options.Formats)", format, strings.Join(drivers.Names, ", "))
	}
	return []formats.Format{b}, nil
}

// chunksPerWindow is the fewest chunks a full shuffle window is made of
// (where row groups are small enough): a batch mixes as well as the number
// of places its window draws from, and 256 places give a label histogram
// about 0.06 from the global one (see TestShuffleQuality), where 16 gave
// 0.3. Smaller chunks only mean more, smaller fetches of small row groups.
const chunksPerWindow = 256

// Version is the layout of the plan object this build writes: 2 carries
// every file's units, so that a rank plans without parsing footers, in a
// binary object (see encodeObject). It reads 1 too (JSON, footers only),
// as a job restarted on a newer build finds it.
const Version = 2

// Object is the plan object: what a rank needs to plan without reading
// footers, and what it checks that the plan is its own.
type Object struct {
	Version int `json:"version"`
	// Plan is the plan fingerprint (Dataset.Fingerprint).
	Plan          string   `json:"plan"`
	Columns       []string `json:"columns"`
	ChunkBytes    int64    `json:"chunk_bytes"`
	ShuffleWindow int      `json:"shuffle_window"`
	Files         []File   `json:"files"`
	// Cache holds what the drivers kept in their cache while planning,
	// by cache key (version 2: in the object's binary part).
	Cache []CacheEntry `json:"cache,omitempty"`

	// Asked is what the files' units depend on beside the files (the
	// columns as asked, the filter, the format named): a rank asking
	// otherwise inspects the files itself. From version 2.
	Asked string `json:"asked,omitempty"`

	// byURL indexes Files, for known; set by decodeSharedPlan.
	byURL map[string]int
}

// File is a file of the plan, as the rank that planned found it.
type File struct {
	URL     string `json:"url"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mod_time"` // Unix nanoseconds
	ETag    string `json:"etag,omitempty"`
	Rows    int64  `json:"rows"`
	// Footer digests what planning learned of the file: format, units,
	// counts, sizes and schema.
	Footer string `json:"footer"`
	// SchemaOf is the URL of the first file of the plan whose schema
	// equals this one's (formats.KnownFile), from version 2.
	SchemaOf string `json:"schema_of,omitempty"`
	// Units are the units the driver's Inspect gave (version 2: they
	// travel in the object's binary part), and hasUnits says they did.
	Units []formats.Unit `json:"-"`
	// Inspected is the file's rows as its driver found them, before a
	// mask or a filter (Rows is after), from version 2.
	Inspected int64 `json:"inspected_rows,omitempty"`
	hasUnits  bool
}

// CacheEntry is what a driver kept in its formats.Cache while planning.
type CacheEntry struct {
	Key   []byte `json:"k"`
	Value []byte `json:"v"`
}

// Planned is what planning made: the fragments, the chunk list and its
// fingerprint.
type Planned struct {
	Data   *formats.Scan
	Chunks []split.Chunk
	// ID is the plan fingerprint: a hash of the chunk list.
	ID string
	// Filter is the filter's canonical text, "" without one.
	Filter string
	// ShuffleWindow is the window, in rows, the chunks were cut for:
	// Options.Order.ShuffleWindow, or the rows Options.ShuffleMemory holds.
	ShuffleWindow int
	// PlaceBytes is what PlaceBytes gives for the dataset's columns: the
	// least a chunk cut from a row group holds, 0 where none is cut.
	PlaceBytes int64
}

// cutWindows is how many windows' rows a paged row group holds at most
// and is still read whole: halving one saves a window's memory at the
// cost of reading each half apart (each a request, and a decode that
// starts in the page the cut falls in).
const cutWindows = 2

// pageBytes is the page size PlaceBytes assumes: the default of the
// common Parquet writers (pyarrow, arrow-go, parquet-java), where the
// footer does not say. ORC's row groups of 10,000 rows are smaller.
const pageBytes = 1 << 20

// placePages is the pages of every column a chunk cut from a row group
// should span: a cut fetches about one page per column a second time
// where two windows read its two sides, so a chunk of four pages a
// column fetches about 1/4 more, where chunks of one page would fetch
// about twice the bytes.
const placePages = 4

// PlaceBytes is the stored bytes a chunk cut from a paged row group should
// hold (split.ChunkOptions.CutBytes), for a read of the columns of schema:
// placePages pages of pageBytes for each leaf column (each column of a
// struct counting as one, as Parquet stores it). It is 0, and no row group
// is cut, where a column is a list or a map: their pages are not located
// by row, so a read of part of a row group fetches such columns whole.
func PlaceBytes(schema *arrow.Schema) int64 {
	if schema == nil {
		return 0
	}
	leaves := 0
	var walk func(t arrow.DataType) bool
	walk = func(t arrow.DataType) bool {
		switch t := t.(type) {
		case arrow.ListLikeType:
			return false
		case *arrow.StructType:
			for _, f := range t.Fields() {
				if !walk(f.Type) {
					return false
				}
			}
			return true
		default:
			leaves++
			return true
		}
	}
	for _, f := range schema.Fields() {
		if !walk(f.Type) {
			return 0
		}
	}
	return placePages * pageBytes * int64(max(leaves, 1))
}

// Plan plans the dataset: from the Store's plan where there is one, else
// by reading every footer (and, on rank 0 or after Wait, writing the plan
// for the other ranks).
func Plan(ctx context.Context, o Options) (Planned, error) {
	po, err := o.planOptions()
	if err != nil {
		return Planned{}, err
	}
	if o.Table == nil {
		o.Table = func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error) {
			return formats.Plan(ctx, o.URLs, po)
		}
	}
	p, err := plan(ctx, o, po)
	if err == nil && po.Filter != nil {
		p.Filter = po.Filter.String()
	}
	return p, err
}

// plan is Plan with the planner's options made.
func plan(ctx context.Context, o Options, po formats.PlanOptions) (Planned, error) {
	ps := o.Store
	if ps == nil {
		return planLocal(ctx, o, po)
	}
	if ps.Bucket == nil || ps.Key == "" {
		return Planned{}, errors.New("stream: Options.PlanStore needs a Bucket and a Key")
	}
	// The stored plan is read while the rank lists its files: a rank
	// starts in one round trip, not two. Planning asks for the plan only
	// once it has its listing (Known, the cache), and the read is
	// usually back by then.
	pctx, cancel := context.WithCancel(ctx)
	src := newStoredPlan(pctx, cancel, o, po.Cache)
	defer func() {
		cancel()
		<-src.first
	}()
	po.Cache, po.Known = src, src.known
	p, err := planLocal(pctx, o, po)
	if err != nil && !src.asked.Load() {
		// Planning failed before it needed the plan (the listing, say): a
		// rank need not wait for a plan to report that.
		return p, err
	}
	sp, serr := src.resolve()
	if serr != nil {
		if err == nil {
			p.Data.Close()
		}
		return Planned{}, serr
	}
	if sp != nil {
		return checkAgainst(o, sp, p, err)
	}
	if err != nil {
		return p, err
	}
	if err := findCutPages(ctx, o, p); err != nil {
		p.Data.Close()
		return Planned{}, err
	}
	own := describe(o, p, src.entries())
	raw, err := own.MarshalBinary()
	if err != nil {
		p.Data.Close()
		return Planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	err = ps.Bucket.WriteAll(ctx, ps.Key, raw, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
	if err == nil {
		return p, nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		p.Data.Close()
		return Planned{}, fmt.Errorf("stream: write shared plan %q: %w", ps.Key, err)
	}
	// Another rank wrote first: its plan is the job's, and must be ours.
	theirs, err := ps.load(ctx)
	if err == nil && theirs == nil {
		err = errors.New("it was written and then removed")
	}
	if err != nil {
		p.Data.Close()
		return Planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	if err := theirs.check(own); err != nil {
		p.Data.Close()
		return Planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	return p, nil
}

// storedPlan is the Store's plan as a rank's planning sees it: read once
// from the moment planning starts, and waited for where planning first
// needs it (Known, the cache). It decides then, once, whether the rank
// plans from it (the cache replays its entries) or plans itself (the
// cache records what the drivers keep, for the plan this rank writes).
type storedPlan struct {
	ctx     context.Context
	cancel  context.CancelFunc
	ps      *Store
	planner bool
	options string // asked(o)
	next    formats.Cache
	// asked is set once planning asks for the plan.
	asked atomic.Bool

	// first is closed when the first read is back, with its result.
	first    chan struct{}
	firstSP  *Object
	firstErr error

	once sync.Once
	sp   *Object
	err  error
	// Where sp is nil, rec records; else replay answers.
	rec    *recordingCache
	replay *replayCache
}

func newStoredPlan(ctx context.Context, cancel context.CancelFunc, o Options, next formats.Cache) *storedPlan {
	s := &storedPlan{ctx: ctx, cancel: cancel, ps: o.Store, planner: o.Rank == 0, options: asked(o), next: next, first: make(chan struct{})}
	go func() {
		defer close(s.first)
		s.firstSP, s.firstErr = s.ps.load(ctx)
	}()
	return s
}

// resolve returns the stored plan, nil where this rank plans itself: the
// first read's, or, on a rank other than the planner that found none, the
// one it waits for (Store.await). An error cancels the planning that asked.
func (s *storedPlan) resolve() (*Object, error) {
	s.asked.Store(true)
	s.once.Do(func() {
		<-s.first // the read ends with the context, if before
		s.sp, s.err = s.firstSP, s.firstErr
		if s.err == nil && s.sp == nil && !s.planner {
			s.sp, s.err = s.ps.await(s.ctx)
		}
		if s.err != nil {
			s.cancel()
			return
		}
		if s.sp == nil {
			s.rec = &recordingCache{next: s.next, got: map[string][]byte{}}
		} else {
			s.replay = &replayCache{got: s.sp.cacheMap(), next: s.next}
		}
	})
	return s.sp, s.err
}

// known is formats.PlanOptions.Known: what the stored plan found of f,
// where the rank plans from it with the options it was made with.
func (s *storedPlan) known(f *formats.Fragment) (formats.KnownFile, bool) {
	sp, err := s.resolve()
	if err != nil || sp == nil || sp.Asked != s.options {
		return formats.KnownFile{}, false
	}
	return sp.known(f)
}

func (s *storedPlan) cache() (formats.Cache, error) {
	sp, err := s.resolve()
	switch {
	case err != nil:
		return nil, err
	case sp == nil:
		return s.rec, nil
	}
	return s.replay, nil
}

func (s *storedPlan) Get(ctx context.Context, key []byte) ([]byte, error) {
	c, err := s.cache()
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, key)
}

func (s *storedPlan) Set(ctx context.Context, key, value []byte) error {
	c, err := s.cache()
	if err != nil {
		return err
	}
	return c.Set(ctx, key, value)
}

// entries are what the rank recorded planning itself.
func (s *storedPlan) entries() []CacheEntry {
	if s.rec == nil {
		return nil
	}
	return s.rec.entries()
}

// checkAgainst checks that p, planned from the stored plan sp (err is the
// planning's error), is that plan.
func checkAgainst(o Options, sp *Object, p Planned, err error) (Planned, error) {
	if errors.Is(err, formats.ErrNotAsKnown) {
		return p, fmt.Errorf("stream: shared plan %q: %w: %w", o.Store.Key, ErrMismatch, err)
	}
	if err != nil {
		return p, err
	}
	if err := sp.check(describe(o, p, nil)); err != nil {
		p.Data.Close()
		return Planned{}, fmt.Errorf("stream: shared plan %q: %w", o.Store.Key, err)
	}
	return p, nil
}

// planLocal plans by reading the footers (or the caller's cache).
func planLocal(ctx context.Context, o Options, po formats.PlanOptions) (Planned, error) {
	data, err := o.Table(ctx, po)
	if err != nil {
		return Planned{}, err // it names the file and what is wrong with it
	}
	window := o.Order.ShuffleWindow
	if o.ShuffleMemory > 0 {
		if window, err = windowRows(o.ShuffleMemory, data); err != nil {
			data.Close()
			return Planned{}, err
		}
	}
	// Chunks hold at most a 256th of a window (chunksPerWindow), so that a
	// shuffled window mixes rows from many places of the dataset where row
	// groups are that small. A paged row group larger than cutWindows
	// windows is cut into chunks of PlaceBytes each (of a 256th of a
	// window where that is more), and windows take such chunks a window's
	// rows at a time, so that no window holds the row group whole.
	cut := PlaceBytes(data.Schema)
	co := split.ChunkOptions{TargetBytes: o.ChunkBytes, MaxRows: max(int64(window)/chunksPerWindow, 1), CutBytes: cut}
	if cut > 0 {
		co.CutRows = cutWindows * int64(window)
	}
	chunks := split.Chunks(planFiles(data), co)
	return Planned{Data: data, Chunks: chunks, ID: planHash(data, chunks, po.Filter, renamed(o, data)), ShuffleWindow: window, PlaceBytes: cut}, nil
}

// describe is the shared plan of p, with the cache entries given.
func describe(o Options, p Planned, cache []CacheEntry) *Object {
	// The window as rows, however it was given: the rows are what the
	// chunks and the order are made of.
	sp := &Object{Version: Version, Plan: p.ID, Columns: p.Data.Columns, ChunkBytes: o.ChunkBytes, ShuffleWindow: p.ShuffleWindow, Cache: cache, Asked: asked(o)}
	var schemas []*formats.Fragment // the first file of each schema
	// Files planned from a plan share their schema's value: its text is
	// made once, not once a file.
	texts := map[*arrow.Schema]string{}
	sp.Files = make([]File, 0, len(p.Data.Fragments))
	for _, f := range p.Data.Fragments {
		obj := f.Source.Object
		in := f.Inspected()
		text, ok := texts[f.Schema]
		if !ok && f.Schema != nil {
			text = f.Schema.String()
			texts[f.Schema] = text
		}
		file := File{URL: f.URL, Size: f.Size, ModTime: obj.ModTime.UnixNano(), ETag: obj.ETag, Rows: f.Rows, Footer: footerDigest(f, text), Units: in.Units, Inspected: in.Rows, hasUnits: true}
		i := slices.IndexFunc(schemas, func(g *formats.Fragment) bool {
			return g.Schema.Equal(f.Schema) && g.Schema.Metadata().Equal(f.Schema.Metadata())
		})
		if i < 0 {
			i = len(schemas)
			schemas = append(schemas, f)
		}
		file.SchemaOf = schemas[i].URL
		sp.Files = append(sp.Files, file)
	}
	return sp
}

// asked is Object.Asked of a rank's options.
func asked(o Options) string {
	cols, _ := json.Marshal(o.Plan.Columns) // null (every column) is not []
	return fmt.Sprintf("columns %s filter %q format %q", cols, o.Filter, o.Plan.Format)
}

// known is what the plan found of f, where f is the file as the plan saw
// it (formats.PlanOptions.Known).
func (sp *Object) known(f *formats.Fragment) (formats.KnownFile, bool) {
	if sp.byURL == nil {
		return formats.KnownFile{}, false
	}
	i, ok := sp.byURL[f.URL]
	if !ok {
		return formats.KnownFile{}, false
	}
	file, obj := &sp.Files[i], f.Source.Object
	if !file.hasUnits || file.Size != f.Size || file.ModTime != obj.ModTime.UnixNano() || file.ETag != obj.ETag {
		return formats.KnownFile{}, false // changed: inspected, and refused by check
	}
	return formats.KnownFile{Units: file.Units, Rows: file.Inspected, SchemaOf: file.SchemaOf}, true
}

// footerDigest hashes what planning learned of a file; schema is the
// text of its schema (f.Schema.String(), "" where it has none).
func footerDigest(f *formats.Fragment, schema string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %d %d\n", f.Format, f.Size, f.Rows)
	// The text of "u %d %d %d %v\n" for each unit (a plan object keeps
	// the digest: it must not change), made without fmt: a rank of a
	// thousand digests every row group of the plan as it starts.
	line := make([]byte, 0, 64)
	for _, u := range f.Units {
		line = strconv.AppendInt(append(line[:0], "u "...), u.Rows, 10)
		line = strconv.AppendInt(append(line, ' '), u.Bytes, 10)
		line = strconv.AppendInt(append(line, ' '), u.Offset, 10)
		line = append(strconv.AppendBool(append(line, ' '), u.Paged), '\n')
		h.Write(line)
	}
	if f.Schema != nil {
		h.Write(append([]byte(schema), '\n'))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// check returns an error naming the first difference between the stored
// plan sp and a rank's own.
func (sp *Object) check(own *Object) error {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMismatch, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Equal(sp.Columns, own.Columns):
		return mismatch("columns: the plan has %q, this rank %q", sp.Columns, own.Columns)
	case sp.ChunkBytes != own.ChunkBytes:
		return mismatch("ChunkBytes: the plan has %d, this rank %d", sp.ChunkBytes, own.ChunkBytes)
	case sp.ShuffleWindow != own.ShuffleWindow:
		return mismatch("ShuffleWindow: the plan has %d, this rank %d", sp.ShuffleWindow, own.ShuffleWindow)
	}
	theirs := map[string]File{}
	for _, f := range sp.Files {
		theirs[f.URL] = f
	}
	mine := map[string]bool{}
	for _, f := range own.Files {
		mine[f.URL] = true
		t, ok := theirs[f.URL]
		switch {
		case !ok:
			return mismatch("file %s is not in the plan (of %d files): added since it was made", f.URL, len(sp.Files))
		case t.Size != f.Size:
			return mismatch("file %s: %d bytes in the plan, %d now", f.URL, t.Size, f.Size)
		case t.ETag != f.ETag:
			return mismatch("file %s: ETag %q in the plan, %q now", f.URL, t.ETag, f.ETag)
		case t.ModTime != f.ModTime:
			return mismatch("file %s: modified at %s in the plan, %s now", f.URL, time.Unix(0, t.ModTime).UTC().Format(time.RFC3339Nano), time.Unix(0, f.ModTime).UTC().Format(time.RFC3339Nano))
		case t.Rows != f.Rows:
			return mismatch("file %s: %d rows in the plan, %d now", f.URL, t.Rows, f.Rows)
		case t.Footer != f.Footer:
			return mismatch("file %s: its footer digest is %s in the plan, %s now", f.URL, t.Footer, f.Footer)
		}
	}
	for _, f := range sp.Files {
		if !mine[f.URL] {
			return mismatch("file %s of the plan is not found: removed since it was made, or the URLs differ", f.URL)
		}
	}
	if sp.Plan != own.Plan {
		return mismatch("plan fingerprint %s, this rank's %s (the same files in another order, or other chunks)", sp.Plan, own.Plan)
	}
	return nil
}

// cacheMap is the plan's cache entries by key.
func (sp *Object) cacheMap() map[string][]byte {
	m := make(map[string][]byte, len(sp.Cache))
	for _, e := range sp.Cache {
		m[string(e.Key)] = e.Value
	}
	return m
}

// decodeSharedPlan parses a plan object; it comes from a bucket, so it is
// checked, not trusted.
func decodeSharedPlan(raw []byte) (*Object, error) {
	var sp *Object
	switch {
	case bytes.HasPrefix(raw, []byte(objectMagic)):
		var err error
		if sp, err = decodeObject(raw); err != nil {
			return nil, err
		}
		if sp.Version < 2 {
			return nil, fmt.Errorf("%w: plan version %d in a binary object, which version 2 began", formats.ErrCorrupt, sp.Version)
		}
	case bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("{")):
		sp = new(Object)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(sp); err != nil {
			return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: data after the plan", formats.ErrCorrupt)
		}
		if sp.Version != 1 {
			return nil, fmt.Errorf("%w: plan version %d in JSON, which only version 1 was", formats.ErrCorrupt, sp.Version)
		}
	default:
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, errNoMagic)
	}
	switch {
	case sp.Version > Version:
		return nil, fmt.Errorf("%w: plan version %d, this build reads %d and older", formats.ErrCorrupt, sp.Version, Version)
	case sp.Plan == "" || len(sp.Files) == 0:
		return nil, fmt.Errorf("%w: plan without a fingerprint or files", formats.ErrCorrupt)
	}
	sp.byURL = make(map[string]int, len(sp.Files))
	for i, f := range sp.Files {
		if _, ok := sp.byURL[f.URL]; ok {
			return nil, fmt.Errorf("%w: file %s twice in the plan", formats.ErrCorrupt, f.URL)
		}
		sp.byURL[f.URL] = i
	}
	return sp, nil
}

// load reads the plan, or returns nil if there is none.
func (ps *Store) load(ctx context.Context) (*Object, error) {
	raw, err := ps.read(ctx)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read shared plan %q: %w", ps.Key, err)
	}
	sp, err := decodeSharedPlan(raw)
	if err != nil {
		return nil, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	return sp, nil
}

// read reads the plan object into a buffer of its size: read into one
// that grows from small, as Bucket.ReadAll does, a plan of megabytes cost
// a rank of a thousand as much CPU in copies and clearing as the rest of
// its start.
func (ps *Store) read(ctx context.Context) ([]byte, error) {
	r, err := ps.Bucket.NewReader(ctx, ps.Key, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The size is the server's word: a buffer is made of it up to a bound,
	// and grows past it only as bytes come.
	const most = 1 << 30
	buf := bytes.NewBuffer(make([]byte, 0, min(max(r.Size(), 0), most)+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// await waits for the stored plan on a rank other than the planner whose
// first read found none: it polls, backing off from 50 ms to 1 s, and
// gets nil once Wait has passed.
func (ps *Store) await(ctx context.Context) (*Object, error) {
	wait := ps.Wait
	if wait <= 0 {
		wait = 5 * time.Minute
	}
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		t := time.NewTimer(min(pause, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("stream: waiting for shared plan %q: %w", ps.Key, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
		sp, err := ps.load(ctx)
		if err != nil || sp != nil || time.Now().After(deadline) {
			return sp, err
		}
	}
}

// recordingCache passes through to the caller's cache, if any, and keeps
// every entry the drivers set or found: the planner's entries go into the
// shared plan.
type recordingCache struct {
	next formats.Cache
	mu   sync.Mutex
	got  map[string][]byte
}

func (c *recordingCache) Get(ctx context.Context, key []byte) ([]byte, error) {
	if c.next == nil {
		return nil, errNoEntry
	}
	v, err := c.next.Get(ctx, key)
	if err == nil && len(v) > 0 {
		c.keep(key, v)
	}
	return v, err
}

func (c *recordingCache) Set(ctx context.Context, key, value []byte) error {
	c.keep(key, value)
	if c.next == nil {
		return nil
	}
	return c.next.Set(ctx, key, value)
}

func (c *recordingCache) keep(key, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[string(key)] = bytes.Clone(value)
}

// entries lists what was kept, by key, so that the plan object is the same
// whichever rank writes it.
func (c *recordingCache) entries() []CacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CacheEntry, 0, len(c.got))
	for _, k := range slices.Sorted(maps.Keys(c.got)) {
		out = append(out, CacheEntry{Key: []byte(k), Value: c.got[k]})
	}
	return out
}

// replayCache answers from the shared plan's entries, then the caller's
// cache. It keeps nothing new: a miss is a file the plan does not know,
// which the check refuses anyway.
type replayCache struct {
	got  map[string][]byte
	next formats.Cache
}

var errNoEntry = errors.New("stream: no cache entry")

func (c *replayCache) Get(ctx context.Context, key []byte) ([]byte, error) {
	if v, ok := c.got[string(key)]; ok {
		return v, nil
	}
	if c.next == nil {
		return nil, errNoEntry
	}
	return c.next.Get(ctx, key)
}

func (c *replayCache) Set(ctx context.Context, key, value []byte) error {
	if c.next == nil {
		return nil
	}
	return c.next.Set(ctx, key, value)
}

// planFiles is what the plan needs of the fragments: their units.
func planFiles(data *formats.Scan) []split.File {
	files := make([]split.File, len(data.Fragments))
	for i, f := range data.Fragments {
		files[i].Units = make([]split.Unit, len(f.Units))
		for j, u := range f.Units {
			files[i].Units[j] = split.Unit{Rows: u.Rows, Bytes: u.Bytes, Paged: u.Paged}
		}
	}
	return files
}

// renamed lists the files Options.Plan.Format gives another driver than their
// names would, each with that driver: they go into the fingerprint.
// stream.Options.Format is in the fingerprint this far and no further: a file
// read by another driver may come as other rows (the same bytes as CSV and
// as TSV are other values, and other records where quotes hold line
// breaks), so a state must not resume across that change; but a file
// given the driver its name picks anyway is the same rows, and a plan
// without Format keeps the fingerprint it always had.
func renamed(o Options, data *formats.Scan) []string {
	if o.Plan.Format == "" {
		return nil
	}
	byName := o.Plan.Formats
	if len(byName) == 0 {
		byName = []formats.Format{drivers.Default()}
	}
	var out []string
	for _, f := range data.Fragments {
		d := byName[0]
		for _, c := range byName {
			if c.Match(f.Source.Object.Key) {
				d = c
				break
			}
		}
		if d.Name() != f.Format {
			out = append(out, fmt.Sprintf("%q %s", f.Rel, f.Format))
		}
	}
	return out
}

// planHash fingerprints the chunk list by relative keys, sizes and row
// ranges (unit ranges where counts are unknown), and the filter, so a
// dataset copied to another place or bucket is the same plan.
func planHash(data *formats.Scan, chunks []split.Chunk, flt formats.Filter, renamed []string) string {
	h := sha256.New()
	if flt != nil {
		// The canonical text: the same condition written otherwise is the
		// same plan.
		fmt.Fprintf(h, "filter %q\n", flt.String())
	}
	for _, r := range renamed {
		fmt.Fprintf(h, "driver %s\n", r)
	}
	// The lines are made without fmt (the text of "f %q %d %d\n" and of
	// "%c %d %d %d\n"): a rank of a thousand hashes every chunk of the
	// plan as it starts.
	line := make([]byte, 0, 128)
	for _, f := range data.Fragments {
		line = strconv.AppendQuote(append(line[:0], "f "...), f.Rel)
		line = strconv.AppendInt(append(line, ' '), f.Size, 10)
		line = strconv.AppendInt(append(line, ' '), f.Rows, 10)
		h.Write(append(line, '\n'))
	}
	for _, c := range chunks {
		kind, a, b := byte('c'), c.Start, c.End
		switch {
		case c.Start < 0:
			kind, a, b = 'u', int64(c.FirstUnit), int64(c.EndUnit)
		case c.Paged:
			// Windows take such a chunk a window at a time: another
			// order than where it is read whole.
			kind = 'p'
		}
		line = strconv.AppendInt(append(line[:0], kind, ' '), int64(c.Fragment), 10)
		line = strconv.AppendInt(append(line, ' '), a, 10)
		line = strconv.AppendInt(append(line, ' '), b, 10)
		h.Write(append(line, '\n'))
	}
	if data.Version != "" {
		// The version leads, so that a state of another (a resume against
		// another snapshot) is refused with both named.
		return data.Version + "/" + hex.EncodeToString(h.Sum(nil)[:16])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
