package formats

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
)

// File is one file of a dataset whose files a caller has listed itself,
// such as a table format's data files, for PlanFiles.
type File struct {
	// URL locates the file (anything storage resolves: a path, file://,
	// s3://, ...).
	URL string
	// Rel is the key the plan's fingerprint uses for the file. Default: URL.
	Rel string
	// Object, if its Size is positive, is what the store said of the file
	// in an earlier plan (Fragment.Source.Object), kept by the caller:
	// planning then does not ask the store again, which saves a request
	// per file. Default: the store is asked.
	Object storage.Object
	// Format reads the file. Default: the driver PlanOptions.Format
	// names, else the first of PlanOptions.Formats whose Match accepts the
	// URL, else the first.
	Format Format
	// Mask, if set, names rows of the file that are not part of the
	// dataset.
	Mask *RowMask
	// Filter, if set, drops the rows of this file it does not keep, after
	// the mask (a table's equality deletes). It reads dataset columns. The
	// file's row counts become unknown.
	Filter Filter
	// Inspect names the file's columns planning inspects (what Unit.Bytes
	// counts) when Columns maps names. Default (nil): every column.
	Inspect []string
	// Columns, if set, maps the dataset's columns onto the file's, once the
	// driver has read the file's schema: dataset name to file name. A
	// dataset column the map lacks reads as null from this file (a column
	// added after the file was written). Default (nil): the same names.
	Columns func(file *arrow.Schema) (map[string]string, error)
	// Convert, if set, is asked for each column whose type in the file
	// differs from the dataset's beyond what planning widens (a table's
	// nested fields renamed, added or promoted by field id since the file
	// was written), or, nested, in its fields' metadata (their ids), with
	// the file's field and the dataset's: it returns
	// what turns the column as the file holds it into the dataset's type
	// (exactly), or an error if it cannot. Default (nil): such a column is
	// a schema mismatch.
	Convert func(file, want arrow.Field) (Converter, error)
	// Defaults, if set, are the values dataset columns this file lacks
	// read as (a table's initial defaults of columns added after the file
	// was written), each of the column's type in PlanOptions.Schema. A
	// column it does not name reads as null. Default: none.
	Defaults map[string]scalar.Scalar
}

// Converter turns a column as a file holds it into the dataset's type,
// allocating from mem what it must.
type Converter func(a arrow.Array, mem memory.Allocator) (arrow.Array, error)

// evolution is a fragment's File.Convert and File.Defaults, and the
// converters planning found for its columns.
type evolution struct {
	convert  func(file, want arrow.Field) (Converter, error)
	defaults map[string]scalar.Scalar
	converts map[string]Converter // by dataset column
}

// PlanFiles plans a dataset from files a caller listed, each with its own
// mask, filter and column mapping, where Plan would list URLs. Every file
// is resolved and inspected concurrently; opts.Schema, if set, gives the
// dataset's columns (see PlanOptions.Schema). opts.Masks is not used: the
// files carry their masks. No files with opts.Schema is an empty dataset
// (a table with no data files); no files without it, an error wrapping
// ErrEmpty, as there are no columns to give.
func PlanFiles(ctx context.Context, files []File, opts PlanOptions) (_ *Scan, err error) {
	if len(files) == 0 && opts.Schema == nil {
		return nil, fmt.Errorf("formats: no files given: %w", ErrEmpty)
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.Schema != nil && opts.Filter != nil {
		for _, c := range opts.Filter.Columns() {
			if len(opts.Schema.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("formats: %w: the filter reads column %q, which the schema lacks", ErrSchema, c)
			}
		}
	}
	res := storage.NewResolver(opts.Storage)
	defer func() {
		if err != nil {
			res.Close()
		}
	}()
	frags := make([]*Fragment, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i, file := range files {
		g.Go(func() error {
			var s storage.Source
			if file.Object.Size > 0 {
				var err error
				if s, err = res.Known(gctx, file.URL, file.Object); err != nil {
					return fmt.Errorf("formats: %w", err)
				}
			} else {
				srcs, err := res.Resolve(gctx, file.URL, nil)
				if err != nil {
					return fmt.Errorf("formats: %w", err)
				}
				if len(srcs) != 1 {
					return fmt.Errorf("formats: %s names %d objects, not one file", file.URL, len(srcs))
				}
				s = srcs[0]
			}
			format := file.Format
			if format == nil {
				format = opts.driver(s.Object.Key)
			}
			rel := file.Rel
			if rel == "" {
				rel = file.URL
			}
			frags[i] = &Fragment{URL: s.URL, Rel: rel, Format: format.Name(), Size: s.Object.Size, Source: s, format: format, cache: opts.Cache, Mask: file.Mask, filter: file.Filter}
			if file.Columns != nil {
				frags[i].fileCols = map[string]string{} // filled once the schema is known
				frags[i].inspect = file.Inspect
				frags[i].mapColumns = file.Columns
			}
			if file.Convert != nil || file.Defaults != nil {
				frags[i].evolve = &evolution{convert: file.Convert, defaults: file.Defaults, converts: map[string]Converter{}}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return finish(ctx, res, frags, opts)
}

// fileColumns is what Inspect reads of a fragment whose columns are mapped.
func (f *Fragment) fileColumns(inspected []string) []string {
	if inspected == nil {
		return nil
	}
	return f.inspect
}

// mapped resolves a mapped fragment's columns once its schema is known.
func (f *Fragment) mapped() error {
	if f.mapColumns == nil {
		return nil
	}
	m, err := f.mapColumns(f.Schema)
	if err != nil {
		return fmt.Errorf("formats: %s: %w: %w", f.URL, ErrSchema, err)
	}
	for ds, fc := range m {
		if len(f.Schema.FieldIndices(fc)) == 0 {
			return fmt.Errorf("formats: %s: %w: column %q maps onto %q, which the file lacks", f.URL, ErrSchema, ds, fc)
		}
	}
	f.fileCols = m
	return nil
}

// unifyMapped is unify for PlanFiles with a dataset schema: each column
// takes the widest of the schema's type and the types of the files that
// hold it; a file lacking a column reads it as null.
func unifyMapped(frags []*Fragment, columns []string, schema *arrow.Schema) (*arrow.Schema, error) {
	if columns == nil {
		for _, f := range schema.Fields() {
			columns = append(columns, f.Name)
		}
	}
	for _, f := range frags {
		if err := f.mapped(); err != nil {
			return nil, err
		}
	}
	fields := make([]arrow.Field, len(columns))
	for i, name := range columns {
		idx := schema.FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("formats: %w: column %q is not in the dataset (it has %s)", ErrSchema, name, fieldNames(schema))
		}
		want := schema.Field(idx[0])
		var typ arrow.DataType
		from := ""
		nullable := want.Nullable
		for _, f := range frags {
			fc, ok := name, true
			if f.fileCols != nil {
				fc, ok = f.fileCols[name]
			}
			fi := f.Schema.FieldIndices(fc)
			if !ok || len(fi) == 0 {
				if f.fileCols == nil {
					return nil, fmt.Errorf("formats: %w: column %q is not in %s", ErrSchema, name, f.URL)
				}
				nullable = true
				continue
			}
			got := f.Schema.Field(fi[0])
			nullable = nullable || got.Nullable
			if e := f.evolve; e != nil && e.convert != nil && !arrow.TypeEqual(got.Type, want.Type, arrow.CheckMetadata()) {
				// Nested types alike but for their fields' metadata (a
				// table's field ids) are the converter's to match.
				if _, ok := widen(got.Type, want.Type); !ok || nested(got.Type) {
					conv, err := e.convert(got, want)
					if err != nil {
						return nil, fmt.Errorf("formats: %s: %w: column %q: %w", f.URL, ErrSchema, name, err)
					}
					if conv != nil {
						// Read as the file holds it, converted after.
						e.converts[name] = conv
						got.Type = want.Type
					}
				}
			}
			if typ == nil {
				typ, from = got.Type, f.URL
				continue
			}
			wide, ok := widen(typ, got.Type)
			if !ok {
				return nil, fmt.Errorf("formats: %w: column %q is %s in %s but %s in %s", ErrSchema, name, typ, from, got.Type, f.URL)
			}
			typ = wide
		}
		switch {
		case typ == nil:
			typ = want.Type // no file holds it: the schema's type, all null
		default:
			// The schema's type counts where it is a promotion of the
			// files' (int to long, float to double); a type the files
			// cannot widen to stays theirs, as the driver decodes it.
			if w, ok := widen(typ, want.Type); ok {
				typ = w
			}
		}
		fields[i] = arrow.Field{Name: name, Type: typ, Nullable: nullable, Metadata: want.Metadata}
	}
	read := arrow.NewSchema(fields, nil)
	for _, f := range frags {
		f.readSchema = f.fileRead(read)
	}
	return read, nil
}

// fileRead is read in f's names, without the columns f lacks.
func (f *Fragment) fileRead(read *arrow.Schema) *arrow.Schema {
	var out []arrow.Field
	for _, fl := range read.Fields() {
		fc, ok := fl.Name, true
		if f.fileCols != nil {
			fc, ok = f.fileCols[fl.Name]
		}
		if !ok {
			continue
		}
		if f.evolve != nil && f.evolve.converts[fl.Name] != nil {
			fl.Type = f.Schema.Field(f.Schema.FieldIndices(fc)[0]).Type
		}
		fl.Name = fc
		out = append(out, fl)
	}
	return arrow.NewSchema(out, nil)
}

// rename turns a batch decoded in f's names into the dataset's read
// schema, with null columns where f lacks one. It takes b.
func (d *Scan) rename(f *Fragment, b arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	defer b.Release()
	n := b.NumRows()
	cols := make([]arrow.Array, d.read.NumFields())
	var made []arrow.Array
	defer func() {
		for _, c := range made {
			c.Release()
		}
	}()
	at := 0
	for i, fl := range d.read.Fields() {
		ok := true
		if f.fileCols != nil {
			_, ok = f.fileCols[fl.Name]
		}
		if ok {
			if at >= int(b.NumCols()) {
				return nil, fmt.Errorf("%w: the batch has %d columns, the read wants more", ErrCorrupt, b.NumCols())
			}
			cols[i] = b.Column(at)
			at++
			if f.evolve != nil && f.evolve.converts[fl.Name] != nil {
				c, err := f.evolve.converts[fl.Name](cols[i], mem)
				if err != nil {
					return nil, fmt.Errorf("%w: column %q: %w", ErrSchema, fl.Name, err)
				}
				if !arrow.TypeEqual(c.DataType(), fl.Type) {
					c.Release()
					return nil, fmt.Errorf("%w: column %q converts to %s, not %s", ErrSchema, fl.Name, c.DataType(), fl.Type)
				}
				made = append(made, c)
				cols[i] = c
			}
			continue
		}
		var c arrow.Array
		if def, ok := f.evolve.defaultOf(fl.Name); ok {
			var err error
			if c, err = defaultArray(def, fl.Type, int(n), mem); err != nil {
				return nil, fmt.Errorf("%w: default of column %q: %w", ErrSchema, fl.Name, err)
			}
		} else {
			c = array.MakeArrayOfNull(mem, fl.Type, int(n))
		}
		made = append(made, c)
		cols[i] = c
	}
	if at != int(b.NumCols()) {
		return nil, fmt.Errorf("%w: the batch has %d columns, the read wants %d", ErrCorrupt, b.NumCols(), at)
	}
	return array.NewRecordBatch(d.read, cols, n), nil
}

// nested reports whether t has child fields (struct, list, map).
func nested(t arrow.DataType) bool {
	_, ok := t.(arrow.NestedType)
	return ok
}

// defaultOf is the default of a column the file lacks, if it has one.
func (e *evolution) defaultOf(column string) (scalar.Scalar, bool) {
	if e == nil || e.defaults == nil {
		return nil, false
	}
	sc, ok := e.defaults[column]
	return sc, ok && sc != nil && sc.IsValid()
}

// defaultArray is n copies of def, of type typ (def's, or a widening of
// it).
func defaultArray(def scalar.Scalar, typ arrow.DataType, n int, mem memory.Allocator) (arrow.Array, error) {
	if !arrow.TypeEqual(def.DataType(), typ) {
		var err error
		if def, err = def.CastTo(typ); err != nil {
			return nil, err
		}
	}
	return scalar.MakeArrayFromScalar(def, n, mem)
}
