// Package matrix runs the value matrix: cases drawn over the datasets of
// package valuecheck and the stream's options, each read through the
// user's API (stream.Open, Batches, StateDict and a merged resume, Take,
// Mix, Consumers, Map, Rows, Matrices) and every delivered value
// checked against its row's id, every wanted row once.
//
// A case is drawn by a Chooser: from a seed (TestValueMatrix in stream)
// or from a fuzzer's bytes (FuzzValueOptions), two bytes a choice.
package matrix

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/stream"
	"github.com/sluicedata/sluice/stream/typed"
)

// Chooser makes a case's choices: IntN returns a number in [0, n).
type Chooser interface{ IntN(n int) int }

// Seeded is a Chooser drawing from a seed. Choices, if not nil, receives
// each choice as FromBytes reads it back, so that a seeded case can be
// written as a fuzz corpus entry.
type Seeded struct {
	r       *rand.Rand
	Choices *[]byte
}

// NewSeeded returns the Chooser of seed.
func NewSeeded(seed uint64) *Seeded { return &Seeded{r: rand.New(rand.NewPCG(seed, 0x5eed))} }

func (s *Seeded) IntN(n int) int {
	v := s.r.IntN(n)
	if s.Choices != nil {
		*s.Choices = binary.LittleEndian.AppendUint16(*s.Choices, uint16(v))
	}
	return v
}

// FromBytes is a Chooser reading two bytes a choice (modulo n); past the
// end every choice is 0.
type FromBytes []byte

func (b *FromBytes) IntN(n int) int {
	if len(*b) < 2 {
		return 0
	}
	v := int(binary.LittleEndian.Uint16(*b))
	*b = (*b)[2:]
	return v % n
}

// Bytes returns the choices of the case seed draws over set, as a corpus
// entry for FromBytes.
func Bytes(set Set, seed uint64) ([]byte, error) {
	var out []byte
	s := NewSeeded(seed)
	s.Choices = &out
	c := Draw(set, s)
	if err := c.Run(context.Background()); err != nil {
		return nil, err
	}
	return out, nil
}

// Dataset is one dataset of the matrix: ids [from, from+rows).
type Dataset struct {
	Name    string
	URLs    []string
	Formats []formats.Format
	// Plan, if set, plans the dataset instead of URLs (a table's planner).
	Plan func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error)
	// Columns are the dataset's columns, columns of valuecheck.All.
	Columns []string
	// From and Rows: the dataset holds ids [From, From+Rows), but those
	// Deleted reports (a table's deletes).
	From, Rows int64
	Deleted    func(id int64) bool
	// Known: row counts are known before reading (Take, DropRemainder and
	// mixes need them).
	Known bool
}

type Set struct {
	Datasets []Dataset
	// Other is a dataset of other ids, to mix with Datasets[0]; without
	// one, no case mixes.
	Other *Dataset
	// Tune, if set, changes every drawn case's options last, drawing
	// nothing: the same seeds run the same cases through another path
	// (a cache, another bucket).
	Tune func(o *stream.Options)
}

func allColumns() []string {
	out := make([]string, len(vc.All))
	for i, c := range vc.All {
		out[i] = c.Name
	}
	return out
}

// flatColumns are the columns of no list type.
func flatColumns() []string {
	var out []string
	for _, c := range vc.All {
		if _, list := c.Type.(arrow.ListLikeType); !list {
			out = append(out, c.Name)
		}
	}
	return out
}

// orcColumns are the columns the ORC writer writes.
var orcColumns = []string{"id", "i32", "i64", "f32", "f64", "unit", "b", "text", "tag", "bin"}

// written holds the one writing of the datasets a test process makes:
// the value matrix, its cached twin and the fuzzer's seeds read the same
// files, and writing them was most of each test's time under the race
// detector.
var written struct {
	once sync.Once
	set  Set
	err  error
}

// Write returns the matrix's datasets, written on the first call of the
// test process into valuecheck's shared directory and shared by later
// calls: each gets its own copy of the Set to change, and the files are
// only read. The package's TestMain removes them (valuecheck.RemoveShared).
func Write(t testing.TB) Set {
	t.Helper()
	written.once.Do(func() {
		dir, err := vc.SharedDir()
		if err == nil {
			dir = filepath.Join(dir, "matrix")
			if err = mkdir(dir); err == nil {
				written.set, err = write(dir)
			}
		}
		written.err = err
	})
	if written.err != nil {
		t.Fatal(written.err)
	}
	return written.set.clone()
}

// clone copies what a test may change: the datasets' slices and Other.
func (s Set) clone() Set {
	out := s
	out.Datasets = slices.Clone(s.Datasets)
	for i := range out.Datasets {
		d := &out.Datasets[i]
		d.URLs = slices.Clone(d.URLs)
		d.Formats = slices.Clone(d.Formats)
		d.Columns = slices.Clone(d.Columns)
	}
	if s.Other != nil {
		o := *s.Other
		o.URLs = slices.Clone(o.URLs)
		o.Columns = slices.Clone(o.Columns)
		out.Other = &o
	}
	return out
}

// write writes the matrix's datasets into dir.
func write(dir string) (Set, error) {
	var failed error
	all := allColumns()
	var vs Set
	add := func(d Dataset, write func(dir string) error) {
		if failed != nil {
			return
		}
		sub := filepath.Join(dir, d.Name)
		if err := mkdir(sub); err != nil {
			failed = err
			return
		}
		if err := write(sub); err != nil {
			failed = fmt.Errorf("value matrix dataset %s: %w", d.Name, err)
			return
		}
		d.URLs = []string{sub}
		vs.Datasets = append(vs.Datasets, d)
	}
	addIf := func(ok bool, d Dataset, write func(dir string) error) {
		if ok {
			add(d, write)
		}
	}
	pq := func(name string, files int, rows int64, o vc.Parquet) {
		add(Dataset{Name: name, Columns: all, Rows: int64(files) * rows, Known: true}, func(sub string) error {
			for f := range files {
				if err := vc.WriteParquet(filepath.Join(sub, fmt.Sprintf("part-%d.parquet", f)), vc.All, int64(f)*rows, rows, o); err != nil {
					return err
				}
			}
			return nil
		})
	}
	pq("parquet-groups", 3, 1500, vc.Parquet{RowGroupRows: 250})
	pq("parquet-pageindex-big-group", 1, 6000, vc.Parquet{PageIndex: true, Plain: true, Codec: compress.Codecs.Snappy})
	pq("parquet-one-row-groups", 2, 60, vc.Parquet{RowGroupRows: 1, Codec: compress.Codecs.Zstd})
	// Row groups larger than most windows, with a page index and small
	// pages, of flat columns only: a stream cuts each into chunks of rows
	// (split.ChunkOptions.CutRows), which list columns rule out.
	add(Dataset{Name: "parquet-pageindex-groups", Columns: flatColumns(), Rows: 3 * 3000, Known: true}, func(sub string) error {
		for f := range 3 {
			err := vc.WriteParquet(filepath.Join(sub, fmt.Sprintf("part-%d.parquet", f)), vc.Pick(flatColumns()...), int64(f)*3000, 3000, vc.Parquet{RowGroupRows: 1500, PageIndex: true, Codec: compress.Codecs.Snappy})
			if err != nil {
				return err
			}
		}
		return nil
	})
	// The two largest datasets are left out under -short (CI's race pass):
	// writing them under the race detector took most of the value matrix's
	// time there, and the pass without the detector reads them. A seed
	// draws another case from the smaller set.
	big := !testing.Short()
	// The same without a page index, in row groups large enough that a
	// split boundary's cut saves the walk of their page headers (the
	// driver walks where that saves 64 KiB of a chunk or more).
	addIf(big, Dataset{Name: "parquet-nopageindex-groups", Columns: flatColumns(), Rows: 2 * 24_000, Known: true}, func(sub string) error {
		for f := range 2 {
			err := vc.WriteParquet(filepath.Join(sub, fmt.Sprintf("part-%d.parquet", f)), vc.Pick(flatColumns()...), int64(f)*24_000, 24_000, vc.Parquet{SmallPages: true, Codec: compress.Codecs.Snappy})
			if err != nil {
				return err
			}
		}
		return nil
	})
	// The outside probe's shape: one row group of 24,925 rows (its
	// filtered, shuffled string column was read wrong), here with the
	// columns the filters read.
	addIf(big, Dataset{Name: "parquet-one-group", Columns: vc.TextColumns, Rows: 24_925, Known: true}, func(sub string) error {
		return vc.WriteParquet(filepath.Join(sub, "part.parquet"), vc.Pick(vc.TextColumns...), 0, 24_925, vc.Parquet{})
	})
	// Empty is empty: files without rows stream no rows and no batches.
	pq("parquet-empty", 2, 0, vc.Parquet{})
	add(Dataset{Name: "orc", Formats: []formats.Format{orc.Format{}}, Columns: orcColumns, Rows: 4000, Known: true}, func(sub string) error {
		for f := range 2 {
			err := vc.WriteORC(filepath.Join(sub, fmt.Sprintf("part-%d.orc", f)), vc.Pick(orcColumns...), int64(f)*2000, 2000, vc.ORCStripes(1000, 200))
			if err != nil {
				return err
			}
		}
		return nil
	})
	textCols := vc.Pick(vc.TextColumns...)
	add(Dataset{Name: "csv", Formats: []formats.Format{text.New(text.CSV, text.Options{UnitBytes: 64 << 10})}, Columns: vc.TextColumns, Rows: 5000}, func(sub string) error {
		for f := range 2 {
			if err := vc.WriteCSV(filepath.Join(sub, fmt.Sprintf("part-%d.csv", f)), textCols, int64(f)*2500, 2500); err != nil {
				return err
			}
		}
		return nil
	})
	add(Dataset{Name: "jsonl", Formats: []formats.Format{text.New(text.JSONLines, text.Options{UnitBytes: 64 << 10})}, Columns: vc.TextColumns, Rows: 5000}, func(sub string) error {
		for f := range 2 {
			if err := vc.WriteJSONL(filepath.Join(sub, fmt.Sprintf("part-%d.jsonl", f)), textCols, int64(f)*2500, 2500); err != nil {
				return err
			}
		}
		return nil
	})
	for _, hide := range []bool{false, true} {
		name := "arrow"
		if hide {
			name = "arrow-unknown-counts"
		}
		add(Dataset{Name: name, Formats: []formats.Format{arrowfile.Format{HideCounts: hide}}, Columns: all, Rows: 3000, Known: !hide}, func(sub string) error {
			return vc.WriteArrow(filepath.Join(sub, "part.arrow"), vc.All, 0, 3000, 700)
		})
	}
	// The mix's second source: other ids, other row groups.
	if failed != nil {
		return Set{}, failed
	}
	other := filepath.Join(dir, "parquet-other")
	if err := mkdir(other); err != nil {
		return Set{}, err
	}
	if err := vc.WriteParquet(filepath.Join(other, "part.parquet"), vc.All, 100_000, 2500, vc.Parquet{RowGroupRows: 400}); err != nil {
		return Set{}, fmt.Errorf("value matrix dataset parquet-other: %w", err)
	}
	vs.Other = &Dataset{Name: "parquet-other", URLs: []string{other}, Columns: all, From: 100_000, Rows: 2500, Known: true}
	return vs, nil
}

// Filter is a filter and which ids pass it.
type Filter struct {
	Expr string
	Keep func(id int64) bool
}

func colValue(name string, id int64) any {
	c, _ := vc.ByName(name)
	return c.Value(id)
}

// Filters use the columns every dataset has (vc.TextColumns).
var Filters = []Filter{
	{"", func(int64) bool { return true }},
	{"tag <> 's7'", func(id int64) bool { return vc.Tag(id) != "s7" }},
	{"unit > 0.5", func(id int64) bool { return vc.X(id) > 0.5 }},
	{"id BETWEEN 600 AND 3100 AND NOT (tag = 's7')", func(id int64) bool { return id >= 600 && id <= 3100 && vc.Tag(id) != "s7" }},
	{"tag IN ('s1', 's22', 's333', 's999')", func(id int64) bool {
		t := vc.Tag(id)
		return t == "s1" || t == "s22" || t == "s333" || t == "s999"
	}},
	{"i32 > 0", func(id int64) bool { v := colValue("i32", id); return v != nil && v.(int64) > 0 }},
	{"text IS NULL OR unit < 0.25", func(id int64) bool { return colValue("text", id) == nil || vc.X(id) < 0.25 }},
	{"b = true AND text <> ''", func(id int64) bool {
		b, s := colValue("b", id), colValue("text", id)
		return b != nil && b.(bool) && s != nil && s.(string) != ""
	}},
}

// Case is one drawn case.
type Case struct {
	data    Dataset
	other   *Dataset
	opts    stream.Options
	filter  Filter
	mode    string
	world   int // the world size of the first run
	world2  int // and of a resume
	batch2  int // a resume's batch size
	mixNoRe bool
	split   int // consumers of a streaming split
	// recycled reads into vc.Recycling over the checked allocator.
	recycled bool
	r        Chooser
}

func (c *Case) describe() string {
	o := c.opts
	return fmt.Sprintf("%s on %s, filter %q, columns %v, shuffle %v seed %d clump %d window %d memory %d passes %d chunk %d, batch %d read batch %d, splits %d world %d/%d batch2 %d, epoch %d, read %d transform %d fetch %d ahead %d prefetch b%d w%d bytes %d, drop %v, equal %v, recycled %v",
		c.mode, c.data.Name, c.filter.Expr, o.Columns, o.Shuffle, o.Seed, o.ClumpSize, o.ShuffleWindow, o.ShuffleMemory, o.ShufflePasses, o.ChunkBytes, o.BatchSize, o.Limits.ReadBatchSize,
		o.NumSplits, c.world, c.world2, c.batch2, o.Epoch, o.Limits.ReadConcurrency, o.Limits.TransformConcurrency, o.Limits.FetchConcurrency, o.Limits.FetchAheadBytes, o.Limits.PrefetchBatches, o.Limits.PrefetchWindows, o.Limits.PrefetchBytes, o.DropRemainder, o.EqualBatches, c.recycled)
}

func pick[T any](r Chooser, xs ...T) T { return xs[r.IntN(len(xs))] }

// Draw draws a case over vs. Every dataset of vs must carry the columns
// valuecheck.TextColumns, which the filters read.
func Draw(vs Set, r Chooser) *Case {
	c := &Case{r: r, other: vs.Other}
	c.data = vs.Datasets[r.IntN(len(vs.Datasets))]
	c.mode = pick(r, "epoch", "epoch", "epoch", "resume", "resume", "take", "mix", "split", "map", "rows", "matrices")
	if c.mode == "mix" && vs.Other == nil {
		c.mode = "epoch"
	}
	c.filter = Filters[r.IntN(len(Filters))]
	if r.IntN(3) == 0 {
		c.filter = Filters[0]
	}
	switch c.mode {
	case "take", "mix":
		if c.mode == "mix" || !c.data.Known {
			c.data = vs.Datasets[0]
		}
		c.filter = Filters[0] // both need counts known before reading
		if !c.data.Known {
			c.mode = "epoch"
		}
	}
	o := stream.Options{
		URLs:          c.data.URLs,
		Plan:          c.data.Plan,
		Formats:       c.data.Formats,
		Shuffle:       r.IntN(4) != 0,
		Seed:          uint64(r.IntN(1000)),
		ClumpSize:     pick(r, 0, 1, 4, 16, 64),
		ShuffleWindow: pick(r, 0, 100, 500, 2000, 7000),
		ChunkBytes:    pick[int64](r, 0, 2000, 100_000),
		BatchSize:     pick(r, 1, 7, 37, 100, 1024),
		// The limits' draws come here, between BatchSize's and NumSplits',
		// so that a seed draws the cases it always drew.
		Limits: stream.Limits{
			ReadBatchSize:        pick(r, 0, 1, 50, 333),
			ReadConcurrency:      pick(r, 0, 1, 2, 3),
			TransformConcurrency: pick(r, 0, 1, 3),
			FetchConcurrency:     pick(r, 0, 1, 8),
			PrefetchBatches:      pick(r, 0, 1, 5),
			PrefetchWindows:      pick(r, 0, 1, 4),
			PrefetchBytes:        pick[int64](r, 0, 0, 1, 1<<16),
		},
		NumSplits: pick(r, 1, 1, 2, 3, 4, 6, 24),
		Epoch:     pick[int64](r, 0, 0, 1, 2),
		Filter:    c.filter.Expr,
	}
	if o.BatchSize == 1 && c.data.Rows > 3000 {
		o.BatchSize = 3 // one-row batches cost minutes under -race
	}
	if o.Limits.ReadBatchSize == 1 && c.data.Rows > 1000 {
		// A record batch a row holds every column's buffers a row: half
		// a GiB for the larger datasets, which the smallest one shows as
		// well as they would.
		o.Limits.ReadBatchSize = 50
	}
	// Columns: every column, or a subset in a random order with the id.
	cols := slices.Clone(c.data.Columns)
	switch c.mode {
	case "rows", "matrices":
		// The typed outputs take plain types only.
		cols = []string{"id", "i32", "unit", "b", "text", "tag"}
		if c.mode == "matrices" {
			cols = []string{"id", "unit"}
		}
	}
	if c.mode == "matrices" || r.IntN(4) != 0 {
		for i := len(cols) - 1; i > 0; i-- {
			j := r.IntN(i + 1)
			cols[i], cols[j] = cols[j], cols[i]
		}
		keep := 1 + r.IntN(len(cols))
		cols = cols[:keep]
		if !slices.Contains(cols, "id") {
			cols[r.IntN(len(cols))] = "id"
		}
		o.Columns = cols
	} else if c.mode == "rows" {
		o.Columns = cols
	}
	ws := vc.Divisors(o.NumSplits, o.NumSplits)
	c.world = pick(r, ws...)
	c.world2 = pick(r, ws...)
	c.batch2 = pick(r, o.BatchSize, 1+r.IntN(300))
	c.mixNoRe = r.IntN(2) == 0
	c.split = pick(r, vc.Divisors(o.NumSplits/c.world, o.NumSplits/c.world)...)
	if c.mode == "epoch" && c.data.Known && c.filter.Expr == "" && r.IntN(5) == 0 {
		o.DropRemainder = true
	}
	if (c.mode == "epoch" || c.mode == "resume") && !o.DropRemainder && r.IntN(4) == 0 {
		o.EqualBatches = true
	}
	// Passes where they can be read: shuffled, with every count known
	// before reading (stream.Options.ShufflePasses refuses the others).
	if k := pick(r, 1, 1, 2, 3, 4, 8); o.Shuffle && c.data.Known && c.filter.Expr == "" {
		o.ShufflePasses = k
	}
	// The two largest windows sized in bytes instead (stream's
	// ShuffleMemory) on half the cases whose plan can price a row (counts
	// known, no filter), with no draw of their own: a seed's cases stay
	// what they were but for that.
	if o.ShuffleWindow >= 2000 && o.Seed%2 == 1 && c.data.Known && c.filter.Expr == "" {
		o.ShuffleWindow, o.ShuffleMemory = 0, int64(o.ShuffleWindow)*40
	}
	// The fetch stage's budget, drawn last so that a seed draws the
	// cases it drew before there was one: 1 byte leaves only the windows
	// always admitted (one per decoder and the next), 4 KiB about one.
	o.Limits.FetchAheadBytes = pick[int64](r, 0, 0, 1, 4<<10, 1<<20)
	if vs.Tune != nil {
		vs.Tune(&o)
	}
	c.opts = o
	// Half the cases read into a recycling allocator bound by use, as the
	// C API (and so the Python package) does: every batch released is
	// memory a later window is decoded into. By the seed's second bit,
	// with no draw of its own.
	c.recycled = o.Seed/2%2 == 1
	return c
}

// want is the ids the case's dataset and filter should deliver.
func (c *Case) want(d Dataset) []int64 {
	var out []int64
	for id := d.From; id < d.From+d.Rows; id++ {
		if c.filter.Keep(id) && (d.Deleted == nil || !d.Deleted(id)) {
			out = append(out, id)
		}
	}
	return out
}

// columns is what a batch must carry, in order.
func (c *Case) columns() []string {
	if c.opts.Columns != nil {
		return c.opts.Columns
	}
	return c.data.Columns
}

// String says what the case does, with every option it sets.
func (c *Case) String() string { return c.describe() }

// filling is a checked allocator that offers its own buffers as unzeroed
// ones (AllocateUnzeroed, which the stream takes where the default
// allocator would give unzeroed memory: see internal/unzeroed), filled
// with 0xa5 as those are in a test binary.
type filling struct{ *memory.CheckedAllocator }

// RuntimeMemory says that the checked allocator's buffers are the Go
// runtime's (see unzeroed.RuntimeMemory), so that the cases read as they
// do with the default allocator.
func (filling) RuntimeMemory() bool { return true }

func (f filling) AllocateUnzeroed(size int) []byte {
	b := f.Allocate(size)
	for i := range b {
		b[i] = 0xa5
	}
	return b
}

// Run runs the case: nil if every value was its row's and every wanted row
// came as the case's mode promises.
func (c *Case) Run(ctx context.Context) error {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// The paths that take unzeroed buffers, as they run with the default
	// allocator, with every byte they leave unset showing (0xa5) and every
	// buffer still counted.
	c.opts.Allocator = filling{mem}
	release := func() {}
	if c.recycled {
		c.opts.Allocator, release = vc.Recycling(filling{mem})
		defer release()
	}
	var err error
	switch c.mode {
	case "epoch":
		err = c.runEpoch(ctx)
	case "resume":
		err = c.runResume(ctx)
	case "take":
		err = c.runTake(ctx)
	case "mix":
		err = c.runMix(ctx)
	case "split":
		err = c.runSplit(ctx)
	case "map":
		err = c.runMap(ctx)
	case "rows":
		err = c.runRows(ctx)
	case "matrices":
		err = c.runMatrices(ctx)
	}
	if err != nil {
		return err
	}
	release() // what a recycler holds is the checked allocator's
	if n := mem.CurrentAlloc(); n != 0 {
		return fmt.Errorf("%d bytes of Arrow memory still allocated after every dataset closed", n)
	}
	return nil
}

// consume checks every batch of ds's current epoch (up to limit batches if
// limit >= 0) and adds its ids to once.
func (c *Case) consume(ctx context.Context, ds *stream.Dataset, limit int, once *vc.Once) (int, error) {
	n := 0
	if limit == 0 {
		return 0, nil
	}
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return n, err
		}
		ids, err := vc.Batch(b, c.columns())
		if err != nil {
			return n, err
		}
		if b.NumRows() == 0 {
			return n, errors.New("an empty batch")
		}
		once.Add(ids)
		n++
		if limit > 0 && n == limit {
			break
		}
	}
	return n, nil
}

func (c *Case) runEpoch(ctx context.Context) error {
	once := vc.NewOnce()
	batches := make([]int, c.world)
	var shared *stream.PlanStore
	if c.world > 1 && c.opts.Seed%2 == 1 {
		// Half the epochs of several ranks share their plan: rank 0 walks
		// the page headers of the row groups the boundaries cut, and the
		// others read those pages by the walks in the plan. By the seed's
		// parity, so that no choice is added and every seed draws the
		// case it drew before.
		b := memblob.OpenBucket(nil)
		defer b.Close()
		shared = &stream.PlanStore{Bucket: b, Key: "plan.json"}
	}
	for rank := range c.world {
		o := c.opts
		o.WorldSize, o.Rank, o.PlanStore = c.world, rank, shared
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return err
		}
		batches[rank], err = c.consume(ctx, ds, -1, once)
		ds.Close()
		if err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	}
	want := c.want(c.data)
	if c.opts.EqualBatches {
		return equalBatches(once, want, batches)
	}
	if !c.opts.DropRemainder {
		return once.Exactly(want)
	}
	// DropRemainder drops fewer than NumSplits rows, the rest once, and
	// gives every rank the same batches.
	got := 0
	for _, id := range want {
		got += once.Count(id)
	}
	if got != once.Len() || once.Max() > 1 || len(want)-got >= c.opts.NumSplits {
		return fmt.Errorf("DropRemainder: %d of %d rows delivered (at most once each: %v), want all but fewer than %d", got, len(want), once.Max() <= 1, c.opts.NumSplits)
	}
	for rank := range batches {
		if batches[rank] != batches[0] {
			return fmt.Errorf("DropRemainder: rank %d took %d batches, rank 0 %d", rank, batches[rank], batches[0])
		}
	}
	return nil
}

// equalBatches checks an epoch read with EqualBatches: every rank took as
// many batches, and the rows delivered are wanted ones, each once (the
// option drops the tail of a rank's epoch, never repeats a row).
func equalBatches(once *vc.Once, want []int64, batches []int) error {
	for rank := range batches {
		if batches[rank] != batches[0] {
			return fmt.Errorf("EqualBatches: rank %d took %d batches, rank 0 %d", rank, batches[rank], batches[0])
		}
	}
	got := 0
	for _, id := range want {
		got += once.Count(id)
	}
	if got != once.Len() || once.Max() > 1 {
		return fmt.Errorf("EqualBatches: %d rows delivered, %d of them wanted, a row up to %d times", once.Len(), got, once.Max())
	}
	return nil
}

// runResume takes 0 to a few batches on every rank of one world, merges
// the ranks' states, and resumes on another world size and batch size.
func (c *Case) runResume(ctx context.Context) error {
	once := vc.NewOnce()
	var states []checkpoint.State
	lockstep := 0
	for rank := range c.world {
		o := c.opts
		o.WorldSize, o.Rank = c.world, rank
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return err
		}
		k := c.r.IntN(6)
		if c.opts.EqualBatches {
			// Ranks in lockstep, as data-parallel ranks are: a state
			// counts the batches its step leaves, the same on every rank.
			if rank == 0 {
				lockstep = k
			}
			k = lockstep
		}
		_, err = c.consume(ctx, ds, k, once)
		states = append(states, ds.StateDict())
		ds.Close()
		if err != nil {
			return fmt.Errorf("rank %d of %d: %w", rank, c.world, err)
		}
	}
	merged, err := checkpoint.Merge(states...)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if merged.Epoch > c.opts.Epoch {
		// Every rank finished the epoch before the save: nothing is left.
		if c.opts.EqualBatches {
			return equalBatches(once, c.want(c.data), nil)
		}
		return once.Exactly(c.want(c.data))
	}
	resumed := make([]int, c.world2)
	for rank := range c.world2 {
		o := c.opts
		o.WorldSize, o.Rank, o.BatchSize = c.world2, rank, c.batch2
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return err
		}
		if err := ds.LoadStateDict(merged); err != nil {
			ds.Close()
			return fmt.Errorf("resume on rank %d of %d: %w", rank, c.world2, err)
		}
		resumed[rank], err = c.consume(ctx, ds, -1, once)
		ds.Close()
		if err != nil {
			return fmt.Errorf("resumed rank %d of %d: %w", rank, c.world2, err)
		}
	}
	if c.opts.EqualBatches {
		return equalBatches(once, c.want(c.data), resumed)
	}
	return once.Exactly(c.want(c.data))
}

// runTake asks for random positions (repeats included) and checks the
// rows against the epoch's order as Batches gives it at world size 1.
func (c *Case) runTake(ctx context.Context) error {
	ds, err := stream.Open(ctx, c.opts)
	if err != nil {
		return err
	}
	defer ds.Close()
	var order []int64
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return err
		}
		ids, err := vc.Batch(b, c.columns())
		if err != nil {
			return err
		}
		order = append(order, ids...)
	}
	if want := c.want(c.data); len(order) != len(want) {
		return fmt.Errorf("the epoch gave %d rows, want %d", len(order), len(want))
	}
	if len(order) == 0 {
		b, err := ds.Take(ctx, c.opts.Epoch, nil)
		if err != nil {
			return fmt.Errorf("take of no positions: %w", err)
		}
		defer b.Release()
		if b.NumRows() != 0 {
			return fmt.Errorf("take of no positions gave %d rows", b.NumRows())
		}
		return nil
	}
	for range 3 {
		pos := make([]int64, 1+c.r.IntN(300))
		for i := range pos {
			pos[i] = int64(c.r.IntN(len(order)))
		}
		b, err := ds.Take(ctx, c.opts.Epoch, pos)
		if err != nil {
			return fmt.Errorf("take: %w", err)
		}
		ids, err := vc.Batch(b, c.columns())
		b.Release()
		if err != nil {
			return fmt.Errorf("take: %w", err)
		}
		for i, p := range pos {
			if ids[i] != order[p] {
				return fmt.Errorf("take: position %d gave id %d, the epoch has %d there", p, ids[i], order[p])
			}
		}
	}
	return nil
}

// runMix mixes the dataset with one of other ids, and checks every value,
// and, with NoRepeat, that no row comes twice in the epoch.
func (c *Case) runMix(ctx context.Context) error {
	o2 := c.opts
	o2.URLs, o2.Plan, o2.Formats = c.other.URLs, c.other.Plan, c.other.Formats
	o2.Seed++
	once := vc.NewOnce()
	for rank := range c.world {
		var srcs []stream.MixSource
		closeAll := func() {
			for _, s := range srcs {
				s.Dataset.Close()
			}
		}
		for k, o := range []stream.Options{c.opts, o2} {
			ds, err := stream.Open(ctx, o)
			if err != nil {
				closeAll()
				return err
			}
			srcs = append(srcs, stream.MixSource{Dataset: ds, Weight: []float64{0.6, 0.4}[k]})
		}
		m, err := stream.Mix(srcs, stream.MixOptions{Seed: c.opts.Seed + 3, NoRepeat: c.mixNoRe, BatchSize: c.opts.BatchSize, StartEpoch: c.opts.Epoch, Rank: rank, WorldSize: c.world})
		if err != nil {
			closeAll()
			return err
		}
		for b, err := range m.Batches(ctx) {
			if err != nil {
				closeAll()
				return fmt.Errorf("mix rank %d: %w", rank, err)
			}
			ids, err := vc.Batch(b, c.columns())
			if err != nil {
				closeAll()
				return fmt.Errorf("mix rank %d: %w", rank, err)
			}
			once.Add(ids)
		}
		closeAll()
	}
	if c.mixNoRe && once.Max() > 1 {
		return fmt.Errorf("NoRepeat mix delivered a row %d times", once.Max())
	}
	if once.Len() == 0 {
		return errors.New("the mix delivered no rows")
	}
	return nil
}

func (c *Case) runSplit(ctx context.Context) error {
	once := vc.NewOnce()
	for rank := range c.world {
		o := c.opts
		o.WorldSize, o.Rank = c.world, rank
		ds, err := stream.Open(ctx, o)
		if err != nil {
			return err
		}
		parts, err := ds.Consumers(c.split)
		if err != nil {
			ds.Close()
			return err
		}
		for i, p := range parts {
			_, err = c.consume(ctx, p, -1, once)
			p.Close()
			if err != nil {
				ds.Close()
				return fmt.Errorf("rank %d consumer %d: %w", rank, i, err)
			}
		}
		ds.Close()
	}
	return once.Exactly(c.want(c.data))
}

// whole opens the case's dataset at world size 1, hands it to read, which
// checks values and counts ids into once, and checks every wanted row came
// once: the modes that read one epoch through an output of the stream.
func (c *Case) whole(ctx context.Context, read func(ds *stream.Dataset, once *vc.Once) error) error {
	ds, err := stream.Open(ctx, c.opts)
	if err != nil {
		return err
	}
	defer ds.Close()
	once := vc.NewOnce()
	if err := read(ds, once); err != nil {
		return err
	}
	return once.Exactly(c.want(c.data))
}

func (c *Case) runMap(ctx context.Context) error {
	return c.whole(ctx, func(ds *stream.Dataset, once *vc.Once) error {
		for ids, err := range stream.Map(ctx, ds, func(_ context.Context, b arrow.RecordBatch) ([]int64, error) {
			return vc.Batch(b, c.columns())
		}) {
			if err != nil {
				return err
			}
			once.Add(ids)
		}
		return nil
	})
}

func (c *Case) runRows(ctx context.Context) error {
	return c.whole(ctx, func(ds *stream.Dataset, once *vc.Once) error {
		for rows, err := range typed.Rows(ctx, ds) {
			if err != nil {
				return err
			}
			for _, row := range rows {
				id := row["id"].(int64)
				for name, v := range row {
					if err := vc.GoValue(name, id, v); err != nil {
						return err
					}
				}
				once.Add([]int64{id})
			}
		}
		return nil
	})
}

func (c *Case) runMatrices(ctx context.Context) error {
	return c.whole(ctx, func(ds *stream.Dataset, once *vc.Once) error {
		for m, err := range typed.Matrices(ctx, ds, c.columns()) {
			if err != nil {
				return err
			}
			idCol := slices.Index(m.Columns, "id")
			for r := range m.Rows {
				row := m.Row(r)
				id := int64(row[idCol])
				for j, name := range m.Columns {
					if err := vc.GoValue(name, id, row[j]); err != nil {
						return err
					}
				}
				once.Add([]int64{id})
			}
		}
		return nil
	})
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }
