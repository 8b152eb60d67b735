package stream

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// shuffleBenchSpec is the bench's data at a quarter of its rows: row groups
// of 32k rows, four columns with a string.
var shuffleBenchSpec = synth.Spec{Files: 4, RowsPerFile: 262_144, RowGroupRows: 131_072, Seed: 1}

// benchmarkEpoch streams one epoch of the shuffle benchmark data with o,
// every column: go test ./stream -run '^$' -bench Epoch -cpuprofile cpu.out
func benchmarkEpoch(b *testing.B, o Options) {
	o.URLs = []string{writeDataset(b, shuffleBenchSpec)}
	var rows int64
	for b.Loop() {
		ds, err := Open(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		rows = 0
		for batch, err := range ds.Batches(context.Background()) {
			if err != nil {
				b.Fatal(err)
			}
			rows += batch.NumRows()
		}
		ds.Close()
	}
	if rows != shuffleBenchSpec.Rows() {
		b.Fatalf("streamed %d rows of %d", rows, shuffleBenchSpec.Rows())
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkEpochSequential(b *testing.B) { benchmarkEpoch(b, Options{}) }

func BenchmarkEpochShuffled(b *testing.B) { benchmarkEpoch(b, Options{Shuffle: true, Seed: 42}) }

func BenchmarkEpochShuffledClump16(b *testing.B) {
	benchmarkEpoch(b, Options{Shuffle: true, Seed: 42, ClumpSize: 16})
}

func BenchmarkEpochNumericSequential8192(b *testing.B) {
	benchmarkEpoch(b, Options{Columns: []string{"id", "x", "label"}, BatchSize: 8192})
}

func BenchmarkEpochNumericSequential1024(b *testing.B) {
	benchmarkEpoch(b, Options{Columns: []string{"id", "x", "label"}, BatchSize: 1024})
}

func BenchmarkEpochNumericShuffled1024(b *testing.B) {
	benchmarkEpoch(b, Options{Columns: []string{"id", "x", "label"}, Shuffle: true, Seed: 42, BatchSize: 1024})
}

func BenchmarkEpochNumericShuffled8192(b *testing.B) {
	benchmarkEpoch(b, Options{Columns: []string{"id", "x", "label"}, Shuffle: true, Seed: 42, BatchSize: 8192})
}
