package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// The avro scenario: the Avro driver beside Parquet on the same rows, in
// the same run (issue 28). avro_benchdata streams the rows the sequential
// line reads, written as Avro object container files by twmb/avro (another
// implementation than the reader; snappy, as the Parquet files are, blocks
// of avroBlockRows rows), sequentially on one rank, and the bench data's
// Parquet files, alternately. ratio_vs_parquet is Avro's rows/s over
// Parquet's.

// avroBlockRows is the rows of an Avro block: about 120 KB stored of the
// bench data's columns, the order of the blocks common writers make (Java's
// and Spark's flush at about 64 KB).
const avroBlockRows = 4096

func (e *env) avroScenario(ctx context.Context) error {
	dir := filepath.Join(e.data.root, filepath.Base(e.data.dir)+"-avro")
	if err := parquetToAvro(e.data.files, dir); err != nil {
		return fmt.Errorf("avro_benchdata: write the bench data as Avro: %w", err)
	}
	rows := e.data.spec.Rows()
	pq := avroSide{urls: []string{e.data.dir}, rows: rows}
	av := avroSide{urls: []string{dir}, rows: rows, formats: []formats.Format{avro.Format{}}}
	var best, bestPQ measurement
	var rates, ratesPQ []float64
	for i := range max(e.cfg.Reps, 1) {
		p, err := e.avroPass(ctx, pq)
		if err != nil {
			return fmt.Errorf("avro_benchdata: parquet: %w", err)
		}
		a, err := e.avroPass(ctx, av)
		if err != nil {
			return fmt.Errorf("avro_benchdata: avro: %w", err)
		}
		rates, ratesPQ = append(rates, a.rowsPerSec()), append(ratesPQ, p.rowsPerSec())
		if i == 0 || a.rowsPerSec() > best.rowsPerSec() {
			best = a
		}
		if i == 0 || p.rowsPerSec() > bestPQ.rowsPerSec() {
			bestPQ = p
		}
	}
	s := e.single(best)
	s.rates = rates
	r := e.result("avro_benchdata", s)
	r.set("data", fmt.Sprintf("the bench data (%d files of %d rows, all 4 columns): Parquet as written (snappy, row groups of %d rows) against the same rows as Avro object container files written by twmb/avro (snappy, blocks of %d rows)",
		e.data.spec.Files, e.data.spec.RowsPerFile, e.data.spec.RowGroupRows, avroBlockRows))
	r.set("options", "sequential, one rank; Avro read with Options.Formats = avro.Format{}")
	r.set("parquet_rows_per_s", bestPQ.rowsPerSec())
	r.set("parquet_runs_rows_per_s", roundAll(ratesPQ))
	r.set("parquet_io_amplification", bestPQ.ioAmplification())
	r.set("ratio_vs_parquet", best.rowsPerSec()/bestPQ.rowsPerSec())
	r.target("ratio_vs_parquet", ">=", 0.5)
	r.set("note", "planning walks every block's header to know its rows, and reads a file of blocks under 1 MiB whole to do so (formats/avro): io_amplification counts those plan reads (plan_bytes), data_io_amplification the stream's own")
	return e.emit(r)
}

// avroSide is one side of the comparison: its files and drivers.
type avroSide struct {
	urls    []string
	rows    int64
	formats []formats.Format
}

// avroPass streams the side once, checking every id came once.
func (e *env) avroPass(ctx context.Context, s avroSide) (measurement, error) {
	o := e.opts()
	o.Formats = s.formats
	runtime.GC()
	m, err := measureStream(ctx, streamRun{urls: s.urls, opts: o, sumIDs: true})
	if err != nil {
		return m, err
	}
	if want := s.rows * (s.rows - 1) / 2; m.idSum != want {
		return m, fmt.Errorf("ids sum to %d, want %d: a row came twice or never", m.idSum, want)
	}
	return m, expectRows(m, s.rows)
}

// parquetToAvro writes each Parquet file as an Avro file under dir, unless
// dir already holds it.
func parquetToAvro(files []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, path := range files {
		out := filepath.Join(dir, filepath.Base(path[:len(path)-len(filepath.Ext(path))])+".avro")
		if _, err := os.Stat(out); err == nil {
			continue
		}
		if err := convertToAvro(path, out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

func convertToAvro(path, out string) error {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 65536}, memory.NewGoAllocator())
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	schema, err := avroSchemaOf(rr.Schema())
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer fh.Close()
	w, err := ocf.NewWriter(fh, schema, ocf.WithCodec(ocf.SnappyCodec()), ocf.WithBlockCount(avroBlockRows))
	if err != nil {
		return err
	}
	names := make([]string, rr.Schema().NumFields())
	for i, f := range rr.Schema().Fields() {
		names[i] = f.Name
	}
	row := make(map[string]any, len(names))
	for rr.Next() {
		b := rr.RecordBatch()
		for i := range int(b.NumRows()) {
			for c, col := range b.Columns() {
				if row[names[c]], err = avroValue(col, i); err != nil {
					return err
				}
			}
			if err := w.Encode(row); err != nil {
				return err
			}
		}
	}
	if err := rr.Err(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// avroSchemaOf is the Avro record of the bench data's column types (the
// types synth writes; another is an error, not a guess).
func avroSchemaOf(s *arrow.Schema) (*twmb.Schema, error) {
	js := `{"type": "record", "name": "row", "fields": [`
	for i, f := range s.Fields() {
		var t string
		switch f.Type.ID() {
		case arrow.INT64:
			t = `"long"`
		case arrow.INT32:
			t = `"int"`
		case arrow.FLOAT64:
			t = `"double"`
		case arrow.STRING:
			t = `"string"`
		default:
			return nil, fmt.Errorf("column %s: type %s has no Avro type here", f.Name, f.Type)
		}
		if f.Nullable {
			t = `["null", ` + t + `]`
		}
		if i > 0 {
			js += ", "
		}
		js += fmt.Sprintf(`{"name": %q, "type": %s}`, f.Name, t)
	}
	return twmb.Parse(js + "]}")
}

func avroValue(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i), nil
	case *array.Int32:
		return a.Value(i), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	}
	return nil, fmt.Errorf("an Arrow %T has no Avro value here", a)
}
