//go:build cgo && unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/cdata"

	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
)

var (
	benchDataOnce sync.Once
	benchDataDir  string
	benchDataErr  error
)

// benchData is the bench's dataset in small (4 files of 125,000 rows in
// row groups of 32,768, the bench's shape), or $SLUICE_BENCH_DATA, a
// folder of the bench's own (-data) to measure on the same files.
func benchData(b *testing.B) string {
	if d := os.Getenv("SLUICE_BENCH_DATA"); d != "" {
		return d
	}
	benchDataOnce.Do(func() {
		benchDataDir, benchDataErr = os.MkdirTemp("", "sluice-capi-bench")
		if benchDataErr == nil {
			benchDataErr = synth.WriteDir(benchDataDir, synth.Spec{Files: 4, RowsPerFile: 125_000, RowGroupRows: 32_768, Seed: 1})
		}
	})
	if benchDataErr != nil {
		b.Fatal(benchDataErr)
	}
	return benchDataDir
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPull is an epoch of numeric columns through the Go API (go)
// and through the C ABI as the Python package takes it (capi: groups of
// 32 batches, each run exported and released as a caller does), and the
// CPU seconds each costs the process (cpu-s/op): what the ABI adds to Go's
// own decoding.
func BenchmarkPull(b *testing.B) {
	dir := benchData(b)
	for _, shuffle := range []bool{false, true} {
		name := "sequential"
		if shuffle {
			name = "shuffled"
		}
		o := map[string]any{"urls": []string{dir}, "columns": []string{"id", "label", "x"}, "batch_size": 1024, "shuffle": shuffle, "seed": 42}
		b.Run(name+"/go", func(b *testing.B) {
			so := stream.Options{URLs: []string{dir}, Columns: []string{"id", "label", "x"}, BatchSize: 1024, Shuffle: shuffle, Seed: 42}
			cpu := cpuNow()
			for range b.N {
				ds, err := stream.Open(context.Background(), so)
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range ds.Batches(context.Background()) {
					if err != nil {
						b.Fatal(err)
					}
				}
				ds.Close()
			}
			b.ReportMetric((cpuNow()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
		b.Run(name+"/capi", func(b *testing.B) {
			js, _ := json.Marshal(o)
			arrays := make([]cdata.CArrowArray, 32)
			cpu := cpuNow()
			for range b.N {
				id, err := openDataset(js)
				if err != nil {
					b.Fatal(err)
				}
				h, _ := lookup(id)
				for {
					g, err := h.nextGroup(32, time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					if g == nil {
						break
					}
					for i, r := range g.runs {
						exportBatch(r, unsafe.Pointer(&arrays[i]))
					}
					for i := range g.runs {
						cdata.ReleaseCArrowArray(&arrays[i])
					}
				}
				closeHandle(id)
			}
			b.ReportMetric((cpuNow()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
