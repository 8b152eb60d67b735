package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
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
	checked := 0
	for _, o := range recycleCorpus(t) {
		if streamsWhole(t, o) {
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("only %d corpus files checked", checked)
	}
}

// TestNestedUnionsStreamWhole: Avro unions at the top, inside a record
// and inside an array, in two files (a batch of 37 spans them), stream
// whole sequentially and shuffled.
func TestNestedUnionsStreamWhole(t *testing.T) {
	dir := t.TempDir()
	schema := twmb.MustParse(`{"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"},
		{"name": "u", "type": ["null", "int", "string"]},
		{"name": "lu", "type": {"type": "array", "items": ["int", "string"]}},
		{"name": "ru", "type": {"type": "record", "name": "in", "fields": [{"name": "x", "type": ["long", "string"]}]}}]}`)
	for f := range 2 {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d.avro", f)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := ocf.NewWriter(fh, schema, ocf.WithBlockCount(300))
		if err != nil {
			t.Fatal(err)
		}
		for i := f * 3000; i < (f+1)*3000; i++ {
			var u any
			if i%3 == 1 {
				u = map[string]any{"int": int32(i)}
			} else if i%3 == 2 {
				u = map[string]any{"string": fmt.Sprint("s", i)}
			}
			var x any = map[string]any{"long": int64(i)}
			if i%2 == 0 {
				x = map[string]any{"string": "e"}
			}
			lu := []any{map[string]any{"int": int32(i)}, map[string]any{"string": "q"}}[:i%3]
			if err := w.Encode(map[string]any{"id": int64(i), "u": u, "lu": lu, "ru": map[string]any{"x": x}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	o := Options{URLs: []string{dir}, Shuffle: true, Seed: 7, ShuffleWindow: 256, Formats: []formats.Format{avro.Format{}}}
	if !streamsWhole(t, o) {
		t.Fatal("the Avro files did not read a row at a time")
	}
}

// streamsWhole checks, for the file or files of o, that the rows read a
// row at a time (the reference: no batch spans two row groups, none is
// gathered) come the same in batches of 37 (joined), in the same order,
// and shuffled (gathered). It reports false where the reference read
// fails (a file sluice refuses) or holds more than 20,000 rows.
func streamsWhole(t *testing.T, o Options) bool {
	t.Helper()
	ctx := context.Background()
	f := filepath.Base(o.URLs[0])
	ref := o
	ref.Shuffle, ref.BatchSize = false, 1
	want, err := streamRows(ctx, ref, 20_000)
	if err != nil {
		return false
	}
	seq := o
	seq.Shuffle, seq.BatchSize = false, 37
	got, err := streamRows(ctx, seq, -1)
	if err != nil {
		t.Errorf("%s in batches of 37: %v", f, err)
		return true
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s in batches of 37: rows differ from those read one at a time", f)
	}
	shuffled := o
	shuffled.Shuffle, shuffled.BatchSize = true, 37
	if got, err = streamRows(ctx, shuffled, -1); err != nil {
		t.Errorf("%s shuffled: %v", f, err)
		return true
	}
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s shuffled: not the rows read one at a time", f)
	}
	return true
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
