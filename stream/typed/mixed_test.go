package typed_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
	"github.com/sluicedata/sluice/stream/typed"
)

// A dataset decodes through its transform goroutines; a mix, which has
// none, on the loop's.
var _ typed.Mapper = (*stream.Dataset)(nil)

// outMix mixes two synth datasets, 70:30, over the same schema.
func outMix(t *testing.T, dirA, dirB string) *stream.Mixed {
	t.Helper()
	o := func(dir string) stream.Options {
		o := outOptions(t, dir)
		o.Shuffle, o.NumSplits = true, 2
		return o
	}
	m, err := stream.Mix([]stream.MixSource{
		{Dataset: outOpen(t, o(dirA)), Weight: 0.7},
		{Dataset: outOpen(t, o(dirB)), Weight: 0.3},
	}, stream.MixOptions{Seed: 5, BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Structs, Rows and Matrices over a *stream.Mixed yield the batches of its
// Batches, in its order, with its values; breaking out keeps the position.
func TestOutputsOfAMix(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	if err := synth.WriteDir(dirA, synth.Spec{Files: 2, RowsPerFile: 700, RowGroupRows: 100, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteDir(dirB, synth.Spec{Files: 1, RowsPerFile: 500, RowGroupRows: 100, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	if _, ok := any(outMix(t, dirA, dirB)).(typed.Mapper); ok {
		t.Fatal("a mix is a Mapper: this test no longer covers decoding on the loop's goroutine")
	}
	want := outBatchRows(t, outMix(t, dirA, dirB))
	if len(want) < 10 {
		t.Fatalf("only %d batches", len(want))
	}
	ctx := context.Background()

	m := outMix(t, dirA, dirB)
	var got [][]outSynthRow
	for rows, err := range typed.Structs[outSynthRow](ctx, m) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows)
		if len(got) == 3 {
			break
		}
	}
	for rows, err := range typed.Structs[outSynthRow](ctx, m) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Structs of a mix, with a break, differs from its Batches (%d and %d batches)", len(got), len(want))
	}

	i := 0
	for rows, err := range typed.Rows(ctx, outMix(t, dirA, dirB)) {
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want[i]) {
			t.Fatalf("Rows batch %d has %d rows, want %d", i, len(rows), len(want[i]))
		}
		for r, row := range rows {
			w := want[i][r]
			if len(row) != 4 || row["id"] != w.ID || row["label"] != w.Label || row["x"] != w.X || row["s"] != w.S {
				t.Fatalf("Rows batch %d row %d = %v, want %+v", i, r, row, w)
			}
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("Rows yielded %d batches, want %d", i, len(want))
	}

	i = 0
	for mat, err := range typed.Matrices(ctx, outMix(t, dirA, dirB), []string{"x", "id"}) {
		if err != nil {
			t.Fatal(err)
		}
		if mat.Rows != len(want[i]) || !slices.Equal(mat.Columns, []string{"x", "id"}) {
			t.Fatalf("Matrices batch %d: %d rows, columns %v", i, mat.Rows, mat.Columns)
		}
		for r, w := range want[i] {
			if row := mat.Row(r); row[0] != float32(w.X) || row[1] != float32(w.ID) {
				t.Fatalf("Matrices batch %d row %d = %v, want %+v", i, r, row, w)
			}
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("Matrices yielded %d batches, want %d", i, len(want))
	}
}

// Over a mix, a mapping error comes first and alone, and a null into a
// non-pointer field names the column, the row and the batch of the loop.
func TestOutputsOfAMixErrors(t *testing.T) {
	dir := outWriteTyped(t)
	ctx := context.Background()
	n := 0
	for _, err := range typed.Matrices(ctx, outMix(t, dir, dir), []string{"name"}) {
		n++
		if !errors.Is(err, typed.ErrOutputMapping) {
			t.Fatalf("got %v, want ErrOutputMapping", err)
		}
	}
	if n != 1 {
		t.Fatalf("%d values, want 1", n)
	}
	type row struct {
		ID int64 `sluice:"id"`
		NI int64 `sluice:"ni"`
	}
	var got error
	for _, err := range typed.Structs[row](ctx, outMix(t, dir, dir)) {
		if err != nil {
			got = err
			break
		}
	}
	if !errors.Is(got, typed.ErrNullValue) {
		t.Fatalf("got %v, want ErrNullValue", got)
	}
	for _, want := range []string{`column "ni"`, "field NI", "batch 0 of the loop"} {
		if !strings.Contains(got.Error(), want) {
			t.Fatalf("error %q does not contain %q", got, want)
		}
	}
}
