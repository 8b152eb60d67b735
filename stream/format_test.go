package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
)

// formatCSV is a CSV file's text: rows ids from..from+n, with a name and a
// score that are functions of the id (a quoted comma among the names).
func formatCSV(from, n int) string {
	var b strings.Builder
	b.WriteString("id,name,score\n")
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "%d,\"n,%d\",%d.5\n", i, i, i*3)
	}
	return b.String()
}

// formatRows reads the whole dataset in storage order, checking every
// value against formatCSV's, and returns the ids.
func formatRows(t *testing.T, o Options) []int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	o.Allocator = mem
	ds, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var ids []int64
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		id := b.Column(0).(*array.Int64)
		name := b.Column(1).(*array.String)
		score := b.Column(2).(*array.Float64)
		for i := range int(b.NumRows()) {
			v := id.Value(i)
			if name.Value(i) != fmt.Sprintf("n,%d", v) || score.Value(i) != float64(v*3)+0.5 {
				t.Fatalf("row %d: name %q, score %v", v, name.Value(i), score.Value(i))
			}
			ids = append(ids, v)
		}
	}
	return ids
}

func seq(from, n int) []int64 {
	var out []int64
	for i := from; i < from+n; i++ {
		out = append(out, int64(i))
	}
	return out
}

// TestFormatNamesTheDriver: CSV files named .tbl, .dat, .txt or nothing
// read with Options.Format, each named explicitly and in a directory;
// without it they fail with an error that says they look like text and
// names the option.
func TestFormatNamesTheDriver(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a.tbl", "b.dat", "c.txt", "d"}
	for i, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(formatCSV(i*100, 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644) // still skipped in a listing
	for i, n := range names {
		url := filepath.Join(dir, n)
		got := formatRows(t, Options{URLs: []string{url}, Format: "csv"})
		if want := seq(i*100, 100); !slices.Equal(got, want) {
			t.Errorf("%s: ids %v, want %v", n, got, want)
		}
		_, err := Open(context.Background(), Options{URLs: []string{url}})
		if err == nil {
			t.Fatalf("%s without Format: no error", n)
		}
		for _, want := range []string{n, "look like text", "Options.Format", `"csv"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s without Format: the error does not say %q: %v", n, want, err)
			}
		}
	}
	got := formatRows(t, Options{URLs: []string{dir}, Format: "csv"})
	if want := seq(0, 400); !slices.Equal(got, want) {
		t.Errorf("the directory: ids %v, want %v", got, want)
	}
	// A tiny file, shorter than any Parquet file, says the same.
	tiny := filepath.Join(dir, "tiny.tbl")
	os.WriteFile(tiny, []byte("a\n1\n"), 0o644)
	if _, err := Open(context.Background(), Options{URLs: []string{tiny}}); err == nil || !strings.Contains(err.Error(), "Options.Format") {
		t.Errorf("tiny file: %v", err)
	}
	// A binary file says nothing of text.
	bin := filepath.Join(dir, "bin.dat")
	os.WriteFile(bin, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d"), 0o644)
	if _, err := Open(context.Background(), Options{URLs: []string{bin}}); err == nil || strings.Contains(err.Error(), "text") {
		t.Errorf("binary file: %v", err)
	}
}

// TestFormatTakesFormatsDriver: with Formats given, Format picks the
// driver of that name from it, with that driver's options.
func TestFormatTakesFormatsDriver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.tbl")
	var b strings.Builder
	b.WriteString("id|name|score\n")
	for i := range 50 {
		fmt.Fprintf(&b, "%d|n,%d|%d.5\n", i, i, i*3) // the comma is no delimiter here
	}
	os.WriteFile(path, []byte(b.String()), 0o644)
	got := formatRows(t, Options{URLs: []string{path}, Format: "csv", Formats: append([]formats.Format{parquet.Format{}}, text.All(text.Options{Delimiter: '|'})...)})
	if want := seq(0, 50); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}

func TestFormatRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.tbl")
	os.WriteFile(path, []byte(formatCSV(0, 10)), 0o644)
	for _, c := range []struct {
		name string
		o    Options
		want []string
	}{
		{"unknown", Options{URLs: []string{path}, Format: "xlsx"}, []string{`Options.Format "xlsx" is not a known format`, "parquet, orc, avro, csv, tsv, jsonl, json"}},
		{"unknown with Formats", Options{URLs: []string{path}, Format: "xlsx", Formats: []formats.Format{parquet.Format{}}}, []string{`"xlsx" is not a known format`, "parquet, orc, avro, csv, tsv, jsonl, json", "Options.Formats (parquet)"}},
		{"conflict", Options{URLs: []string{path}, Format: "csv", Formats: []formats.Format{parquet.Format{}}}, []string{`Options.Format "csv" conflicts with Options.Formats`, "has parquet"}},
		{"with Plan", Options{Format: "csv", Plan: func(ctx context.Context, po formats.PlanOptions) (*formats.Scan, error) {
			return formats.Plan(ctx, []string{path}, po)
		}}, []string{"Options.Format", "Options.Plan"}},
	} {
		_, err := Open(context.Background(), c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", c.name, w, err)
			}
		}
	}
}

// TestFormatFingerprint: a file Format gives another driver than its name
// picks is another plan; a file it gives the same driver is the same.
func TestFormatFingerprint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.csv")
	os.WriteFile(path, []byte(formatCSV(0, 10)), 0o644)
	fp := func(format string) string {
		ds := open(t, Options{URLs: []string{path}, Format: format, Formats: text.All(text.Options{})})
		return ds.Fingerprint()
	}
	none, csv, tsv := fp(""), fp("csv"), fp("tsv")
	if none != csv {
		t.Errorf("Format csv on a .csv file changed the fingerprint: %s, %s", none, csv)
	}
	if none == tsv {
		t.Errorf("Format tsv on a .csv file kept the fingerprint %s", none)
	}
}
