package formats_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// TestPlanByContent: a file named explicitly whose name no driver matches
// (.dat, .txt, .bin, none) is read by its bytes: Parquet, ORC and Avro by
// their magic, text as CSV, JSON Lines or JSON by its first bytes; bytes
// that are none of these go to the first driver, whose error names the
// file.
func TestPlanByContent(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shared := corpus.Dir(t)
	copyFile(filepath.Join(shared, "parquet-testing/data/alltypes_plain.parquet"), "a.dat")
	copyFile(filepath.Join(shared, "orc/examples/TestOrcFile.test1.orc"), "b")
	writeAvro(t, filepath.Join(dir, "c.bin"))
	for name, body := range map[string]string{
		"d.txt":   "id;name\n1;x\n2;y\n3;z\n",
		"e.log":   "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n",
		"f":       "[{\"id\":1},{\"id\":2},{\"id\":3}]",
		"g.json5": "{\n  \"id\": 1\n}\n{\n  \"id\": 2\n}\n{\"id\": 3}\n",
		"h.dat":   "\x00\x01\x02\x03\x04\x05\x06\x07",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := drivers.All(text.Options{})
	for name, want := range map[string]struct {
		format string
		rows   int64
	}{
		"a.dat": {"parquet", 8}, "b": {"orc", 2}, "c.bin": {"avro", 3},
		"d.txt": {"csv", 3}, "e.log": {"jsonl", 3}, "f": {"json", 3}, "g.json5": {"json", 3},
	} {
		ds, err := formats.Plan(context.Background(), []string{filepath.Join(dir, name)}, formats.PlanOptions{Formats: fs})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := ds.Fragments[0].Format; got != want.format {
			t.Errorf("%s: read as %s, want %s", name, got, want.format)
		}
		if got := countRows(t, ds); got != want.rows {
			t.Errorf("%s: %d rows, want %d", name, got, want.rows)
		}
		ds.Close()
	}
	_, err := formats.Plan(context.Background(), []string{filepath.Join(dir, "h.dat")}, formats.PlanOptions{Formats: fs})
	if err == nil || !strings.Contains(err.Error(), "h.dat") || !strings.Contains(err.Error(), "Parquet") {
		t.Errorf("binary h.dat: %v, want the Parquet driver's error naming it", err)
	}
	// A listing still takes only the files whose names a driver matches.
	ds, err := formats.Plan(context.Background(), []string{dir}, formats.PlanOptions{Formats: fs})
	if err == nil {
		defer ds.Close()
		if len(ds.Fragments) != 0 {
			t.Errorf("the directory: %d files, want none", len(ds.Fragments))
		}
	}
}

func countRows(t *testing.T, ds *formats.Scan) int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var n int64
	for i, f := range ds.Fragments {
		r := formats.Range{Start: -1, End: -1, EndUnit: len(f.Units)}
		if f.Rows >= 0 {
			r = ds.RowRange(i, 0, f.Rows)
		}
		err := ds.Read(context.Background(), i, r, 1024, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			n += b.NumRows()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func writeAvro(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ocf.NewWriter(f, twmb.MustParse(`{"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.Encode(map[string]any{"id": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPlanErrorNamesThePart: a file that planning cannot read is an error
// naming the file and the part planning reads of its format: the footer
// of Parquet, the first bytes a text format sniffs; never "footer" for a
// format that has none.
func TestPlanErrorNamesThePart(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"bad.csv.gz":   "not gzip at all",
		"bad.parquet":  "PAR1 not a footer PAR1",
		"bad.avro":     "Obj\x01 not an avro header",
		"bad.jsonl.gz": "\x1f\x8b broken",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, part := range map[string]string{"bad.csv.gz": "head", "bad.parquet": "footer", "bad.avro": "header", "bad.jsonl.gz": "head"} {
		path := filepath.Join(dir, name)
		_, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{Formats: drivers.All(text.Options{})})
		if err == nil {
			t.Fatalf("%s planned", name)
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, part) || (part != "footer" && strings.Contains(msg, "footer")) {
			t.Errorf("%s: %q, want the file and %q", name, msg, part)
		}
	}
}
