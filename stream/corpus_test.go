package stream

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestCorpusStreamsWhole: every small file of the shared corpus that
// opens and reads a row at a time (the reference: no batch spans two row
// groups, none is gathered) streams the same rows in batches of 37 that
// span row groups (joined), in the same order, and shuffled in small
// windows (gathered) as the same rows. Every column type that other
// writers use, unions, maps and structs in lists among them, goes through
// joins and gathers: a type they cannot handle fails here, not in a
// user's shuffled epoch.
func TestCorpusStreamsWhole(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for _, o := range recycleCorpus(t) {
		f := filepath.Base(o.URLs[0])
		ref := o
		ref.Shuffle, ref.BatchSize = false, 1
		want, err := streamRows(ctx, ref, 20_000)
		if err != nil {
			continue // a file sluice refuses, or too many rows to read one at a time
		}
		seq := o
		seq.Shuffle, seq.BatchSize = false, 37
		got, err := streamRows(ctx, seq, -1)
		if err != nil {
			t.Errorf("%s in batches of 37: %v", f, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s in batches of 37: rows differ from those read one at a time", f)
		}
		shuffled := o
		shuffled.BatchSize = 37
		if got, err = streamRows(ctx, shuffled, -1); err != nil {
			t.Errorf("%s shuffled: %v", f, err)
			continue
		}
		slices.Sort(got)
		sorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, sorted) {
			t.Errorf("%s shuffled: not the rows read one at a time", f)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d corpus files checked", checked)
	}
}

// streamRows is one epoch's rows as text (every column's ValueStr), or an
// error where it fails or holds more than most rows (most < 0: no bound).
func streamRows(ctx context.Context, o Options, most int) ([]string, error) {
	ds, err := Open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	if most >= 0 && ds.Splits()[0].Rows > int64(most) {
		return nil, errTooMany
	}
	var rows []string
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return nil, err
		}
		rows = append(rows, rowText(b)...)
	}
	return rows, nil
}

var errTooMany = errorString("too many rows")

type errorString string

func (e errorString) Error() string { return string(e) }

func rowText(b arrow.RecordBatch) []string {
	out := make([]string, b.NumRows())
	var sb strings.Builder
	for i := range out {
		sb.Reset()
		for _, c := range b.Columns() {
			sb.WriteString(c.ValueStr(i))
			sb.WriteByte('|')
		}
		out[i] = sb.String()
	}
	return out
}
