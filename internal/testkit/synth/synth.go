// Package synth writes synthetic Parquet datasets for tests, examples and
// benchmarks: an id column that numbers every row of the dataset, a label,
// float features and a string, in files of several row groups.
package synth

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"gocloud.dev/blob"
)

// Spec describes a dataset.
type Spec struct {
	Files        int
	RowsPerFile  int
	RowGroupRows int
	// Classes is the number of label values (default 10). With SortedLabels
	// the rows are sorted by label, the worst case for a shuffle.
	Classes      int
	SortedLabels bool
	// StringBytes is the length of the s column's values (default 16).
	StringBytes int
	// Seed makes x and s reproducible.
	Seed uint64
	// PageIndex writes a page index (offset and column indexes) and pages
	// of about 8 KiB, and dictionary-encodes only the label column: a file
	// whose row groups can be read in part, page by page.
	PageIndex bool
	// SmallPages writes the pages and encodings of PageIndex without the
	// index (PageIndex implies them): the same file but for the index, for
	// comparing what a reader that cannot cut a row group fetches.
	SmallPages bool
	// Shape picks the files' columns (default Features). Left out of JSON
	// when it is the default, so that a spec recorded before it existed
	// still reads as the same spec.
	Shape Shape `json:",omitempty"`
}

// Shape is which columns a dataset's files hold, and how their values are
// drawn.
type Shape int

const (
	// Features is Schema: id, label, x drawn from a normal distribution,
	// and s of StringBytes random characters.
	Features Shape = iota
	// Table is TableSchema, shaped like the table of the issue that asked
	// for the shuffle benchmark: id, x normal, y uniform in [0, 1), s of
	// 10 to 20 random characters, and label. StringBytes is not used.
	Table
)

// Schema is the schema of every file.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "s", Type: arrow.BinaryTypes.String},
}, nil)

// TableSchema is the schema of every file of the Table shape.
var TableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "y", Type: arrow.PrimitiveTypes.Float64},
	{Name: "s", Type: arrow.BinaryTypes.String},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func (s *Spec) defaults() {
	if s.Classes == 0 {
		s.Classes = 10
	}
	if s.StringBytes == 0 {
		s.StringBytes = 16
	}
	if s.RowGroupRows == 0 {
		s.RowGroupRows = s.RowsPerFile
	}
}

// Rows is the dataset's row count.
func (s Spec) Rows() int64 { return int64(s.Files) * int64(s.RowsPerFile) }

// FileName is the name of file i.
func FileName(i int) string { return fmt.Sprintf("part-%05d.parquet", i) }

// WriteDir writes the dataset into dir (created if missing).
func WriteDir(dir string, spec Spec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range spec.Files {
		if err := WriteFile(dir, spec, i); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes file i of the dataset into dir, which must exist: for
// a caller that writes the files one at a time.
func WriteFile(dir string, spec Spec, i int) error {
	spec.defaults()
	f, err := os.Create(filepath.Join(dir, FileName(i)))
	if err != nil {
		return err
	}
	// The Parquet writer closes f.
	if err := writeFile(f, spec, i); err != nil {
		f.Close()
		return err
	}
	return nil
}

// WriteBucket writes the dataset into b under prefix.
func WriteBucket(ctx context.Context, b *blob.Bucket, prefix string, spec Spec) error {
	spec.defaults()
	for i := range spec.Files {
		w, err := b.NewWriter(ctx, prefix+FileName(i), nil)
		if err != nil {
			return err
		}
		// The Parquet writer closes w, which commits the object.
		if err := writeFile(w, spec, i); err != nil {
			w.Close()
			return err
		}
	}
	return nil
}

// Label is the label of row id: sorted or scattered.
func (s Spec) Label(id int64) int64 {
	s.defaults()
	if s.SortedLabels {
		return id * int64(s.Classes) / s.Rows()
	}
	return int64(mix(uint64(id)) % uint64(s.Classes))
}

func writeFile(w io.Writer, spec Spec, file int) error {
	mem := memory.DefaultAllocator
	opts := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(int64(spec.RowGroupRows)),
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithStats(true),
	}
	if spec.PageIndex {
		opts = append(opts, parquet.WithPageIndexEnabled(true))
	}
	if spec.PageIndex || spec.SmallPages {
		// A dictionary page is needed by every page that uses it, so each
		// side of a cut fetches it: high-cardinality columns go without.
		opts = append(opts, parquet.WithDataPageSize(8<<10),
			parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("label", true))
	}
	props := parquet.NewWriterProperties(opts...)
	schema, fill := Schema, spec.features
	// The seeds are the ones each shape's files were first written with,
	// so that data written before stays the same.
	r := rand.New(rand.NewPCG(spec.Seed, uint64(file)))
	if spec.Shape == Table {
		schema, fill = TableSchema, spec.table
		r = rand.New(rand.NewPCG(uint64(file), spec.Seed))
	}
	fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return err
	}
	first := int64(file) * int64(spec.RowsPerFile)
	for start := 0; start < spec.RowsPerFile; start += spec.RowGroupRows {
		n := min(spec.RowGroupRows, spec.RowsPerFile-start)
		b := array.NewRecordBuilder(mem, schema)
		fill(b, r, first+int64(start), n)
		rec := b.NewRecordBatch()
		b.Release()
		err := fw.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return err
		}
		if start+n < spec.RowsPerFile {
			fw.NewBufferedRowGroup()
		}
	}
	return fw.Close()
}

const letters = "abcdefghijklmnopqrstuvwxyz0123456789"

// features appends n rows of the Features shape from id first on to b.
func (s Spec) features(b *array.RecordBuilder, r *rand.Rand, first int64, n int) {
	ids := b.Field(0).(*array.Int64Builder)
	labels := b.Field(1).(*array.Int64Builder)
	xs := b.Field(2).(*array.Float64Builder)
	ss := b.Field(3).(*array.StringBuilder)
	buf := make([]byte, s.StringBytes)
	for k := range n {
		id := first + int64(k)
		ids.Append(id)
		labels.Append(s.Label(id))
		xs.Append(r.NormFloat64())
		for j := range buf {
			buf[j] = letters[r.IntN(len(letters))]
		}
		ss.Append(string(buf))
	}
}

// table appends n rows of the Table shape from id first on to b.
func (s Spec) table(b *array.RecordBuilder, r *rand.Rand, first int64, n int) {
	ids := b.Field(0).(*array.Int64Builder)
	xs := b.Field(1).(*array.Float64Builder)
	ys := b.Field(2).(*array.Float64Builder)
	ss := b.Field(3).(*array.StringBuilder)
	labels := b.Field(4).(*array.Int64Builder)
	var buf [20]byte
	for k := range n {
		id := first + int64(k)
		ids.Append(id)
		xs.Append(r.NormFloat64())
		ys.Append(r.Float64())
		l := 10 + r.IntN(11)
		for j := range l {
			buf[j] = letters[r.IntN(len(letters))]
		}
		ss.Append(string(buf[:l]))
		labels.Append(s.Label(id))
	}
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
