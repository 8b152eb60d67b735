package parquet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
)

// readFormat reads every row of path with p, in batches of batchRows, into
// a checked allocator.
func readFormat(ctx context.Context, path string, p parquet.Format, batchRows int) ([]arrow.RecordBatch, *memory.CheckedAllocator, error) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	batches, err := readInto(ctx, path, p, batchRows, mem)
	return batches, mem, err
}

// readInto reads every row of path with p, in batches of batchRows, into
// mem. On an error it returns the batches read before it.
func readInto(ctx context.Context, path string, p parquet.Format, batchRows int, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{p}})
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	var batches []arrow.RecordBatch
	for i, f := range ds.Fragments {
		err := ds.Read(ctx, i, ds.RowRange(i, 0, f.Rows), batchRows, mem, func(b arrow.RecordBatch) error {
			batches = append(batches, b)
			return nil
		})
		if err != nil {
			return batches, err
		}
	}
	return batches, nil
}

// The own decoder checks strings as it builds them (PLAIN values in bulk,
// a dictionary's entries once) and the driver passes over the columns it
// found valid: a string that is not UTF-8 must still fail the read with
// arrow-go's error, word for word, or be repaired as arrow-go's is. The
// strings are cut from valid text at any byte, so that neighbouring
// values are often valid together but not alone.
func TestFastDecodeInvalidUTF8(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("aé€😀b", 50)
	const unit = len("aé€😀b")
	for trial, c := range []struct {
		dict  bool
		nulls bool
		v2    bool
		bad   int  // 1 in bad values is cut from the text at any byte; 0: none
		split bool // the bad values are cut inside a character and followed by its rest
	}{
		{false, false, false, 0, false}, {false, true, true, 0, false}, {true, true, false, 0, false}, {true, false, true, 0, false},
		{false, false, false, 300, false}, {false, true, true, 500, false}, {true, true, false, 300, false}, {true, false, true, 40, false},
		{false, true, false, 7, false}, {true, true, true, 7, false},
		{false, false, false, 400, true}, {false, true, true, 500, true}, {true, true, false, 300, true},
	} {
		r := rand.New(rand.NewPCG(uint64(trial), 9))
		pending := ""
		col := genColumn{field: arrow.Field{Name: "s", Type: arrow.BinaryTypes.String}, make: func(b array.Builder, _ *rand.Rand, null bool) {
			if null {
				b.AppendNull()
				return
			}
			// Whole characters, so valid; from a few hundred, so that a
			// dictionary holds them.
			i := unit * r.IntN(40)
			s := text[i : i+unit*(1+r.IntN(3))]
			switch {
			case pending != "":
				s, pending = pending, ""
			case c.split && c.bad > 0 && r.IntN(c.bad) == 0:
				// From a character on, cut inside one, the rest of it
				// next: the two are valid together, not alone.
				j := unit*r.IntN(40) + []int{0, 1, 3, 6, 10}[r.IntN(5)]
				k := j + 1 + r.IntN(3)
				e := k
				for !utf8.RuneStart(text[e]) {
					e++
				}
				s, pending = text[j:k], text[k:e]
			case !c.split && c.bad > 0 && r.IntN(c.bad) == 0:
				j := r.IntN(len(text) - 8)
				s = text[j : j+r.IntN(4)]
			}
			b.(*array.StringBuilder).Append(s)
		}}
		enc := pq.Encodings.Plain
		if c.dict {
			enc = pq.Encodings.RLEDict
		}
		nulls := 0
		if c.nulls {
			nulls = 1
		}
		path := filepath.Join(dir, fmt.Sprintf("utf8_%d.parquet", trial))
		writeGenerated(t, path, []genColumn{col}, enc, compress.Codecs.Snappy, nulls, c.v2, 4000)
		for _, policy := range []parquet.InvalidUTF8{parquet.ErrorOnInvalidUTF8, parquet.ReplaceInvalidUTF8} {
			ctx := context.Background()
			before := parquet.FastChunks()
			fast, fmem, ferr := readFormat(ctx, path, parquet.Format{InvalidUTF8: policy}, 700)
			if parquet.FastChunks() == before {
				t.Fatalf("trial %d: the own decoder took no chunk", trial)
			}
			slow, _, serr := readFormat(ctx, path, parquet.Format{InvalidUTF8: policy, ArrowGoDecode: true}, 700)
			if fmt.Sprint(ferr) != fmt.Sprint(serr) {
				t.Errorf("trial %d policy %d: own decoder: %v; arrow-go: %v", trial, policy, ferr, serr)
			}
			if (ferr != nil) != (c.bad > 0 && policy == parquet.ErrorOnInvalidUTF8) {
				t.Errorf("trial %d policy %d: err = %v", trial, policy, ferr)
			}
			if ferr == nil {
				if err := sameBatches(fast, slow); err != nil {
					t.Errorf("trial %d policy %d: %v", trial, policy, err)
				}
			}
			releaseBatches(fast)
			releaseBatches(slow)
			if n := fmem.CurrentAlloc(); n != 0 {
				t.Errorf("trial %d: %d bytes outstanding", trial, n)
			}
		}
	}
}
