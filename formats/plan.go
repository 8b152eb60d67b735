package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
)

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
	if err := f.inspectLate(ctx); err != nil {
		return err
	}
	return guard(f.URL, fmt.Sprintf("unit %d", unit), func() error { return pf.FindPages(ctx, f, unit) })
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
	// Known, if set, gives what an earlier plan found of a file (see
	// KnownFile): the file is then not inspected at plan time, and its
	// driver parses its footer (from Cache, where it holds it) when the
	// file is first read, checking that it says what Known said (else
	// reads of it fail with ErrNotAsKnown). It is asked of every file a
	// listing found, and answers false for a file it does not know as
	// listed (another size, modification time or ETag). Ignored for
	// formats that settle their files together (text). Default: none.
	Known func(f *Fragment) (KnownFile, bool)
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
	reuse    reuse // what batches to compact are decoded into
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
	columns := func(f *Fragment) []string {
		if f.fileCols != nil {
			return f.fileColumns(inspected)
		}
		return inspected
	}
	known, late := lateFragments(frags, opts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, f := range frags {
		if late[f] != nil {
			continue
		}
		g.Go(func() error {
			err := guard(f.URL, inspectedPart(f.format), func() error { return f.format.Inspect(gctx, f, columns(f)) })
			if k, ok := known[f]; ok && err == nil {
				err = k.matches(f.URL, f.Units, f.Rows)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for f, of := range late {
		k := known[f]
		f.Units, f.Rows, f.Schema = slices.Clone(k.Units), k.Rows, of.Schema
		f.late = &lateInspect{columns: columns(f), known: k}
	}
	if err := settle(ctx, opts.Formats, frags); err != nil {
		return nil, err
	}
	for _, f := range frags {
		filtered := opts.Filter != nil || f.filter != nil
		if k, ok := known[f]; ok && late[f] != nil {
			f.inspected = KnownFile{Units: k.Units, Rows: k.Rows}
		} else {
			f.inspected = KnownFile{Units: unitsCopy(f.Units, filtered || f.Mask != nil), Rows: f.Rows}
		}
		if err := f.planUnits(filtered); err != nil {
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

// Close releases the buckets the plan opened.
func (d *Scan) Close() error {
	d.reuse.drop()
	return d.resolver.Close()
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

// inspectedPart names, in an error, the part of a file that planning
// reads: the footer of Parquet and ORC, the header of Avro, the first
// bytes a text format sniffs; "metadata" for a driver outside the module.
func inspectedPart(f Format) string {
	switch f.Name() {
	case "parquet", "orc":
		return "footer"
	case "avro":
		return "header"
	case "csv", "tsv", "json", "jsonl":
		return "head"
	}
	return "metadata"
}
