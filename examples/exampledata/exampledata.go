// Package exampledata writes small synthetic Parquet datasets, for the sluice examples and for
// trying a training loop before pointing it at real data.
//
// It is an ordinary exported package, not internal, so that an example copied into another
// module still builds; it uses nothing from sluice, only arrow-go's Parquet writer, so it also
// shows the one call (pqarrow.NewFileWriter) that writes Parquet sluice can read.
//
// Every dataset has the same four columns:
//
//	id     int64    numbers the rows of the dataset from 0, in file order: a consumer can check
//	                that every row came exactly once
//	label  int64    a class in [0, Classes), a hash of id
//	x      float64  a normally distributed feature
//	s      string   16 random letters and digits, so that decoding does some work
package exampledata

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Spec describes a dataset. Files, RowsPerFile and RowGroupRows are required.
type Spec struct {
	// Files is the number of Parquet files, named part-00000.parquet and on.
	Files int
	// RowsPerFile is the number of rows in each file.
	RowsPerFile int
	// RowGroupRows is the number of rows in each row group, the unit sluice plans and
	// shuffles chunks by; the last row group of a file may hold fewer.
	RowGroupRows int
	// Classes is the number of label values. Default (0): 10.
	Classes int
	// Seed makes x and s reproducible; id and label do not depend on it.
	Seed uint64
}

// Schema is the schema of every file.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64},
	{Name: "s", Type: arrow.BinaryTypes.String},
}, nil)

// Rows is the number of rows of the dataset.
func (s Spec) Rows() int64 { return int64(s.Files) * int64(s.RowsPerFile) }

// Write writes the dataset's files into dir, creating it if missing.
func Write(dir string, spec Spec) error {
	if spec.Files < 1 || spec.RowsPerFile < 1 || spec.RowGroupRows < 1 {
		return fmt.Errorf("exampledata: Files (%d), RowsPerFile (%d) and RowGroupRows (%d) must be positive",
			spec.Files, spec.RowsPerFile, spec.RowGroupRows)
	}
	if spec.Classes < 1 {
		spec.Classes = 10
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range spec.Files {
		if err := writeFile(filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", i)), spec, i); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, spec Spec, file int) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(
		// Row groups are what a reader can fetch and skip on their own.
		parquet.WithMaxRowGroupLength(int64(spec.RowGroupRows)),
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithStats(true),
	)
	// The file writer owns f from here and closes it.
	fw, err := pqarrow.NewFileWriter(Schema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		f.Close()
		return err
	}
	defer func() {
		if cerr := fw.Close(); err == nil {
			err = cerr
		}
	}()

	r := rand.New(rand.NewPCG(spec.Seed, uint64(file)))
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	var s [16]byte
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema)
	defer b.Release()
	first := int64(file) * int64(spec.RowsPerFile)
	for start := 0; start < spec.RowsPerFile; start += spec.RowGroupRows {
		if start > 0 {
			fw.NewBufferedRowGroup()
		}
		for k := range min(spec.RowGroupRows, spec.RowsPerFile-start) {
			id := first + int64(start+k)
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Int64Builder).Append(int64(mix(uint64(id)) % uint64(spec.Classes)))
			b.Field(2).(*array.Float64Builder).Append(r.NormFloat64())
			for j := range s {
				s[j] = letters[r.IntN(len(letters))]
			}
			b.Field(3).(*array.StringBuilder).Append(string(s[:]))
		}
		rec := b.NewRecordBatch()
		err := fw.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("exampledata: %s: %w", path, err)
		}
	}
	return nil
}

// mix is splitmix64's finalizer: labels scattered over the ids, the same on every machine.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
