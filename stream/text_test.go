package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/gzip"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/split"
)

// These tests stream text files, whose row counts are unknown until read
// (or known after a counting pass): CSV and JSON Lines files cut into many
// byte ranges, gzip files read whole, a JSON array file, with empty files
// and records of very different lengths, ids numbering all rows in order.

// writeText writes the value harness's data (internal/testkit/valuecheck: id, i32
// and text, strings of 0 to 200 bytes that CSV and JSON must escape) as
// CSV files with empty ones among them, gzip files read whole, JSON Lines
// and a JSON array file, ids numbering all rows in order, and returns the
// directory and the row count.
func writeText(t testing.TB) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	cols := vc.Pick(textColumns...)
	var id int64
	rows := func(n int, csv bool) []byte {
		var b bytes.Buffer
		var err error
		if csv {
			err = vc.CSV(&b, cols, id, int64(n), true)
		} else {
			err = vc.JSONLines(&b, cols, id, int64(n))
		}
		if err != nil {
			t.Fatal(err)
		}
		id += int64(n)
		return b.Bytes()
	}
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gz := func(data []byte) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
		return b.Bytes()
	}
	put("a.csv", rows(700, true))
	put("b.csv", rows(0, true))
	put("c.csv.gz", gz(rows(300, true)))
	put("d.csv", rows(1, true))
	put("e.csv", rows(1200, true))
	jl := rows(500, false)
	put("f.jsonl", jl)
	put("g.jsonl.gz", gz(rows(250, false)))
	var arr bytes.Buffer
	arr.WriteString("[")
	for i, line := range bytes.Split(bytes.TrimSpace(rows(90, false)), []byte("\n")) {
		if i > 0 {
			arr.WriteString(",\n")
		}
		arr.Write(line)
	}
	arr.WriteString("]")
	put("h.json", arr.Bytes())
	return dir, id
}

var textColumns = []string{"id", "i32", "text"}

func textOptions(t testing.TB, dir string, count bool) Options {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return Options{
		URLs:          []string{dir},
		Formats:       text.All(text.Options{UnitBytes: 2 << 10, Count: count}),
		Columns:       textColumns,
		BatchSize:     64,
		ShuffleWindow: 500,
		ChunkBytes:    4 << 10,
		Seed:          42,
		Allocator:     mem,
	}
}

// Exactly once across ranks and the same split sequences at world sizes 1
// to 8, counts unknown and counted.
func TestTextExactlyOnceAndElastic(t *testing.T) {
	dir, total := writeText(t)
	for _, count := range []bool{false, true} {
		for _, shuffle := range []bool{false, true} {
			t.Run(fmt.Sprintf("count=%t/shuffle=%t", count, shuffle), func(t *testing.T) {
				const splits = 8
				vc.Elastic(t, splits, sample.Spread([]int{1, 2, 4, 8}, 2), vc.IDs(total), func(world, rank int) map[int][]int64 {
					o := textOptions(t, dir, count)
					o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = shuffle, splits, world, rank
					bs, _ := consume(t, open(t, o), -1)
					fullBatches(t, bs, o.BatchSize)
					return bySplit(bs, nil)
				})
			})
		}
	}
}

// A state taken after any batch resumes exactly; states merged across
// ranks resume at another world size.
func TestTextResume(t *testing.T) {
	dir, total := writeText(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, count := range []bool{false, true} {
		o := textOptions(t, dir, count)
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 6, 3, 1
		full, _ := consume(t, open(t, o), -1)
		for range sample.Count(5, 2) {
			k := r.IntN(len(full) + 1)
			head, st := consume(t, open(t, o), k)
			second := open(t, o)
			if err := second.LoadStateDict(st); err != nil {
				t.Fatal(err)
			}
			tail, _ := consume(t, second, -1)
			got := append(head, tail...)
			if len(got) != len(full) {
				t.Fatalf("count=%t resume at %d: %d batches, want %d", count, k, len(got), len(full))
			}
			for i := range got {
				if !slices.Equal(got[i].ids, full[i].ids) {
					t.Fatalf("count=%t resume at %d: batch %d differs", count, k, i)
				}
			}
		}
		// Elastic: 6 ranks, then 3, then 2, then 1.
		base := textOptions(t, dir, count)
		base.Shuffle, base.NumSplits = true, 6
		exactlyOnce(t, resumeAcross(t, base, []int{6, 3, 2, 1}, 4, r), total)
	}
}

// DropRemainder is refused without counts and honoured after a counting
// pass.
func TestTextDropRemainder(t *testing.T) {
	dir, total := writeText(t)
	o := textOptions(t, dir, false)
	o.DropRemainder, o.NumSplits, o.WorldSize = true, 4, 4
	ds, err := Open(context.Background(), o)
	if err == nil {
		ds.Close()
		t.Fatal("DropRemainder was accepted with unknown row counts")
	}
	if !errors.Is(err, split.ErrUnknownRows) {
		t.Fatalf("got %v, want ErrUnknownRows", err)
	}
	var counts []int
	var ids []int64
	for rank := range 4 {
		o := textOptions(t, dir, true)
		o.Shuffle, o.DropRemainder, o.NumSplits, o.WorldSize, o.Rank = true, true, 4, 4, rank
		bs, _ := consume(t, open(t, o), -1)
		var n int
		for _, b := range bs {
			n += len(b.ids)
		}
		counts = append(counts, n)
		ids = append(ids, allIDs(bs)...)
	}
	if slices.Min(counts) != slices.Max(counts) {
		t.Fatalf("rows per rank differ with DropRemainder: %v", counts)
	}
	if dropped := total - int64(len(ids)); dropped < 0 || dropped >= 4 {
		t.Fatalf("DropRemainder dropped %d rows, want fewer than 4", dropped)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(ids) {
		t.Fatal("a row came twice")
	}
}

// Text files and Parquet files mix in one dataset only through formats
// the caller names: the text drivers do not claim Parquet files.
var _ formats.Format = text.New(text.CSV, text.Options{})

// With BadRowsSkip the rows that do not fit are left out the same way at
// every world size, and every good row comes exactly once.
func TestTextSkipBadRowsExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,label\n")
	var good []int64
	for i := range 3000 {
		switch {
		case i%97 == 5:
			fmt.Fprintf(&b, "x%d,%d\n", i, i%10) // not an integer
		case i%89 == 7:
			fmt.Fprintf(&b, "%d,%d,extra\n", i, i%10) // ragged
		default:
			fmt.Fprintf(&b, "%d,%d\n", i, i%10)
			good = append(good, int64(i))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The sample would make id a string column: the schema says int64.
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}
	schema := text.Options{UnitBytes: 1 << 10, BadRows: text.BadRowsSkip, Schema: arrow.NewSchema(fields, nil)}
	vc.Elastic(t, 4, []int{1, 2, 4}, good, func(world, rank int) map[int][]int64 {
		o := textOptions(t, dir, false)
		o.Formats = text.All(schema)
		o.Columns = []string{"id", "label"}
		o.Shuffle, o.NumSplits, o.WorldSize, o.Rank = true, 4, world, rank
		return bySplit(first(consume(t, open(t, o), -1)), nil)
	})
}
