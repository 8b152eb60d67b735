package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
)

// writeTrainingFile writes rows rows of a typical training table: id
// int64, x and y float64, s a string of 10 to 20 letters, label an int64 of
// 100 values (dictionary encoded; the others PLAIN), Snappy, in row groups
// of rowGroup rows.
func writeTrainingFile(b *testing.B, path string, rows, rowGroup int) {
	b.Helper()
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "y", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	r := rand.New(rand.NewPCG(1, 2))
	letters := make([]byte, 20)
	for i := range rows {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.Float64Builder).Append(r.Float64())
		bld.Field(2).(*array.Float64Builder).Append(r.NormFloat64())
		n := 10 + r.IntN(11)
		for j := range n {
			letters[j] = byte('a' + r.IntN(26))
		}
		bld.Field(3).(*array.StringBuilder).Append(string(letters[:n]))
		bld.Field(4).(*array.Int64Builder).Append(int64(r.IntN(100)))
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	props := pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy), pq.WithDictionaryDefault(false),
		pq.WithDictionaryFor("label", true), pq.WithMaxRowGroupLength(int64(rowGroup)))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// cpuNanos is the process's user and system CPU time: on a shared machine
// it moves less with the load than the wall clock.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFastDecode decodes the same 1M-row file (fetched once) with the
// own decoder and with arrow-go's, in one process, alternating the two
// every iteration so that both see the same machine: compare the two
// ns/op (and cpu-ns/op, the CPU time the process spent).
//
//	go test ./formats/parquet -run '^$' -bench FastDecode -benchtime 10x -count 3
func BenchmarkFastDecode(b *testing.B) {
	const rows = 1 << 20
	path := filepath.Join(b.TempDir(), "train.parquet")
	writeTrainingFile(b, path, rows, 131072)
	ctx := context.Background()
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{}}})
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	frag := ds.Fragments[0]
	mem := memory.NewGoAllocator()
	read := &formats.Read{Range: formats.Range{Start: 0, End: frag.Rows, FirstUnit: 0, EndUnit: len(frag.Units)}, Schema: frag.Schema, BatchRows: 8192, Mem: mem}
	fetched, err := parquet.Format{}.Fetch(ctx, frag, read)
	if err != nil {
		b.Fatal(err)
	}
	decode := func(p parquet.Format) {
		var got int64
		for rb, err := range p.Decode(ctx, frag, fetched, read) {
			if err != nil {
				b.Fatal(err)
			}
			got += rb.NumRows()
			rb.Release()
		}
		if got != rows {
			b.Fatal(fmt.Errorf("read %d rows of %d", got, rows))
		}
	}
	var wall, cpu, bytes, allocs [2]int64
	var ms runtime.MemStats
	b.ResetTimer()
	for range b.N {
		for k, p := range []parquet.Format{{}, {ArrowGoDecode: true}} {
			runtime.ReadMemStats(&ms)
			b0, a0 := ms.TotalAlloc, ms.Mallocs
			t0, c0 := time.Now(), cpuNanos()
			decode(p)
			wall[k] += time.Since(t0).Nanoseconds()
			cpu[k] += cpuNanos() - c0
			runtime.ReadMemStats(&ms)
			bytes[k] += int64(ms.TotalAlloc - b0)
			allocs[k] += int64(ms.Mallocs - a0)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(wall[0])/n, "own-ns/op")
	b.ReportMetric(float64(wall[1])/n, "arrowgo-ns/op")
	// Rows per CPU second: the figure to compare across commits, which
	// moves less with the machine's load than the wall clock.
	b.ReportMetric(rows*n/(float64(cpu[0])/1e9), "own-rows/cpu-s")
	b.ReportMetric(rows*n/(float64(cpu[1])/1e9), "arrowgo-rows/cpu-s")
	b.ReportMetric(float64(bytes[0])/n, "own-B/op")
	b.ReportMetric(float64(allocs[0])/n, "own-allocs/op")
	b.ReportMetric(float64(bytes[1])/n, "arrowgo-B/op")
	b.ReportMetric(float64(allocs[1])/n, "arrowgo-allocs/op")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "speedup")
	b.ReportMetric(float64(cpu[1])/float64(max(cpu[0], 1)), "cpu-speedup")
}

// BenchmarkSpreadColumns reads a file of one row group of 1M rows (the
// training table of BenchmarkFastDecode) alone, its batches' columns
// decoded on idle cores and, alternately, one after another
// (SerialColumns): compare spread-ns/op with serial-ns/op, and the CPU
// each spends.
//
//	go test ./formats/parquet -run '^$' -bench SpreadColumns -count 3
func BenchmarkSpreadColumns(b *testing.B) {
	const rows = 1 << 20
	path := filepath.Join(b.TempDir(), "one.parquet")
	writeTrainingFile(b, path, rows, rows)
	ctx := context.Background()
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{}}})
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	frag := ds.Fragments[0]
	read := &formats.Read{Range: formats.Range{Start: 0, End: frag.Rows, FirstUnit: 0, EndUnit: len(frag.Units)}, Schema: frag.Schema, BatchRows: 8192, Mem: memory.NewGoAllocator()}
	fetched, err := parquet.Format{}.Fetch(ctx, frag, read)
	if err != nil {
		b.Fatal(err)
	}
	var wall, cpu [2]int64
	b.ResetTimer()
	for range b.N {
		for k, p := range []parquet.Format{{}, {SerialColumns: true}} {
			t0, c0 := time.Now(), cpuNanos()
			var got int64
			for rb, err := range p.Decode(ctx, frag, fetched, read) {
				if err != nil {
					b.Fatal(err)
				}
				got += rb.NumRows()
				rb.Release()
			}
			if got != rows {
				b.Fatalf("read %d rows of %d", got, rows)
			}
			wall[k] += time.Since(t0).Nanoseconds()
			cpu[k] += cpuNanos() - c0
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(wall[0])/n, "spread-ns/op")
	b.ReportMetric(float64(wall[1])/n, "serial-ns/op")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "speedup")
	b.ReportMetric(rows*n/(float64(cpu[0])/1e9), "spread-rows/cpu-s")
	b.ReportMetric(rows*n/(float64(cpu[1])/1e9), "serial-rows/cpu-s")
}
