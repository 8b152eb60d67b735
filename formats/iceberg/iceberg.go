// Package iceberg opens Apache Iceberg tables as sluice datasets: a table
// is planned once, at Open, with iceberg-go's scan planning (snapshot,
// manifests, partition pruning, which delete files apply to which data
// file), and its data files are then read by sluice's own drivers
// (formats/parquet, formats/orc, formats/avro), split below the file as
// any other file.
//
// Deletes keep sluice's promises: position deletes and deletion vectors
// become a row mask per data file at Open, so row counts stay exact and
// splits balanced; equality deletes are applied while reading, as a filter
// of each data file, so those files' counts become unknown.
//
// The package is its own so that only programs that read tables link
// iceberg-go and what it needs.
package iceberg

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/storage"
)

// ErrSnapshot is wrapped when the snapshot asked for is not in the table.
var ErrSnapshot = errors.New("iceberg: no such snapshot")

// Options configure Open and OpenCatalog. At most one of SnapshotID, Ref
// and AsOf may be set; with none, the table's current snapshot is read.
type Options struct {
	// SnapshotID pins the snapshot by id. Default 0: not pinned by id.
	SnapshotID int64
	// Ref pins the snapshot a tag or branch names. Default "": none.
	Ref string
	// AsOf pins the snapshot that was current at that time (the last one
	// committed at or before it). Default zero: none.
	AsOf time.Time
	// Rewrite maps location prefixes the table's metadata holds onto URLs
	// sluice's storage opens, such as {"hdfs://nn/warehouse/":
	// "s3://bucket/warehouse/"} or {"/test-warehouse/": "file:///data/"};
	// the longest matching prefix applies. Default: none, locations as
	// written (s3a:// and s3n:// read as s3://).
	Rewrite map[string]string
	// Storage configures how the table's files are opened at Open
	// (metadata, manifests, delete files); a stream's planning passes its
	// own for the data files. Default: storage's defaults.
	Storage storage.Options
	// Cache, if set, keeps the table's plan (files, masks from position
	// deletes) keyed by metadata location and snapshot, so that a
	// restarted job does not read manifests and delete files again.
	// Default: none. pebblestore.Store.KV gives one in the job's
	// checkpoint database.
	Cache formats.Cache
	// Formats read the data files and delete files, by name ("parquet",
	// "orc", "avro"): a file is read by the first driver of that name
	// here, and a format none of them names by sluice's built-in driver
	// of it (formats/drivers), so that every file the table declares is
	// read whatever is passed. Default: the built-in Parquet, ORC and
	// Avro drivers.
	Formats []formats.Format
	// Concurrency bounds the files (manifests, delete files) read at once
	// at Open. Default 16.
	Concurrency int
}

// Table is a table pinned at one snapshot and planned: the data files, the
// masks of their position deletes and the equality deletes that apply to
// them. It is safe for concurrent use.
type Table struct {
	meta      table.Metadata
	metaLoc   string
	snap      *table.Snapshot
	schema    *ice.Schema
	arrow     *arrow.Schema
	loc       locator
	opts      Options
	plan      *tablePlan
	eq        []*eqSet // by plan.EqDeletes index
	res       *storage.Resolver
	fromCache bool
	planned   time.Duration
	eqFields  []string // dataset columns equality deletes read
	tableLoc  string
	names     ice.NameMapping // the table's name mapping, parsed once
	defaults  map[string]scalar.Scalar
	// nestedDefaults are the initial defaults of nested fields, by id;
	// arrowByID the table's Arrow fields at every depth, by id.
	nestedDefaults map[int]scalar.Scalar
	arrowByID      map[int]arrow.Field
}

// Open opens the table whose metadata lies at location: a metadata JSON
// file (…/metadata/v3.metadata.json), or a table folder or its metadata
// folder holding version-hint.text, whose version is read.
func Open(ctx context.Context, location string, opts Options) (*Table, error) {
	res := storage.NewResolver(opts.Storage)
	fio := &fileIO{ctx: ctx, res: res, loc: newLocator(opts.Rewrite)}
	metaLoc, err := metadataLocation(fio, location)
	if err != nil {
		res.Close()
		return nil, err
	}
	tbl, err := table.NewFromLocation(ctx, table.Identifier{path.Base(strings.TrimSuffix(location, "/"))}, metaLoc, func(context.Context) (iceio.IO, error) { return fio, nil }, nil)
	if err != nil {
		res.Close()
		return nil, fmt.Errorf("iceberg: table metadata %s: %w", metaLoc, err)
	}
	return open(ctx, tbl.Metadata(), metaLoc, res, opts)
}

// OpenCatalog opens a table through an iceberg-go catalog: the catalog
// names the current metadata; sluice reads it and everything below it
// with its own storage. Tested with iceberg-go's SQL (SQLite,
// PostgreSQL), REST and Hadoop catalogs; Hive and Glue ones are taken
// too, but nothing here tests them (they need a metastore or AWS).
func OpenCatalog(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options) (*Table, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg: load table %s: %w", strings.Join(ident, "."), err)
	}
	return open(ctx, tbl.Metadata(), tbl.MetadataLocation(), storage.NewResolver(opts.Storage), opts)
}

// metadataLocation finds the metadata file a location names.
func metadataLocation(fio *fileIO, location string) (string, error) {
	if strings.HasSuffix(location, ".metadata.json") || strings.HasSuffix(location, ".metadata.json.gz") {
		return location, nil
	}
	dir := strings.TrimSuffix(location, "/")
	var tried []string
	for _, d := range []string{dir + "/metadata", dir} {
		for _, hint := range []string{"version-hint.text", "version-hint.txt"} {
			b, err := fio.ReadFile(d + "/" + hint)
			tried = append(tried, d+"/"+hint)
			if err != nil {
				continue
			}
			v := strings.TrimSpace(string(b))
			if v == "" {
				return "", fmt.Errorf("iceberg: %s/%s is empty", d, hint)
			}
			if strings.HasSuffix(v, ".metadata.json") {
				return d + "/" + path.Base(v), nil
			}
			if _, err := strconv.ParseUint(v, 10, 63); err != nil {
				return d + "/" + path.Base(v) + ".metadata.json", nil // a name without its suffix
			}
			return d + "/v" + v + ".metadata.json", nil
		}
	}
	// No hint: the highest numbered metadata file (vN.metadata.json or
	// NNNNN-uuid.metadata.json).
	srcs, err := fio.res.Resolve(fio.ctx, fio.loc.url(dir+"/metadata/"), func(key string) bool { return strings.HasSuffix(key, ".metadata.json") })
	if err == nil {
		best, bestV := "", int64(-1)
		for _, s := range srcs {
			name := path.Base(s.Object.Key)
			num := strings.TrimPrefix(name, "v")
			if i := strings.IndexAny(num, "-."); i > 0 {
				num = num[:i]
			}
			v, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				continue
			}
			if v > bestV {
				best, bestV = name, v
			}
		}
		if best != "" {
			return dir + "/metadata/" + best, nil
		}
	}
	return "", fmt.Errorf("iceberg: %s is not a metadata file and holds no version hint or numbered metadata file (tried %s)", location, strings.Join(tried, ", "))
}

func open(ctx context.Context, meta table.Metadata, metaLoc string, res *storage.Resolver, opts Options) (_ *Table, err error) {
	defer func() {
		if err != nil {
			res.Close()
		}
	}()
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	if len(opts.Formats) == 0 {
		opts.Formats = []formats.Format{builtinDriver("parquet"), builtinDriver("orc"), builtinDriver("avro")}
	}
	t := &Table{meta: meta, metaLoc: metaLoc, loc: newLocator(opts.Rewrite), opts: opts, res: res, schema: meta.CurrentSchema(), tableLoc: strings.TrimSuffix(meta.Location(), "/") + "/"}
	// Files written without field ids are read through the table's name
	// mapping; without one, by the current schema's names.
	if t.names = meta.NameMapping(); len(t.names) == 0 {
		t.names = t.schema.NameMapping()
	}
	if t.snap, err = pick(meta, opts); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", metaLoc, err)
	}
	if t.arrow, err = table.SchemaToArrowSchema(t.schema, nil, true, false); err != nil {
		return nil, fmt.Errorf("iceberg: %s: schema: %w", metaLoc, err)
	}
	if t.defaults, err = initialDefaults(t.schema, t.arrow); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", metaLoc, err)
	}
	t.arrowByID = map[int]arrow.Field{}
	arrowByID(t.arrow.Fields(), t.arrowByID)
	if t.nestedDefaults, err = nestedDefaults(t.schema, t.arrowByID); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", metaLoc, err)
	}
	start := time.Now()
	if t.snap == nil {
		// A table created and never written: empty, with its schema.
		t.plan = &tablePlan{}
		return t, nil
	}
	fio := &fileIO{ctx: ctx, res: res, loc: t.loc}
	if t.plan, t.fromCache, err = t.loadPlan(ctx, fio); err != nil {
		return nil, err
	}
	if t.fromCache {
		// Planning reads the equality deletes beside the position
		// deletes; a cached plan holds no keys, so they are read here.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(t.opts.Concurrency)
		if err := t.loadEqualityDeletes(gctx, g, t.plan.EqDeletes); err != nil {
			return nil, err
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	t.planned = time.Since(start)
	return t, nil
}

// pick finds the snapshot the options pin.
func pick(meta table.Metadata, opts Options) (*table.Snapshot, error) {
	set := 0
	for _, b := range []bool{opts.SnapshotID != 0, opts.Ref != "", !opts.AsOf.IsZero()} {
		if b {
			set++
		}
	}
	if set > 1 {
		return nil, errors.New("at most one of SnapshotID, Ref and AsOf may be set")
	}
	var s *table.Snapshot
	switch {
	case opts.SnapshotID != 0:
		if s = meta.SnapshotByID(opts.SnapshotID); s == nil {
			return nil, fmt.Errorf("%w: snapshot id %d (the table has %s)", ErrSnapshot, opts.SnapshotID, snapshotIDs(meta))
		}
	case opts.Ref != "":
		if s = meta.SnapshotByName(opts.Ref); s == nil {
			return nil, fmt.Errorf("%w: no tag or branch %q", ErrSnapshot, opts.Ref)
		}
	case !opts.AsOf.IsZero():
		ms := opts.AsOf.UnixMilli()
		logged := false
		for e := range meta.SnapshotLogs() {
			logged = true
			if e.TimestampMs <= ms {
				s = meta.SnapshotByID(e.SnapshotID)
			}
		}
		if !logged {
			// No snapshot log: the newest snapshot committed by then.
			for _, c := range meta.Snapshots() {
				if c.TimestampMs <= ms && (s == nil || c.TimestampMs > s.TimestampMs) {
					s = &c
				}
			}
		}
		if s == nil {
			return nil, fmt.Errorf("%w: none was current at %s", ErrSnapshot, opts.AsOf.UTC().Format(time.RFC3339Nano))
		}
	default:
		s = meta.CurrentSnapshot() // nil where the table has none: empty
	}
	return s, nil
}

func snapshotIDs(meta table.Metadata) string {
	var ids []string
	for _, s := range meta.Snapshots() {
		ids = append(ids, strconv.FormatInt(s.SnapshotID, 10))
	}
	if len(ids) == 0 {
		return "no snapshot"
	}
	return "snapshots " + strings.Join(ids, ", ")
}

// HasSnapshot reports whether the table has a snapshot to be pinned at: a
// table created and never written has none, and is an empty dataset.
func (t *Table) HasSnapshot() bool { return t.snap != nil }

// SnapshotID is the snapshot the table is pinned at, 0 if it has none.
func (t *Table) SnapshotID() int64 {
	if t.snap == nil {
		return 0
	}
	return t.snap.SnapshotID
}

// Snapshot is the snapshot the table is pinned at, the zero Snapshot if it
// has none.
func (t *Table) Snapshot() table.Snapshot {
	if t.snap == nil {
		return table.Snapshot{}
	}
	return *t.snap
}

// MetadataLocation is the metadata file the table was read from.
func (t *Table) MetadataLocation() string { return t.metaLoc }

// Schema is the table's current schema, in Arrow: every column a stream
// can select, by its current name.
func (t *Table) Schema() *arrow.Schema { return t.arrow }

// Version names the snapshot in plan fingerprints and errors.
func (t *Table) Version() string {
	if t.snap == nil {
		return "iceberg table without a snapshot"
	}
	return "iceberg snapshot " + strconv.FormatInt(t.snap.SnapshotID, 10)
}

// Close releases the buckets Open opened.
func (t *Table) Close() error { return t.res.Close() }

// Plan plans the table's data files as a dataset: the hook a stream
// plans with (stream.Options.Plan). po's columns, storage, cache and
// filter apply; its formats, if any, read the data files by name. A table
// without a snapshot or data files, or whose files the filter rules out,
// is an empty dataset with the table's schema.
func (t *Table) Plan(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error) {
	fmts := po.Formats
	if len(fmts) == 0 {
		fmts = t.opts.Formats
	}
	planned := t.plan.Files
	if po.Filter != nil {
		// Files whose bounds or partition rule the filter out are never
		// opened; the filter still applies to the rows of the others.
		var kept []plannedFile
		for _, i := range t.prune(po.Filter, planned) {
			kept = append(kept, planned[i])
		}
		planned = kept
	}
	files := make([]formats.File, len(planned))
	inspect := t.fileNames(po.Columns)
	for i, pf := range planned {
		drv, err := t.driver(pf.Format, fmts)
		if err != nil {
			return nil, fmt.Errorf("iceberg: %s: %s: %w", t.metaLoc, pf.Path, err)
		}
		p := &fileProjection{t: t}
		if p.defaults, p.consts, err = t.fileDefaults(&planned[i]); err != nil {
			return nil, fmt.Errorf("iceberg: %s, %s: %w", t.metaLoc, t.Version(), err)
		}
		files[i] = formats.File{
			URL:      t.loc.url(pf.Path),
			Rel:      strings.TrimPrefix(pf.Path, t.tableLoc),
			Format:   drv,
			Inspect:  inspect,
			Columns:  p.columns,
			Convert:  p.convert,
			Defaults: p.defaults,
		}
		if len(pf.Deleted) > 0 {
			files[i].Mask = &formats.RowMask{Deleted: pf.Deleted}
		}
		if len(pf.EqDeletes) > 0 {
			files[i].Filter = t.eqFilter(pf.EqDeletes)
		}
	}
	po.Formats = fmts
	po.Schema = t.arrow
	if po.Columns != nil {
		for _, c := range po.Columns {
			if len(t.arrow.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("iceberg: %w: column %q is not in the table's schema (it has %s)", formats.ErrSchema, c, strings.Join(t.columnNames(), ", "))
			}
		}
	}
	known := t.knownObjects(ctx)
	for i, pf := range planned {
		files[i].Object = known[pf.Path]
	}
	d, err := formats.PlanFiles(ctx, files, po)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s, %s: %w", t.metaLoc, t.Version(), err)
	}
	if known == nil && len(planned) == len(t.plan.Files) {
		t.keepObjects(ctx, d)
	}
	d.Version = t.Version()
	return d, nil
}

// knownObjects are the data files as the store described them when the
// snapshot was last planned with this plan cache (kept by keepObjects),
// by path, or nil. Manifests record file sizes too, but not every
// writer's are right, and a wrong one would fail the footer's read.
func (t *Table) knownObjects(ctx context.Context) map[string]storage.Object {
	c := t.opts.Cache
	if c == nil {
		return nil
	}
	b, err := c.Get(ctx, t.objectsKey())
	if err != nil || len(b) == 0 {
		return nil
	}
	var objs map[string]storage.Object
	if gob.NewDecoder(bytes.NewReader(b)).Decode(&objs) != nil {
		return nil
	}
	for _, pf := range t.plan.Files {
		if objs[pf.Path].Size <= 0 {
			return nil // not this plan's, or damaged: the store is asked
		}
	}
	return objs
}

// keepObjects keeps what the store said of the data files while d was
// planned, so that the next plan from the cache need not ask again.
func (t *Table) keepObjects(ctx context.Context, d *formats.Scan) {
	c := t.opts.Cache
	if c == nil || len(d.Fragments) != len(t.plan.Files) {
		return
	}
	objs := make(map[string]storage.Object, len(d.Fragments))
	for i, f := range d.Fragments {
		o := f.Source.Object
		o.Key = "" // the plan's paths name the files
		objs[t.plan.Files[i].Path] = o
	}
	var buf bytes.Buffer
	if gob.NewEncoder(&buf).Encode(objs) == nil {
		_ = c.Set(ctx, t.objectsKey(), buf.Bytes()) // a failed set costs the next plan a stat per file
	}
}

func (t *Table) objectsKey() []byte {
	return append(t.cacheKey(), "\x00objects"...)
}

func (t *Table) columnNames() []string {
	var out []string
	for _, f := range t.arrow.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// fileNames are the names the selected columns (and those equality
// deletes read) have had in any schema of the table or the name mapping
// gives them: what planning inspects of a data file, whichever schema
// wrote it.
func (t *Table) fileNames(columns []string) []string {
	if columns == nil {
		return nil
	}
	ids := map[int]bool{}
	for _, c := range append(slices.Clone(columns), t.eqFields...) {
		if f, ok := t.schema.FindFieldByName(c); ok {
			ids[f.ID] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range t.meta.Schemas() {
		for _, f := range s.Fields() {
			if ids[f.ID] && !seen[f.Name] {
				seen[f.Name] = true
				out = append(out, f.Name)
			}
		}
	}
	for _, mf := range t.names {
		if ids[mf.ID()] {
			for _, n := range mf.Names {
				if !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// fieldIDKey is the Arrow field metadata key Parquet field ids come under.
const fieldIDKey = "PARQUET:field_id"

// mapByID maps the current schema's top-level columns onto a data file's
// by field id; a file written without ids, by the names the name mapping
// nm gives each id. A column the map lacks is not in the file.
func mapByID(schema *ice.Schema, nm ice.NameMapping, file *arrow.Schema) (map[string]string, error) {
	byID := map[int]string{}
	for _, f := range file.Fields() {
		v, ok := f.Metadata.GetValue(fieldIDKey)
		if !ok {
			continue
		}
		id, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("column %q has field id %q", f.Name, v)
		}
		if id < 0 {
			continue // arrow-go's mark for no id
		}
		if _, dup := byID[id]; dup {
			return nil, fmt.Errorf("field id %d is on two columns", id)
		}
		byID[id] = f.Name
	}
	if len(byID) == 0 {
		// Written without ids (a migrated Hive table): the name mapping,
		// which lists each field's names.
		names := map[string]bool{}
		for _, f := range file.Fields() {
			names[f.Name] = true
		}
		for _, mf := range nm {
			if mf.FieldID == nil {
				continue
			}
			for _, n := range mf.Names {
				if names[n] {
					byID[*mf.FieldID] = n
					break
				}
			}
		}
	}
	out := map[string]string{}
	for _, f := range schema.Fields() {
		if n, ok := byID[f.ID]; ok {
			out[f.Name] = n
		}
	}
	return out, nil
}

// Metadata is the table's metadata as read.
func (t *Table) Metadata() table.Metadata { return t.meta }

// Stats is what planning the snapshot found, for inspection.
type Stats struct {
	// DataFiles, PositionDeleteFiles, DeletionVectors and
	// EqualityDeleteFiles count the snapshot's files that apply.
	DataFiles, PositionDeleteFiles, DeletionVectors, EqualityDeleteFiles int
	// Records is the data files' rows before deletes; PositionDeleted the
	// rows position deletes and deletion vectors remove. Equality deletes
	// are counted only by reading.
	Records, PositionDeleted int64
	// FilesWithEqualityDeletes have rows counts unknown until read.
	FilesWithEqualityDeletes int
	// FromCache is set when the plan came from the plan cache; Planning
	// is how long Open took to plan (manifests, delete files).
	FromCache bool
	Planning  time.Duration
}

// Stats says what planning the snapshot found.
func (t *Table) Stats() Stats {
	s := Stats{
		DataFiles:           len(t.plan.Files),
		PositionDeleteFiles: t.plan.PosDeleteFiles,
		DeletionVectors:     t.plan.DeletionVectors,
		EqualityDeleteFiles: len(t.plan.EqDeletes),
		Records:             t.plan.Records,
		FromCache:           t.fromCache,
		Planning:            t.planned,
	}
	for _, f := range t.plan.Files {
		s.PositionDeleted += int64(len(f.Deleted))
		if len(f.EqDeletes) > 0 {
			s.FilesWithEqualityDeletes++
		}
	}
	return s
}
