package stream

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

var placesRows = flag.Int64("places.rows", 0, "rows of TestMeasureLargeRowGroups's data (0 skips it; the issue measured 4,000,000)")

// TestMeasureLargeRowGroups measures what reading files written as pyarrow
// writes them by default costs: row groups of 1,048,576 rows and pages of
// 1 MiB with a page index, against the same rows in row groups of 131,072,
// with the default options: peak heap (runtime HeapInuse, sampled every
// 5 ms), rows/s and io_amplification, in storage order, shuffled, and on
// two ranks of NumSplits 16, and how well shuffled batches mix (mean total
// variation distance of a batch's label histogram from the global one; the
// label is sorted, 10 classes). The timings are ratios within one run:
//
//	go test ./stream -run TestMeasureLargeRowGroups -places.rows 4000000 -v -timeout 0
func TestMeasureLargeRowGroups(t *testing.T) {
	n := *placesRows
	if n <= 0 {
		t.Skip("a measurement: -places.rows N runs it")
	}
	for _, group := range []int64{1 << 20, 131_072} {
		dir := t.TempDir()
		const files = 4
		for f := range int64(files) {
			if err := writePyarrowLike(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), f*n/files, (f+1)*n/files, n, group); err != nil {
				t.Fatal(err)
			}
		}
		for _, run := range []struct {
			name          string
			shuffle       bool
			world, splits int
		}{{"sequential", false, 1, 0}, {"shuffled", true, 1, 0}, {"2 ranks, NumSplits 16", true, 2, 16}} {
			m := measureEpoch(t, dir, n, run.shuffle, run.world, run.splits)
			t.Logf("row groups of %d rows, %s: %.0f MiB peak heap, %.2fM rows/s, io_amplification %.3f, mixing (mean TVD) %.3f, %d row groups, %d chunks",
				group, run.name, float64(m.peak)/(1<<20), m.rowsPerSec/1e6, m.amp, m.tvd, m.units, m.chunks)
		}
	}
}

type epochFigures struct {
	peak       uint64
	rowsPerSec float64
	amp, tvd   float64
	chunks     int
	units      int
}

// measureEpoch streams one epoch of dir on world ranks at once.
func measureEpoch(t *testing.T, dir string, n int64, shuffle bool, world, splits int) epochFigures {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	var fig epochFigures
	var read, stored, rows atomic.Int64
	var tvSum float64
	var tvN int
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for rank := range world {
		wg.Go(func() {
			log := &readLog{}
			o := Options{URLs: []string{dir}, Shuffle: shuffle, Seed: 42, NumSplits: splits, WorldSize: world, Rank: rank}
			o.Storage.Wrap = log.wrap
			ds, err := Open(context.Background(), o)
			if err != nil {
				t.Error(err)
				return
			}
			defer ds.Close()
			if rank == 0 {
				for _, f := range ds.Files() {
					for _, u := range f.Units {
						stored.Add(u.Bytes)
					}
				}
				fig.chunks = len(ds.Chunks())
				for _, f := range ds.Files() {
					fig.units += len(f.Units)
				}
			}
			log.start()
			hist := make([]float64, 10)
			for b, err := range ds.Batches(context.Background()) {
				if err != nil {
					t.Error(err)
					return
				}
				ids := b.Column(0).(*array.Int64)
				clear(hist)
				for i := range ids.Len() {
					hist[ids.Value(i)*10/n]++
				}
				var tv float64
				for _, h := range hist {
					tv += math.Abs(h/float64(ids.Len()) - 0.1)
				}
				mu.Lock()
				tvSum += tv / 2
				tvN++
				mu.Unlock()
				rows.Add(b.NumRows())
				b.Release()
			}
			read.Add(log.bytes())
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	sampler.Wait()
	if rows.Load() != n {
		t.Errorf("streamed %d rows of %d", rows.Load(), n)
	}
	fig.peak = peak.Load()
	fig.rowsPerSec = float64(rows.Load()) / elapsed.Seconds()
	fig.amp = float64(read.Load()) / float64(stored.Load())
	fig.tvd = tvSum / float64(max(tvN, 1))
	return fig
}

// writePyarrowLike writes rows [from, to) of n as pyarrow does by default:
// row groups of group rows, pages of 1 MiB, a page index, snappy. Columns:
// id, x and y (float64), s (a string of 10 to 20 characters) and label (10
// classes, sorted by id).
func writePyarrowLike(path string, from, to, n, group int64) error {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "y", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "label", Type: arrow.BinaryTypes.String},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(group), parquet.WithDataPageSize(1<<20),
		parquet.WithPageIndexEnabled(true), parquet.WithCompression(compress.Codecs.Snappy))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		f.Close()
		return err
	}
	mem := memory.NewGoAllocator()
	const step = 1 << 16
	for at := from; at < to; at += step {
		b := array.NewRecordBuilder(mem, schema)
		for id := at; id < min(at+step, to); id++ {
			h := uint64(id)*0x9e3779b97f4a7c15 + 1
			h ^= h >> 29
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Float64Builder).Append(float64(h%1_000_003) / 1_000_003)
			b.Field(2).(*array.Float64Builder).Append(float64(h%999_983) / 999_983)
			s := fmt.Sprintf("%016x%04d", h, id%10000)
			b.Field(3).(*array.StringBuilder).Append(s[:10+h%11])
			b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("class-%d", id*10/n))
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
