// Package formatstest holds the checks every formats driver must pass, so
// that the drivers in this module (Parquet, ORC, Avro, the text formats,
// Iceberg's scan) and drivers written outside it are held to one contract by
// one suite, as testing/fstest holds file systems to io/fs's.
//
// A driver runs the suite from a test of its own package, giving the suite
// a way to write the suite's table in its format:
//
//	func TestConformance(t *testing.T) {
//		formatstest.Run(t, formatstest.Driver{
//			Formats: []formats.Format{mydriver.Format{}},
//			Ext:     ".my",
//			Write:   writeMy, // func(w io.Writer, rec arrow.RecordBatch, unitRows int) error
//		})
//	}
//
// The suite writes files of the table (Table: every value a function of
// its row's id, with nulls), plans them with formats.Plan and reads them
// only through formats.Scan, so that it checks what a stream gets. It
// checks that every row of a file is delivered exactly once, with every
// value as written, over Fetch and Decode and over reads of row and unit
// ranges cut anywhere; that rows a driver leaves out are reported, not lost;
// that empty files read as empty; that a damaged file is an error naming
// the file and the part read, never a panic, a hang or wrong rows; that a
// released fetch is not decoded; that a consumer that stops is answered
// with its own error and leaks no batch; and that the table's schema is
// the one every driver gives for it (Schema), so that datasets of
// different formats mix.
package formatstest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
)

// Driver is a driver under test: how the suite writes files the driver
// reads, and how it plans them.
type Driver struct {
	// Name names the driver in failures. Default: the first format's.
	Name string
	// Formats read the files Write writes (PlanOptions.Formats).
	Formats []formats.Format
	// Ext ends the names of the files Write writes, such as ".parquet": a
	// name the first format's Match accepts.
	Ext string
	// Write writes rec, whose schema is Table's less Lacks, as one file of
	// the format to w, in units (row groups, stripes, blocks) of about
	// unitRows rows where the format lets a writer choose. rec may have no
	// rows: the file is then the format's empty file.
	Write func(w io.Writer, rec arrow.RecordBatch, unitRows int) error

	// Dataset, for a driver that is not one file a fragment (a table
	// format), is used in place of Formats, Ext and Write: it makes a
	// dataset in dir whose data files hold files' rows (one data file
	// each; a file of no rows may be left out), less the rows whose ids
	// it returns as deleted, and returns how to plan it. The checks that
	// need the files themselves (masks, damage, skips) are then skipped.
	Dataset func(t testing.TB, dir string, files []arrow.RecordBatch) (plan PlanFunc, deleted []int64)

	// Lacks names columns of Table that the format cannot express: the
	// files are written without them. Default: none.
	Lacks []string
	// Unframed says a file cut short can read as a shorter file of the
	// format (CSV, JSON Lines: no footer, no count): its last row may then
	// be a row cut short, so the damage checks do not hold that one row
	// to its written values. Default false: a file cut short is an error
	// or reads only rows as written.
	Unframed bool
	// Damages are damages to a file that the driver must tell, beside the
	// suite's own (a file of random bytes, a file cut short): reading the
	// damaged file must fail, naming it, after rows as written only.
	Damages []Damage
	// Skips, if set, checks the rows the driver leaves out as not fitting
	// the schema (a text format's BadRowsSkip).
	Skips *Skips
}

// PlanFunc plans a dataset with the options a check gives (a filter, say).
type PlanFunc func(context.Context, formats.PlanOptions) (*formats.Scan, error)

// Damage is a change to the bytes of a file the driver must detect.
type Damage struct {
	// Name names the damage in failures.
	Name string
	// Apply returns the damaged bytes of a file Write wrote (a copy, or
	// file itself changed).
	Apply func(file []byte) []byte
}

// Skips configures the check of rows a driver leaves out.
type Skips struct {
	// Formats read the files, leaving bad rows out.
	Formats []formats.Format
	// Write writes rec as Driver.Write does, but with the rows for whose
	// id bad is true written so that the driver leaves them out (a value
	// that does not parse as its column's type).
	Write func(w io.Writer, rec arrow.RecordBatch, unitRows int, bad func(id int64) bool) error
}

// UnitRows is the unit size the suite asks Write for: small, so that
// every file of the suite has many units to cut.
const UnitRows = 128

// Schema is the suite's table: the columns of types every format of the
// module expresses, each nullable (Parquet's optional, ORC's and CSV's
// every column, Avro's union with null), as every driver gives them.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
}, nil)

// Table returns the rows with ids [first, first+n) of the suite's table,
// with the columns of Schema less lacks. Every value is a function of the
// row's id; every column but id has nulls.
func Table(first, n int64, lacks []string) arrow.RecordBatch {
	var fields []arrow.Field
	for _, f := range Schema.Fields() {
		if !slices.Contains(lacks, f.Name) {
			fields = append(fields, f)
		}
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := first; id < first+n; id++ {
		for i, f := range fields {
			appendValue(b.Field(i), f.Name, id)
		}
	}
	return b.NewRecordBatch()
}

// appendValue appends column col's value of row id.
func appendValue(b array.Builder, col string, id int64) {
	switch col {
	case "id":
		b.(*array.Int64Builder).Append(id)
	case "f64":
		if id%11 == 3 {
			b.AppendNull()
			return
		}
		// Quarters print and parse back exactly as text.
		b.(*array.Float64Builder).Append(float64(id)*0.75 - 40.25)
	case "s":
		if id%13 == 5 {
			b.AppendNull()
			return
		}
		v := "s" + strconv.FormatInt(id, 10)
		switch id % 6 {
		case 1:
			v += ", with a comma"
		case 2:
			v += ` "quoted"`
		case 4:
			v += " é ü 中"
		}
		b.(*array.StringBuilder).Append(v)
	case "b":
		if id%7 == 6 {
			b.AppendNull()
			return
		}
		b.(*array.BooleanBuilder).Append(id%3 == 0)
	case "d":
		if id%17 == 2 {
			b.AppendNull()
			return
		}
		b.(*array.Date32Builder).Append(arrow.Date32(18000 + id%5000))
	default:
		panic("formatstest: no column " + col)
	}
}

// Run runs the suite over d.
func Run(t *testing.T, d Driver) {
	s := newSuite(t, d)
	t.Run("Schema", s.testSchema)
	t.Run("ExactlyOnce", s.testExactlyOnce)
	t.Run("Cuts", s.testCuts)
	t.Run("Masks", s.testMasks)
	t.Run("Filter", s.testFilter)
	t.Run("Empty", s.testEmpty)
	t.Run("Released", s.testReleased)
	t.Run("Stopped", s.testStopped)
	t.Run("Damaged", s.testDamaged)
	t.Run("Skips", s.testSkips)
}

// suite is one run of the suite over a driver.
type suite struct {
	d       Driver
	name    string
	columns []string // Schema's names less Lacks
	// want[c][id] is column c's value of row id, as Arrow prints it.
	want [][]string
}

// fileRows are the rows of the suite's files, by file: a file of one row
// and files of several units each, not multiples of UnitRows. Under -short
// (CI's race pass) the files have 3 and 4 units, not 6 and 11: each check
// reads at every unit boundary, one goroutine a read, and the pass without
// -short reads the larger files.
func fileRows() []int64 {
	if testing.Short() {
		return []int64{300, 1, 500}
	}
	return []int64{700, 1, 1300}
}

// tableRows is the ids every table of the suite draws from.
const tableRows = 4096

func newSuite(t *testing.T, d Driver) *suite {
	if d.Write == nil && d.Dataset == nil {
		t.Fatal("formatstest: Driver has neither Write nor Dataset")
	}
	if d.Dataset == nil && (len(d.Formats) == 0 || d.Ext == "") {
		t.Fatal("formatstest: Driver.Write needs Formats and Ext")
	}
	s := &suite{d: d, name: d.Name}
	if s.name == "" && len(d.Formats) > 0 {
		s.name = d.Formats[0].Name()
	}
	rec := Table(0, tableRows, d.Lacks)
	defer rec.Release()
	for i, f := range rec.Schema().Fields() {
		s.columns = append(s.columns, f.Name)
		col := rec.Column(i)
		vals := make([]string, col.Len())
		for r := range vals {
			vals[r] = col.ValueStr(r)
		}
		s.want = append(s.want, vals)
	}
	return s
}

// dataset is a written dataset of the suite and what it must deliver.
type dataset struct {
	// paths are the files written, in order (nil for a Dataset driver).
	paths []string
	// ids are the ids each file was written with.
	ids [][]int64
	// gone are the ids that are not part of the dataset (deleted, bad).
	gone map[int64]bool
	// plan plans the dataset.
	plan PlanFunc
}

// write writes files of the given row counts, ids numbering them in
// order from 0, into a new directory, and plans them with opts.
func (s *suite) write(t *testing.T, rows []int64, opts formats.PlanOptions) (*dataset, *formats.Scan) {
	t.Helper()
	ds := s.files(t, rows, nil)
	return ds, s.plan(t, ds, opts)
}

// files writes files of the given row counts, ids numbering them in
// order from 0, with the rows bad says written bad (Skips.Write) where it
// is set.
func (s *suite) files(t *testing.T, rows []int64, bad func(int64) bool) *dataset {
	t.Helper()
	dir := t.TempDir()
	ds := &dataset{gone: map[int64]bool{}}
	var recs []arrow.RecordBatch
	var first int64
	for _, n := range rows {
		rec := Table(first, n, s.d.Lacks)
		defer rec.Release()
		recs = append(recs, rec)
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = first + int64(i)
			if bad != nil && bad(ids[i]) {
				ds.gone[ids[i]] = true
			}
		}
		ds.ids = append(ds.ids, ids)
		first += n
	}
	if first > tableRows {
		t.Fatalf("formatstest: %d rows, more than the table's %d", first, tableRows)
	}
	if s.d.Dataset != nil {
		plan, deleted := s.d.Dataset(t, dir, recs)
		for _, id := range deleted {
			ds.gone[id] = true
		}
		ds.plan = plan
		return ds
	}
	for i, rec := range recs {
		path := filepath.Join(dir, fmt.Sprintf("part-%02d%s", i, s.d.Ext))
		if err := s.writeFile(path, rec, bad); err != nil {
			t.Fatalf("%s: writing %s: %v", s.name, path, err)
		}
		ds.paths = append(ds.paths, path)
	}
	ds.plan = func(ctx context.Context, opts formats.PlanOptions) (*formats.Scan, error) {
		if opts.Formats == nil {
			opts.Formats = s.d.Formats
		}
		return formats.Plan(ctx, []string{dir}, opts)
	}
	return ds
}

// plan plans ds with opts, failing t on an error; the scan is closed when
// t ends.
func (s *suite) plan(t *testing.T, ds *dataset, opts formats.PlanOptions) *formats.Scan {
	t.Helper()
	scan, err := ds.plan(context.Background(), opts)
	if err != nil {
		t.Fatalf("%s: planning: %v", s.name, err)
	}
	t.Cleanup(func() { scan.Close() })
	if ds.paths != nil && len(scan.Fragments) != len(ds.paths) {
		t.Fatalf("%s: %d fragments planned of %d files", s.name, len(scan.Fragments), len(ds.paths))
	}
	return scan
}

// fileOf is the index in ds.paths of fragment f's file, or -1 for a
// Dataset driver's.
func (ds *dataset) fileOf(f *formats.Fragment) int {
	for i, p := range ds.paths {
		if strings.HasSuffix(f.URL, "/"+filepath.Base(p)) {
			return i
		}
	}
	return -1
}

// live is the ids of ds in the order a whole read of each file gives them,
// less those gone: what the dataset must deliver.
func (ds *dataset) live() map[int64]bool {
	out := map[int64]bool{}
	for _, ids := range ds.ids {
		for _, id := range ids {
			if !ds.gone[id] {
				out[id] = true
			}
		}
	}
	return out
}

// checkedMem returns an allocator the test checks is empty at its end:
// every batch a driver made was released.
func checkedMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// rng is the suite's random source: seeded, so a failure repeats.
func rng(t *testing.T) *rand.Rand {
	var seed uint64
	for _, c := range t.Name() {
		seed = seed*31 + uint64(c)
	}
	return rand.New(rand.NewPCG(seed, 48))
}

// writeFile writes rec as a file at path, with Skips.Write where bad is
// set.
func (s *suite) writeFile(path string, rec arrow.RecordBatch, bad func(int64) bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := struct{ io.Writer }{f} // a writer's Close is the suite's to call
	if bad != nil {
		err = s.d.Skips.Write(w, rec, UnitRows, bad)
	} else {
		err = s.d.Write(w, rec, UnitRows)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
