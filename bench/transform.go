package main

import (
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// burn is the CPU-heavy, deterministic transform: rounds passes of an
// integer hash over the id and x columns of a batch. It allocates nothing
// and touches no shared state, so it scales with the goroutines given it
// and nothing else.
func burn(ids []int64, xs []float64, rounds int) uint64 {
	h := uint64(len(ids))
	for range rounds {
		for i, id := range ids {
			h = mix(h ^ uint64(id) ^ math.Float64bits(xs[i]))
		}
	}
	return h
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// burnTransform returns the transform for batches whose schema has int64
// "id" and float64 "x" columns.
func burnTransform(schema *arrow.Schema, rounds int) func(arrow.RecordBatch) uint64 {
	idCol := schema.FieldIndices("id")[0]
	xCol := schema.FieldIndices("x")[0]
	return func(b arrow.RecordBatch) uint64 {
		ids := b.Column(idCol).(*array.Int64).Int64Values()
		xs := b.Column(xCol).(*array.Float64).Float64Values()
		return burn(ids, xs, rounds)
	}
}

// calibrateBurn finds the rounds that make burn cost about target on a
// batch of batchRows rows on this machine, from the fastest of several
// timings (so a busy neighbour makes the transform lighter, never heavier).
func calibrateBurn(batchRows int, target time.Duration) (rounds int, perBatch time.Duration) {
	ids := make([]int64, batchRows)
	xs := make([]float64, batchRows)
	for i := range ids {
		ids[i] = int64(i)
		xs[i] = float64(i) / 3
	}
	const probe = 16
	best := time.Duration(math.MaxInt64)
	var sink uint64
	for range 5 {
		start := time.Now()
		sink ^= burn(ids, xs, probe)
		best = min(best, time.Since(start))
	}
	if sink == 1 {
		best++ // keep sink alive
	}
	perRound := max(best/probe, 1)
	rounds = max(int(target/perRound), 1)
	return rounds, perRound * time.Duration(rounds)
}
