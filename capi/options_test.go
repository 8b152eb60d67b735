//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
)

// TestStreamOptionsCarryEveryOption: each option of the ABI's JSON reaches
// stream.Options under its own field.
func TestStreamOptionsCarryEveryOption(t *testing.T) {
	var o openOptions
	js := `{"urls":["u"],"format":"avro","shuffle":true,"shuffle_memory":123456,"shuffle_passes":3,"header":true,"null_padding":true}`
	if err := decodeStrict([]byte(js), &o); err != nil {
		t.Fatal(err)
	}
	so, err := o.streamOptions()
	if err != nil {
		t.Fatal(err)
	}
	if so.Format != "avro" || so.ShuffleMemory != 123456 || so.ShufflePasses != 3 || !so.Shuffle {
		t.Fatalf("format %q, shuffle memory %d, passes %d", so.Format, so.ShuffleMemory, so.ShufflePasses)
	}
	if !o.Header || !o.NullPadding {
		t.Fatal("header and null_padding not decoded")
	}
	for _, js := range []string{
		`{"urls":["u"],"format":"orcish"}`,
		`{"urls":["u"],"header":true,"no_header":true}`,
		`{"urls":["u"],"quote":"ab"}`,
		`{"urls":["u"],"escape":"none"}`,
		`{"urls":["u"],"comment":"//"}`,
	} {
		if _, err := openDataset([]byte(js)); kindOf(err) != "usage" {
			t.Errorf("%s: %v (kind %s), want usage", js, err, kindOf(err))
		}
	}
}

// avroSchema is exampledata's schema in Avro.
const avroSchema = `{"type": "record", "name": "r", "fields": [
	{"name": "id", "type": "long"}, {"name": "label", "type": "long"},
	{"name": "x", "type": "double"}, {"name": "s", "type": "string"}]}`

// readRows reads every row of a handle's epoch as id, label, x, s.
func readRows(t *testing.T, id int64) [][4]any {
	t.Helper()
	h, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	var out [][4]any
	for {
		b, err := h.next(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return out
		}
		var vals [4][]any
		for c := range 4 {
			col := b.Column(c)
			for r := range col.Len() {
				vals[c] = append(vals[c], col.GetOneForMarshal(r))
			}
		}
		for r := range vals[0] {
			out = append(out, [4]any{vals[0][r], vals[1][r], vals[2][r], vals[3][r]})
		}
		b.Release()
	}
}

// TestAvroFiles: .avro files are read by name, and any file by format
// "avro", as the same rows as the Parquet files they were written from.
func TestAvroFiles(t *testing.T) {
	dir := writeData(t)
	pq := openJSON(t, map[string]any{"urls": []string{dir}, "batch_size": 333})
	want := readRows(t, pq)
	if err := closeHandle(pq); err != nil {
		t.Fatal(err)
	}
	avroDir, datDir := filepath.Join(t.TempDir(), "avro"), filepath.Join(t.TempDir(), "dat")
	for _, d := range []string{avroDir, datDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	half := len(want) / 2
	for i, part := range [][][4]any{want[:half], want[half:]} {
		writeAvroRows(t, filepath.Join(avroDir, fmt.Sprintf("p%d.avro", i)), part)
		writeAvroRows(t, filepath.Join(datDir, fmt.Sprintf("p%d.dat", i)), part)
	}
	for _, o := range []map[string]any{
		{"urls": []string{avroDir}, "batch_size": 333},
		{"urls": []string{datDir}, "batch_size": 333, "format": "avro"},
	} {
		id := openJSON(t, o)
		got := readRows(t, id)
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || !slices.Equal(got, want) {
			t.Fatalf("%v: %d rows differ from the Parquet files' %d", o, len(got), len(want))
		}
	}
}

func writeAvroRows(t *testing.T, path string, rows [][4]any) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ocf.NewWriter(f, twmb.MustParse(avroSchema), ocf.WithCodec(ocf.SnappyCodec()), ocf.WithBlockCount(300))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Encode(map[string]any{"id": r[0], "label": r[1], "x": r[2], "s": r[3]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEstimate: sluice_estimate's figures are the dataset's Estimate, the
// peak for its shuffle; a mix has none.
func TestEstimate(t *testing.T) {
	dir := writeData(t)
	for _, shuffle := range []bool{true, false} {
		id := openJSON(t, map[string]any{"urls": []string{dir}, "shuffle": shuffle, "shuffle_window": 500})
		h, _ := lookup(id)
		got, err := h.estimate()
		if err != nil {
			t.Fatal(err)
		}
		e := h.ds.Estimate()
		if got.WindowRows != 500 || got.Windows != e.Windows || got.MaxRows != e.MaxRows || got.Mixing != e.Mixing ||
			got.RowBytes != e.RowBytes || got.PeakBytes != e.PeakBytes(shuffle) || got.PeakBytes == 0 || got.MixingBatches == 0 {
			t.Fatalf("shuffle %v: %+v, want %+v", shuffle, got, e)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"sources": []map[string]any{{"dataset": id, "weight": 1}}})
		m, err := openMix(b)
		if err != nil {
			t.Fatal(err)
		}
		hm, _ := lookup(m)
		if _, err := hm.estimate(); kindOf(err) != "usage" {
			t.Fatalf("estimate of a mix: %v", err)
		}
		if err := closeHandle(m); err != nil {
			t.Fatal(err)
		}
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDialectOptions: quote, escape and comment reach the CSV driver, which
// reads a file with them instead of what it would detect.
func TestDialectOptions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(path, []byte("id,text\n1,\"a\\\"b\"\n2,c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for js, want := range map[string]string{
		`{"urls":["u"]}`: `delimiter ',', quote '"', escape '\\', comment none, header`,
		`{"urls":["u"],"quote":"'","escape":"'","comment":";"}`: `delimiter ',', quote '\'', escape doubled quote, comment ';', header`,
		`{"urls":["u"],"quote":"none","comment":"none"}`:        `delimiter ',', quote none, escape none, comment none, header`,
	} {
		var o openOptions
		if err := decodeStrict([]byte(js), &o); err != nil {
			t.Fatal(err)
		}
		so, err := o.streamOptions()
		if err != nil {
			t.Fatal(err)
		}
		ds, err := formats.Plan(t.Context(), []string{path}, formats.PlanOptions{Formats: so.Formats})
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		got := text.Dialect(ds.Fragments[0])
		ds.Close()
		if got != want {
			t.Errorf("%s: the file reads as %q, want %q", js, got, want)
		}
	}
}
