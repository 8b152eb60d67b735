package avro_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/stream"
)

// The stream's guarantees over Avro files, whose units (runs of blocks)
// splits cut: every row once across ranks, at every world size, and a
// state taken after any batch resumes exactly.

func avroStreamData(t *testing.T) (string, int64) {
	dir := t.TempDir()
	var id int64
	for f, n := range []int{2500, 0, 701, 1, 3100} {
		rows := textRows(n, 30)
		for _, r := range rows {
			r["id"] = id
			id++
		}
		writeOCF(t, dir, fmt.Sprintf("part-%d.avro", f), textSchema, rows, ocf.WithBlockCount(97), ocf.WithCodec(ocf.SnappyCodec()))
	}
	return dir, id
}

func avroStreamOptions(t *testing.T, dir string) stream.Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return stream.Options{
		URLs: []string{dir}, Formats: []formats.Format{avro.Format{UnitBytes: 16 << 10}},
		Columns: []string{"id"}, BatchSize: 64, ShuffleWindow: 500, ChunkBytes: 8 << 10, Seed: 42, Allocator: mem,
	}
}

func takeBatches(t *testing.T, o stream.Options, st *stream.State, limit int) ([][]int64, stream.State) {
	t.Helper()
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if st != nil {
		if err := ds.LoadStateDict(*st); err != nil {
			t.Fatal(err)
		}
	}
	var out [][]int64
	if limit == 0 {
		return nil, ds.StateDict()
	}
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(b.Column(0).(*array.Int64).Int64Values()))
		if len(out) == limit {
			break
		}
	}
	return out, ds.StateDict()
}

func TestStreamExactlyOnce(t *testing.T) {
	dir, total := avroStreamData(t)
	orders := map[bool][]int64{}
	for _, shuffle := range []bool{false, true} {
		var single []int64
		for _, world := range []int{1, 2, 4} {
			var all []int64
			for rank := range world {
				o := avroStreamOptions(t, dir)
				o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, 4, world, rank
				bs, _ := takeBatches(t, o, nil, -1)
				for _, b := range bs {
					all = append(all, b...)
				}
			}
			if world == 1 {
				single = slices.Clone(all)
			}
			slices.Sort(all)
			if int64(len(all)) != total || all[0] != 0 || all[len(all)-1] != total-1 || len(slices.Compact(all)) != int(total) {
				t.Fatalf("shuffle=%t world=%d: %d rows, want each of %d once", shuffle, world, len(all), total)
			}
		}
		orders[shuffle] = single
	}
	if slices.Equal(orders[false], orders[true]) {
		t.Fatal("a shuffled epoch has the order of an unshuffled one")
	}
}

func TestStreamResumeAnywhere(t *testing.T) {
	dir, _ := avroStreamData(t)
	rng := rand.New(rand.NewPCG(9, 10))
	o := avroStreamOptions(t, dir)
	o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 4, 2, 1
	full, _ := takeBatches(t, o, nil, -1)
	for range 4 {
		k := rng.IntN(len(full) + 1)
		head, st := takeBatches(t, o, nil, k)
		tail, _ := takeBatches(t, o, &st, -1)
		got := append(head, tail...)
		if fmt.Sprint(got) != fmt.Sprint(full) {
			t.Fatalf("resumed after %d batches of %d: the rows differ", k, len(full))
		}
	}
}
