package stream

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream/internal/engine"
)

// Options configure a Dataset. The zero value of every field but URLs is a
// documented default. Fields marked "order" decide which rows come and in
// which order; they are part of the state's fingerprint, so a state only
// resumes a dataset opened with the same values.
type Options struct {
	// URLs name the data: files, directories (every data file below them),
	// prefixes and globs, as file://, mem:// or plain local paths, or any
	// scheme whose gocloud.dev/blob driver is linked in. Required unless
	// Plan is set. (order)
	URLs []string
	// Plan, if set, plans the dataset instead of URLs: a table format's
	// planner, such as (*iceberg.Table).Plan of formats/iceberg. It gets
	// the planning options Open would give formats.Plan. Default: plan
	// URLs. (order)
	Plan func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error)
	// Columns selects columns by top-level name, in the order batches carry
	// them. Default: every column of the first file. (order)
	Columns []string
	// Filter keeps only the rows for which a SQL-like condition holds,
	// such as "label = 3 AND x > 0.5" or "name IN ('a', 'b')" (grammar and
	// null semantics: package filter). Its columns need not be in Columns:
	// they are read and dropped. Units (Parquet row groups) that statistics
	// show hold no passing row are not fetched. Row counts behind a filter
	// are unknown until read, so DropRemainder is refused with one
	// (split.ErrUnknownRows), and EqualBatches counts them at Open.
	// Default "": every row. (order)
	Filter string

	// BatchSize is the number of rows in a batch; the last batch of a split
	// may be shorter. A batch never mixes splits. Default 1024. Changing it
	// between a save and a resume is allowed: cursors count rows.
	BatchSize int

	// Shuffle turns shuffling on: chunk order is shuffled by (Seed, Epoch),
	// then rows are emitted in a seeded order of clumps inside windows of at
	// most ShuffleWindow rows. Off, rows come in storage order. (order)
	Shuffle bool
	// Seed selects the permutation. (order)
	Seed uint64
	// Epoch is the epoch the dataset starts at; each completed pass over
	// Batches moves to the next one. Default 0.
	Epoch int64
	// ClumpSize is the number of contiguous rows that stay together when a
	// window is shuffled. Default 1. (order)
	ClumpSize int
	// ShuffleWindow bounds, in rows, how many rows are read and shuffled
	// together: the memory a split holds. A row group of more than twice
	// the window is read a window's rows at a time (twice that in storage
	// order, where the window shuffles nothing) where a part of it can
	// be fetched on its own (flat columns with a Parquet page index, or
	// without one where the footer counts several pages a chunk, or an ORC
	// row index), its pages fetched as they are needed (where a rank
	// reads on in the same row group, in joined requests), and it is cut
	// into chunks of about four pages of every column that the chunk order
	// moves apart (docs/performance.md#large-row-groups has the rule and
	// the figures). A row group of up to twice the window, or one that
	// cannot be fetched in part (one page a chunk, list or map columns,
	// counts unknown behind a filter), is read whole, so the bound is
	// max(2 × ShuffleWindow, largest row group that cannot). It also bounds
	// chunks of smaller row groups to ShuffleWindow/256 rows (whole row
	// groups), so that a window of small row groups is made of up to 256
	// places in the dataset.
	// How well a window mixes depends on how many places (row groups, or
	// chunks of small ones) it is made of: on data sorted by a label of 10
	// classes, batches of 1024 rows from windows of P places have label
	// histograms about 0.15 from the global one (mean total variation
	// distance) at P = 64, 0.06 at P = 256, about 0.05 at P = 1000, and
	// 0.04 (a full shuffle's figure) when the window is the whole dataset.
	// So the default window mixes to about 0.15 over row groups of 1024 rows
	// or fewer; for 0.05, make the window a thousand row groups or more (or
	// the whole dataset), at the memory of that many decoded row groups.
	// Default 65536. (order)
	ShuffleWindow int
	// ShufflePasses trades decode and I/O for mixing: every chunk (row group,
	// stripe, or run of small ones) is read ShufflePasses times an epoch,
	// each pass keeping a disjoint part of its rows (clumps of ClumpSize
	// rows, counted from the chunk's first, clump c going to pass c mod
	// ShufflePasses), and the chunk order shuffles the passes as it shuffles
	// chunks. A window of ShuffleWindow rows is then made of ShufflePasses
	// times as many places in the dataset, and mixes about as a window that
	// many times larger (docs/performance.md#shuffle-passes has the
	// figures), at about the same memory (a window read ahead holds only its
	// passes' rows once permuted; a window being decoded holds its chunks'
	// rows of every pass until then) but ShufflePasses times the bytes
	// fetched and decoded: every pass fetches and decodes its chunk whole.
	// The extra bytes are counted in the metrics' RefetchBytes and
	// Dataset.Overlap. Every row still comes once
	// an epoch, the order is still a pure function of the plan and the order
	// options, and states resume as without passes. It needs Shuffle, and
	// every unit's exact row count before reading: a Filter, CSV and JSON
	// files, and Iceberg equality deletes are refused with it. Default 1:
	// every chunk read once. (order)
	ShufflePasses int
	// ChunkBytes is the target size, in stored bytes of the selected columns,
	// of the chunks that chunk-order shuffling moves and splits are cut from.
	// Row groups are packed into chunks; only a row group of more than
	// twice ShuffleWindow that can be fetched in part is cut (see
	// ShuffleWindow).
	// Default 1 MiB. (order)
	ChunkBytes int64

	// ShuffleMemory, if positive, sizes the shuffle window in bytes of
	// decoded data instead of rows: the window is ShuffleMemory divided by
	// the plan's estimate of a decoded row's bytes (Estimate.RowBytes:
	// fixed-width columns exactly from their Arrow types, the others from
	// the Parquet footers' uncompressed sizes of their column chunks), and
	// everything ShuffleWindow says then holds of those rows; a window
	// still holds at least a row group, so the memory is about
	// max(ShuffleMemory, the largest decoded row group) per window read
	// ahead, and a shuffled window peaks at about twice that and its
	// stored bytes while it is permuted (Estimate.PeakBytes). It is how
	// mixing is bought on files of large row groups: a
	// window mixes as well as the places (row groups, or chunks of small
	// ones) it is made of, and the bytes say what that costs whatever the
	// files' row group size. Dataset.Estimate (sluice inspect) prices a
	// setting before any data is read: the window's rows and places, its
	// memory, and the mixing it gives on label-sorted data. On data sorted
	// by label, windows of 64 row groups mix to about 0.15 and windows of
	// a thousand or the whole dataset to 0.05 (docs/performance.md). Setting
	// both ShuffleWindow and ShuffleMemory is an error. The order depends
	// on the rows it derives, not the bytes: a state resumes where the
	// files give the same rows, and resumes a ShuffleWindow of those rows
	// (State.ShuffleWindow); where they do not (another build estimating
	// rows otherwise), the state is refused naming the window, and opening
	// with its ShuffleWindow resumes it.
	// Default 0: the window is ShuffleWindow rows. (order, as the rows)
	ShuffleMemory int64

	// NumSplits is the number of splits an epoch is dealt into; a pure
	// function of the data and order options fixes what each split emits,
	// whatever the world size. It must be a multiple of WorldSize.
	// Default WorldSize. (order)
	NumSplits int
	// DropRemainder drops fewer than NumSplits rows per epoch (the last ones
	// of the epoch's chunk order) so that every split, and so every rank,
	// gets the same number of rows and batches: uneven ranks hang DDP jobs.
	// (order)
	DropRemainder bool
	// EqualBatches gives every rank the same number of batches in every
	// epoch, also after a resume on another world size, where ranks can
	// have unequal rests of the epoch: a data-parallel rank with a batch
	// more waits forever in the step's collective. Every rank counts every
	// rank's batches left (a batch never mixes splits, so a rank has the
	// sum over its splits of their rows left divided by BatchSize, rounded
	// up) and takes the first as many of its own as the fewest any rank
	// has; the rest of its epoch, the last batches of its round-robin, is
	// dropped, as Ray's streaming_split(equal=True) drops rows. No row is
	// repeated and none dropped where the ranks already have as many. It
	// counts at the start of every epoch and at every load of a merged state
	// (checkpoint.Merge), whose cursors tell every rank's rows; a rank's own
	// state carries the count (State.BatchesLeft). It needs every split's
	// row count: where the plan does not know them (behind a filter or
	// Iceberg equality deletes, CSV and JSON without text.Options.Count),
	// Open runs a counting pass, reading every such chunk once as the
	// stream reads it and counting its rows, kept in PlanCache (a restart
	// with the same cache reads none again). The order stays as it is.
	// Not part of the order: a state resumes with it on or off.
	// Default false.
	EqualBatches bool
	// Rank and WorldSize: rank r reads the splits s with s mod WorldSize
	// == r and takes batches from them round-robin. Defaults 0 and 1.
	Rank, WorldSize int

	// Limits bound the goroutines of each stage of the pipeline and what
	// it reads ahead and caches: how much of the machine the dataset
	// uses. None of them changes which rows come or in which order.
	// Default: each field's own, most scaling with the cores.
	Limits Limits
	// Storage configures how URLs are opened and lets a caller wrap every
	// bucket (for accounting or fault injection).
	Storage storage.Options
	// CacheDir, if set, keeps the bytes read from object stores (every
	// scheme but local files) in this local folder (package
	// storage/localcache), so that later epochs, restarted jobs and the
	// other ranks and DataLoader workers on the machine that name the same
	// folder read them from local disk instead of the bucket. Objects are
	// kept in blocks of 4 MiB, each fetched once however many processes
	// want it, checked against a checksum when read, and named by the
	// object's version as planned, so a rewritten object is never served
	// from the cache. Metrics count the bytes it served, its evictions,
	// and each epoch's bytes from buckets (metrics.Snapshot.Epochs).
	// Default "": no cache. Not with Storage.Cache.
	CacheDir string
	// CacheBytes bounds the blocks CacheDir keeps: past it, the least
	// recently read go, down to 90% of it. Processes sharing the folder
	// may together overshoot it by an eighth of it each, briefly (see
	// localcache.Options.MaxBytes). Default 10 GiB; at least 8 MiB.
	CacheBytes int64
	// Formats are the file formats tried, in order. Default: Parquet.
	Formats []formats.Format
	// Format names the driver that reads every file whatever its name:
	// "parquet", "orc", "avro", "csv", "tsv", "jsonl" or "json" (or the
	// Name of a driver of Formats), for files named otherwise (.tbl,
	// .dat, .txt, no extension) and every file of a directory or glob. With Formats
	// empty, it reads with that format's default driver; with Formats
	// set, with Formats' driver of that name (so text options come from
	// the driver given there), and a name Formats has no driver for is
	// refused. Not with Plan: a table names its files' formats. Default
	// "": each file is read by the first of Formats whose extension it
	// has, a file named explicitly by its first bytes (see
	// formats.PlanOptions.Formats). (order: a file read by
	// another driver than its name picks is in the fingerprint)
	Format string
	// PlanCache, if set, keeps every file's footer between runs so a
	// restarted job plans without reading them (a changed file misses):
	// for example store.KV("plans") of the job's pebblestore.Store.
	// Default: none.
	PlanCache formats.Cache
	// PlanStore, if set, shares one plan among the job's ranks: rank 0
	// reads the footers and writes the plan there, the others plan from it
	// without reading footers (see PlanStore). Default: none, every rank
	// reads every footer.
	PlanStore *PlanStore
	// Allocator allocates Arrow memory. Default memory.DefaultAllocator.
	// With arrow-go's Go allocator (the default), buffers that sluice
	// writes whole (decoded values, gathered and concatenated batches) are
	// taken unzeroed from the runtime, which saves writing each byte
	// twice; and a Parquet batch whose values are a dictionary page's
	// entries in order (a column of distinct values, as writers encode it
	// by default) is built of that page's memory instead of a copy. Any
	// other allocator sees every buffer, zeroed as its Allocate zeroes it,
	// unless it offers unzeroed ones itself with a method
	// AllocateUnzeroed(size int) []byte; one whose memory is the runtime's
	// all the same (a checked allocator over Go's, say) can say so with a
	// method RuntimeMemory() bool, and is then read as the default is.
	Allocator memory.Allocator
	// Metrics receives the pipeline's live figures. Default: a new
	// metrics.Pipeline, available from Dataset.Metrics.
	Metrics *metrics.Pipeline
	// Logger receives debug logs. Default slog.Default().
	Logger *slog.Logger
}

// Limits are a dataset's concurrency and memory bounds (Options.Limits):
// how many goroutines each stage runs, and how much it reads ahead and
// caches. The zero value of every field is its documented default. None
// is part of the order, so any of them may change across a resume.
//
// The concurrency and prefetch defaults scale with the cores: they derive
// from runtime.GOMAXPROCS(0) as it is when Open is called (written p
// below), and on 2 cores they are the values the stream was tuned at.
// Each stage's read-ahead holds memory, so a many-core host also holds
// more windows at once: see each field, and PrefetchBytes for a cap that
// does not grow with the cores.
type Limits struct {
	// FetchConcurrency, if positive, pins the number of windows whose
	// stored bytes are fetched at once, ahead of decoding, at most (within a
	// window every column chunk is fetched at once too); FetchAheadBytes
	// still bounds their bytes. Left at 0, the windows in flight are as
	// many as FetchAheadBytes and the measured latency call for, up to 128.
	// Requests to one bucket are bounded further by
	// Options.Storage.MaxRequests.
	// It is also how far a window's fetch looks ahead for neighbours: the
	// pieces of the next FetchConcurrency-1 windows (max(8, 4 ×
	// ReadConcurrency) where it is 0: 8 on 1 and 2 cores, 64 on 16) that
	// are adjacent rows of one file to its own join its request (up to 8
	// MiB), and those windows take them from it; such bytes count toward
	// PrefetchBytes as their own window's, once that window's fetch has its
	// turn. Where the request stops inside a row group read a window at a
	// time (see Options.ShuffleWindow), the rows that follow in it, from the
	// next windows of the same split too, join it up to four pages of every
	// column, so that the pages at the cut are fetched once. Which requests
	// are made depends on the options, never on timing.
	// Default 0: as FetchAheadBytes decides.
	FetchConcurrency int
	// ReadConcurrency is the number of goroutines decoding fetched windows
	// ahead of the consumer. Decoding is CPU work and the bulk of a
	// stream's, so one decoder per core: fewer leave cores idle (on 16
	// cores, 2 decoders streamed a quarter of the rows/s that 16 did), more
	// add a decoded window each of memory and no speed. On one core, two
	// ran as fast as one or a few percent faster (a second decoder runs
	// while the first waits for its window), so one core keeps the 2 it
	// always had. Default max(2, p).
	ReadConcurrency int
	// TransformConcurrency is the number of goroutines cutting batches out
	// of windows (slices, or gathers when shuffled) and running the
	// transform of Map: CPU work too. Default p.
	TransformConcurrency int
	// PrefetchBatches bounds the batches prepared ahead of the consumer, so
	// that every transform goroutine has a few to work on while the consumer
	// is busy. A shuffled batch is a copy of Options.BatchSize rows; an unshuffled
	// one a slice of its window, which it keeps alive.
	// Default 4 × TransformConcurrency: 8 on 2 cores, 64 on 16.
	PrefetchBatches int
	// PrefetchWindows bounds the decoded windows read ahead of the batch
	// cutter: one per decoder at work and one ready, so that the cutter
	// need not wait while decoders have work. Fewer than ReadConcurrency
	// would leave decoders idle and count as ReadConcurrency. Each holds a
	// decoded window, up to Options.ShuffleWindow rows (a row group of up to twice
	// that, or any that cannot be fetched in part) of the selected columns
	// (a few MiB for a handful of numeric columns), so this memory grows
	// linearly with the cores.
	// Default ReadConcurrency + 1: 3 on 1 and 2 cores, 17 on 16.
	PrefetchWindows int
	// PrefetchBytes, if positive, stops reading ahead while the decoded
	// windows waiting for the cutter hold more than this many bytes (the
	// next window in order is always read, so the stream never stalls); it
	// bounds the fetched windows waiting for a decoder the same way. Being
	// a number of bytes, it caps read-ahead memory whatever the cores, where
	// PrefetchWindows and FetchConcurrency grow with them.
	// Default 0: bounded by PrefetchWindows and FetchConcurrency only.
	PrefetchBytes int64
	// FetchAheadBytes is the budget of stored bytes the fetch stage may
	// hold ahead of the decoders: requested and in flight, or fetched and
	// not yet taken by a decoder. Within it, the bytes ahead follow Little's
	// law: the rate the stream takes bytes (the consumer's, through the
	// decoded queue's backpressure; while the decoders wait for bytes, the
	// rate they decode at) times the latency of recent fetches (their 90th
	// percentile, request to bytes in memory), doubled for headroom. A fast
	// local disk so holds about one window per decoder, and a bucket 100 ms
	// away as many as keep the decoders busy through a request's wait, up
	// to the budget. The latency a budget hides is about FetchAheadBytes /
	// (2 × the stored bytes a second the stream takes): the default hides
	// 100 ms at 1.3 GB/s of stored bytes, some 35M rows/s of the bench's
	// rows (docs/storage.md has the table). One window is always ahead,
	// and one per decoder, whatever their bytes, so a budget below a
	// window's slows the stream but never stops it. When the stream waits
	// on I/O and the latency and rate call for more than the budget, the
	// metrics' advice says "io-bound: raise Limits.FetchAheadBytes"
	// (metrics.Snapshot.Advice); the bytes ahead, what they would be
	// without the budget, and the fetch latency quantiles are in the
	// snapshot. Each fetched window is its stored bytes of memory, so this
	// is the most memory the fetch stage holds (and the Go heap up to about
	// twice that between collections).
	// Default 256 MiB, about 1% of a 2-core 24 GiB machine's memory.
	FetchAheadBytes int64
	// ReadBatchSize is the number of rows per decode call. Default 65536.
	ReadBatchSize int
	// TakeCacheBytes bounds the cache that Take and Locate keep: decoded
	// units (row groups, or blocks of a page-indexed row group) of the
	// selected columns and windows' row orders, so that repeated requests
	// neither read nor shuffle again. Default 256 MiB; negative: no cache
	// (every request reads what it needs).
	TakeCacheBytes int64
	// PlanConcurrency is the number of footers fetched at once by Open
	// (and, on the rank that writes a PlanStore's plan, of cut row groups
	// whose page headers are walked at once). Footers are small reads, so
	// planning waits on latency, not the cores, and
	// Options.Storage.MaxRequests (64) bounds requests to a bucket anyway.
	// Default 16, whatever the cores.
	PlanConcurrency int
}

// withDefaults validates o and fills in defaults, those that scale with
// the cores for the GOMAXPROCS of the moment.
func (o Options) withDefaults() (Options, error) {
	return o.withDefaultsFor(runtime.GOMAXPROCS(0))
}

// withDefaultsFor is withDefaults on procs cores.
func (o Options) withDefaultsFor(procs int) (Options, error) {
	procs = max(procs, 1)
	if len(o.URLs) == 0 && o.Plan == nil {
		return o, fmt.Errorf("stream: Options.URLs is empty")
	}
	if o.WorldSize == 0 {
		o.WorldSize = 1
	}
	if o.NumSplits == 0 {
		o.NumSplits = o.WorldSize
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1024
	}
	if o.ClumpSize == 0 {
		o.ClumpSize = 1
	}
	if o.ShuffleWindow != 0 && o.ShuffleMemory != 0 {
		return o, fmt.Errorf("stream: Options.ShuffleWindow (%d rows) and Options.ShuffleMemory (%d bytes) both size the shuffle window: set one", o.ShuffleWindow, o.ShuffleMemory)
	}
	if o.ShuffleWindow == 0 && o.ShuffleMemory == 0 {
		o.ShuffleWindow = 65536
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = 1 << 20
	}
	if o.ShufflePasses == 0 {
		o.ShufflePasses = 1
	}
	o.Limits = o.Limits.withDefaults(procs)
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.WorldSize < 0:
		return o, fmt.Errorf("stream: WorldSize %d must be positive", o.WorldSize)
	case o.Rank < 0 || o.Rank >= o.WorldSize:
		return o, fmt.Errorf("stream: Rank %d is outside WorldSize %d", o.Rank, o.WorldSize)
	case o.NumSplits < 0:
		return o, fmt.Errorf("stream: NumSplits %d must be positive", o.NumSplits)
	case o.NumSplits%o.WorldSize != 0:
		return o, fmt.Errorf("stream: NumSplits %d is not a multiple of WorldSize %d: every rank must own the same number of splits", o.NumSplits, o.WorldSize)
	case o.BatchSize < 0:
		return o, fmt.Errorf("stream: BatchSize %d must be positive", o.BatchSize)
	case o.ClumpSize < 0:
		return o, fmt.Errorf("stream: ClumpSize %d must be positive", o.ClumpSize)
	case o.ShuffleWindow < 0:
		return o, fmt.Errorf("stream: ShuffleWindow %d must be positive", o.ShuffleWindow)
	case o.ShuffleMemory < 0:
		return o, fmt.Errorf("stream: ShuffleMemory %d must be positive", o.ShuffleMemory)
	case o.ChunkBytes < 0:
		return o, fmt.Errorf("stream: ChunkBytes %d must be positive", o.ChunkBytes)
	case o.ShufflePasses < 0:
		return o, fmt.Errorf("stream: ShufflePasses %d must be positive", o.ShufflePasses)
	case o.ShufflePasses > 1 && !o.Shuffle:
		return o, fmt.Errorf("stream: ShufflePasses %d needs Shuffle: passes only mix where windows are shuffled, and unshuffled they would only read every row group %d times", o.ShufflePasses, o.ShufflePasses)
	case o.ShufflePasses > 1 && o.Filter != "":
		return o, fmt.Errorf("stream: ShufflePasses %d with Filter %q: passes need every row group's exact row count before reading, which a filter leaves unknown", o.ShufflePasses, o.Filter)
	case o.Epoch < 0:
		return o, fmt.Errorf("stream: Epoch %d must not be negative", o.Epoch)
	case o.CacheBytes < 0:
		return o, fmt.Errorf("stream: CacheBytes %d must be positive", o.CacheBytes)
	case o.CacheDir != "" && o.Storage.Cache != nil:
		return o, fmt.Errorf("stream: CacheDir and Storage.Cache both cache the buckets' bytes: set one")
	case o.Limits.negative():
		return o, fmt.Errorf("stream: concurrency and prefetch options must not be negative")
	}
	return o, nil
}

// DefaultFetchAheadBytes is Limits.FetchAheadBytes's default: 256 MiB.
const DefaultFetchAheadBytes = 256 << 20

// WithDefaults is l with each field left at zero set to the default Open
// would give it on the given number of cores (GOMAXPROCS is what Open
// uses): for a program that runs more Go threads at once than it has
// cores to decode on, such as a C library whose caller's thread takes one
// (the Python package's), and sizes its datasets to the cores.
func (l Limits) WithDefaults(cores int) Limits { return l.withDefaults(max(cores, 1)) }

// withDefaults fills in l's defaults on procs cores.
func (l Limits) withDefaults(procs int) Limits {
	if l.ReadConcurrency == 0 {
		l.ReadConcurrency = max(2, procs)
	}
	if l.TransformConcurrency == 0 {
		l.TransformConcurrency = procs
	}
	if l.PrefetchBatches == 0 {
		l.PrefetchBatches = 4 * l.TransformConcurrency
	}
	if l.PrefetchWindows == 0 {
		l.PrefetchWindows = l.ReadConcurrency + 1
	}
	if l.ReadBatchSize == 0 {
		l.ReadBatchSize = 65536
	}
	if l.TakeCacheBytes == 0 {
		l.TakeCacheBytes = 256 << 20
	}
	if l.FetchAheadBytes == 0 {
		l.FetchAheadBytes = DefaultFetchAheadBytes
	}
	return l
}

// negative reports a bound below zero, which none may be but
// TakeCacheBytes (no cache).
func (l Limits) negative() bool {
	return l.ReadConcurrency < 0 || l.FetchConcurrency < 0 || l.TransformConcurrency < 0 || l.PrefetchBatches < 0 ||
		l.PrefetchWindows < 0 || l.PrefetchBytes < 0 || l.FetchAheadBytes < 0 || l.ReadBatchSize < 0 || l.PlanConcurrency < 0
}

// order is the order options as package permutation takes them: the one
// place they are gathered, and from here on they travel as this value (to
// the planner, the engine and the state).
func (o Options) order() permutation.Order {
	return permutation.Order{Shuffle: o.Shuffle, Seed: o.Seed, ClumpSize: o.ClumpSize, ShuffleWindow: o.ShuffleWindow,
		NumSplits: o.NumSplits, DropRemainder: o.DropRemainder, Passes: o.ShufflePasses}
}

// engineOptions are what the engine runs by: the order and the limits,
// each whole, and the rank's place and its plumbing.
func (o Options) engineOptions() engine.Options {
	return engine.Options{
		Order:        o.order(),
		Limits:       engine.Limits(o.Limits),
		BatchSize:    o.BatchSize,
		Epoch:        o.Epoch,
		EqualBatches: o.EqualBatches,
		Rank:         o.Rank,
		WorldSize:    o.WorldSize,
		Allocator:    o.Allocator,
		Metrics:      o.Metrics,
		Logger:       o.Logger,
	}
}
