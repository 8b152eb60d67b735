package iceberg

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/internal/unzeroed"
)

// tablePlan is what planning a snapshot learns: the plan cache's value.
type tablePlan struct {
	Files     []plannedFile
	EqDeletes []eqDeleteFile
	// PosDeleteFiles and DeletionVectors count the delete files read for
	// the masks; Records counts the data files' rows before deletes.
	PosDeleteFiles, DeletionVectors int
	Records                         int64
}

// plannedFile is one data file of the snapshot.
type plannedFile struct {
	Path    string // as the metadata holds it
	Format  string // "parquet", "orc", "avro"
	Size    int64
	Records int64
	// Deleted are the rows position deletes and deletion vectors remove,
	// ascending, each once.
	Deleted []int64
	// EqDeletes index tablePlan.EqDeletes: the equality deletes that apply.
	EqDeletes []int
	// SpecID, Partition and Stats are the file's partition and column
	// statistics, for pruning by a row filter.
	SpecID    int32
	Partition []partValue
	Stats     []colStats
}

// eqDeleteFile is one equality delete file.
type eqDeleteFile struct {
	Path     string
	Format   string
	Records  int64
	FieldIDs []int
}

// planVersion changes when tablePlan's encoding or meaning does, so that
// old cache entries miss (3: position deletes match data files by URL; 4:
// partition values not understood are kept, as such).
const planVersion = "sluice-iceberg-plan-4"

// cacheKey names the plan: the rewrite is part of it, since position
// deletes match data files by where the rewrite puts them.
func (t *Table) cacheKey() []byte {
	k := fmt.Appendf(nil, "%s\x00%s\x00%d", planVersion, t.metaLoc, t.SnapshotID())
	for i, from := range t.loc.from {
		k = fmt.Appendf(k, "\x00%s\x00%s", from, t.loc.to[i])
	}
	return k
}

// loadPlan plans the snapshot, or takes its plan from the cache.
func (t *Table) loadPlan(ctx context.Context, fio *fileIO) (*tablePlan, bool, error) {
	if c := t.opts.Cache; c != nil {
		if b, err := c.Get(ctx, t.cacheKey()); err == nil && len(b) > 0 {
			var p tablePlan
			if gob.NewDecoder(bytes.NewReader(b)).Decode(&p) == nil && p.check() == nil {
				return &p, true, nil
			}
		}
	}
	p, err := t.planSnapshot(ctx, fio)
	if err != nil {
		return nil, false, err
	}
	if c := t.opts.Cache; c != nil {
		var buf bytes.Buffer
		if gob.NewEncoder(&buf).Encode(p) == nil {
			_ = c.Set(ctx, t.cacheKey(), buf.Bytes()) // a failed set only costs the next run a plan
		}
	}
	return p, false, nil
}

// check refuses a cached plan that does not hold together.
func (p *tablePlan) check() error {
	for _, f := range p.Files {
		if !slices.IsSorted(f.Deleted) {
			return fmt.Errorf("mask of %s is not sorted", f.Path)
		}
		for _, e := range f.EqDeletes {
			if e < 0 || e >= len(p.EqDeletes) {
				return fmt.Errorf("equality delete %d of %s is out of range", e, f.Path)
			}
		}
	}
	return nil
}

// planSnapshot runs iceberg-go's scan planning and reads the position
// deletes and deletion vectors into masks.
func (t *Table) planSnapshot(ctx context.Context, fio *fileIO) (*tablePlan, error) {
	fio, err := t.plannerIO(fio)
	if err != nil {
		return nil, err
	}
	tbl := table.New(table.Identifier{"sluice"}, t.meta, t.metaLoc, func(context.Context) (iceio.IO, error) { return fio, nil }, nil)
	scan := tbl.Scan(table.WithSnapshotID(t.snap.SnapshotID), table.WithMaxConcurrency(t.opts.Concurrency))
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: plan %s, %s: %w", t.metaLoc, t.Version(), err)
	}
	p := &tablePlan{}
	eqIndex := map[string]int{}
	posFiles := map[string]ice.DataFile{}
	for _, task := range tasks {
		df := task.File
		pf := plannedFile{Path: df.FilePath(), Format: strings.ToLower(string(df.FileFormat())), Size: df.FileSizeBytes(), Records: df.Count(), SpecID: df.SpecID()}
		pf.Stats, pf.Partition = fileMetrics(df, t.meta.PartitionSpecByID(int(df.SpecID())), t.schema)
		for _, e := range task.EqualityDeleteFiles {
			i, ok := eqIndex[e.FilePath()]
			if !ok {
				i = len(p.EqDeletes)
				eqIndex[e.FilePath()] = i
				p.EqDeletes = append(p.EqDeletes, eqDeleteFile{Path: e.FilePath(), Format: strings.ToLower(string(e.FileFormat())), Records: e.Count(), FieldIDs: e.EqualityFieldIDs()})
			}
			pf.EqDeletes = append(pf.EqDeletes, i)
		}
		slices.Sort(pf.EqDeletes)
		for _, d := range task.DeleteFiles {
			posFiles[d.FilePath()] = d
		}
		p.Records += pf.Records
		p.Files = append(p.Files, pf)
	}
	p.PosDeleteFiles = len(posFiles)
	// The delete files of both kinds are read at once, within
	// Options.Concurrency: each is a small file whose read is mostly
	// waiting and decoding on one goroutine.
	reads, rctx := errgroup.WithContext(ctx)
	reads.SetLimit(t.opts.Concurrency)
	if err := t.loadEqualityDeletes(rctx, reads, p.EqDeletes); err != nil {
		return nil, err
	}
	positions, spellings := t.readPositionDeletes(rctx, reads, posFiles)
	if err := reads.Wait(); err != nil {
		return nil, err
	}
	if err := t.checkSpellings(p.Files, spellings); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.opts.Concurrency)
	for i, task := range tasks {
		pf := &p.Files[i]
		var del []int64
		for _, d := range task.DeleteFiles {
			del = append(del, positions[d.FilePath()][t.loc.url(pf.Path)]...)
		}
		pf.Deleted = del
		if len(task.DeletionVectorFiles) == 0 {
			continue
		}
		mu.Lock()
		p.DeletionVectors += len(task.DeletionVectorFiles)
		mu.Unlock()
		g.Go(func() error {
			bms, err := dv.ReadDVs(&fileIO{ctx: gctx, res: t.res, loc: t.loc}, task.DeletionVectorFiles)
			if err != nil {
				return fmt.Errorf("iceberg: deletion vector of %s: %w", pf.Path, err)
			}
			for _, bm := range bms {
				for pos := range bm.Positions() {
					pf.Deleted = append(pf.Deleted, int64(pos))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range p.Files {
		pf := &p.Files[i]
		slices.Sort(pf.Deleted)
		pf.Deleted = slices.Compact(pf.Deleted)
		// A delete may name rows past the file's end (a writer's bug):
		// they delete nothing.
		n, _ := slices.BinarySearch(pf.Deleted, pf.Records)
		pf.Deleted = slices.Clip(pf.Deleted[:n])
		if n := len(pf.Deleted); n > 0 && pf.Deleted[0] < 0 {
			return nil, fmt.Errorf("iceberg: %s: a position delete names row %d: %w", pf.Path, pf.Deleted[0], formats.ErrCorrupt)
		}
	}
	return p, nil
}

// readPositionDeletes reads position delete files (file_path, pos) with
// sluice's Parquet driver, on g: for each delete file, the rows it deletes
// by data file's URL (locator.url), and the URLs' spellings in the
// deletes, both filled once g is waited for.
func (t *Table) readPositionDeletes(gctx context.Context, g *errgroup.Group, files map[string]ice.DataFile) (map[string]map[string][]int64, map[string]string) {
	out, spellings := map[string]map[string][]int64{}, map[string]string{}
	var mu sync.Mutex
	for p, df := range files {
		g.Go(func() error {
			byFile, spelled := map[string][]int64{}, map[string]string{}
			var row int64 // of the delete file, from 0
			err := t.readAll(gctx, p, string(df.FileFormat()), []string{"file_path", "pos"}, func(b arrow.RecordBatch) error {
				paths, ok1 := b.Column(0).(*array.String)
				pos, ok2 := b.Column(1).(*array.Int64)
				if !ok1 || !ok2 {
					return fmt.Errorf("%w: position delete columns are %s and %s, not string and int64", formats.ErrSchema, b.Column(0).DataType(), b.Column(1).DataType())
				}
				// A delete file is sorted by file_path, so its rows come
				// in runs of one path: the path is resolved once a run,
				// and the run's positions appended at once.
				vals := pos.Int64Values()
				for i := 0; i < paths.Len(); {
					// Both are required by the spec. A delete that names
					// no file, or no row, cannot be applied, and skipping
					// it might bring back a row its writer deleted: it is
					// refused, as Iceberg's Java reader (Spark) and
					// iceberg-go refuse it (docs/formats.md).
					if paths.IsNull(i) {
						return fmt.Errorf("%w: row %d has a null file_path (pos %s), which the spec requires", formats.ErrCorrupt, row+int64(i), posText(pos, i))
					}
					raw := paths.Value(i)
					end := i + 1
					for end < paths.Len() && paths.IsValid(end) && paths.Value(end) == raw {
						end++
					}
					if pos.NullN() > 0 {
						for k := i; k < end; k++ {
							if pos.IsNull(k) {
								return fmt.Errorf("%w: row %d has a null pos (file_path %q), which the spec requires", formats.ErrCorrupt, row+int64(k), raw)
							}
						}
					}
					// By where the file lies: the data file's path as the
					// metadata spells it, and the delete's as the delete
					// writer did, may differ in a prefix Rewrite maps.
					u := t.loc.url(raw)
					if _, ok := spelled[u]; !ok {
						spelled[u] = raw
					}
					byFile[u] = append(byFile[u], vals[i:end]...)
					i = end
				}
				row += int64(paths.Len())
				return nil
			})
			if err != nil {
				return fmt.Errorf("iceberg: position delete file %s: %w", p, err)
			}
			mu.Lock()
			out[p] = byFile
			for u, raw := range spelled {
				spellings[u] = raw
			}
			mu.Unlock()
			return nil
		})
	}
	return out, spellings
}

// posText is row i of a position delete's pos column, as an error says it.
func posText(pos *array.Int64, i int) string {
	if pos.IsNull(i) {
		return "null"
	}
	return strconv.FormatInt(pos.Value(i), 10)
}

// checkSpellings refuses position deletes that name a data file of the
// snapshot by another scheme and authority than the metadata does
// (hdfs://nn:8020/warehouse/… for /warehouse/…, as Impala's tables may
// hold): such a delete would silently delete nothing. Options.Rewrite
// mapping both spellings onto the same place makes them one file.
// Deletes naming files the snapshot no longer holds, by any spelling,
// delete nothing, as the spec says.
func (t *Table) checkSpellings(files []plannedFile, spellings map[string]string) error {
	urls := make(map[string]bool, len(files))
	byPath := make(map[string]string, len(files))
	for _, f := range files {
		urls[t.loc.url(f.Path)] = true
		byPath[pathOnly(f.Path)] = f.Path
	}
	for u, raw := range spellings {
		if urls[u] {
			continue
		}
		if data, ok := byPath[pathOnly(raw)]; ok {
			return fmt.Errorf("iceberg: %s, %s: a position delete names data file %q, which the metadata spells %q: "+
				"map both prefixes onto the same place with Options.Rewrite (--rewrite from=to, once for each)", t.metaLoc, t.Version(), raw, data)
		}
	}
	return nil
}

// pathOnly is a location without its scheme and authority.
func pathOnly(location string) string {
	if i := strings.Index(location, "://"); i > 0 {
		rest := location[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return rest[j:]
		}
	}
	return strings.TrimPrefix(location, "file:")
}

// readAll reads columns of one file of the table (a delete file) whole.
func (t *Table) readAll(ctx context.Context, location, format string, columns []string, yield func(arrow.RecordBatch) error) error {
	return t.readFiles(ctx, []formats.File{{URL: t.loc.url(location)}}, format, formats.PlanOptions{Columns: columns}, yield)
}

func (t *Table) readFiles(ctx context.Context, files []formats.File, format string, po formats.PlanOptions, yield func(arrow.RecordBatch) error) error {
	drv, err := t.driver(format, nil)
	if err != nil {
		return err
	}
	for i := range files {
		files[i].Format = drv
	}
	po.Formats = []formats.Format{drv}
	po.Storage = t.opts.Storage
	po.Cache = t.opts.Cache
	d, err := formats.PlanFiles(ctx, files, po)
	if err != nil {
		return err
	}
	defer d.Close()
	// Each batch is read once and dropped: the decoder writes every byte
	// of its buffers, which the runtime need not zero first (a tenth of
	// reading a delete file went to zeroing).
	mem := unzeroed.Offer(memory.DefaultAllocator)
	for i, f := range d.Fragments {
		r := formats.Range{Start: -1, End: -1, FirstUnit: 0, EndUnit: len(f.Units)}
		err := d.Read(ctx, i, r, 65536, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			return yield(b)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// driver is the driver that reads a file of the table whose manifest
// entry declares format: the first of given, then of Options.Formats, by
// name, so that a caller's options for a format apply; else the built-in
// driver of that format. A table names the format of every file it holds,
// so which drivers a caller passed never decides whether a file is read.
func (t *Table) driver(format string, given []formats.Format) (formats.Format, error) {
	for _, fs := range [][]formats.Format{given, t.opts.Formats} {
		if f := formats.Named(fs, format); f != nil {
			return f, nil
		}
	}
	if f := builtinDriver(format); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("%w: the metadata declares a file of format %q: an Iceberg table's data and delete files are Parquet, ORC or Avro", formats.ErrCorrupt, format)
}

// builtinDriver is sluice's driver of an Iceberg file format, or nil.
func builtinDriver(format string) formats.Format {
	switch f := strings.ToLower(format); f {
	case "parquet", "orc", "avro":
		return drivers.Named(f)
	}
	return nil
}
