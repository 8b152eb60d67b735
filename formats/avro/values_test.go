package avro_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	vc "github.com/sluicedata/sluice/internal/testkit/valuecheck"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
)

// valueColumns are the value harness's columns Avro's types hold as they
// are (the filters read valuecheck.TextColumns among them).
var valueColumns = []string{"id", "i32", "i64", "f32", "f64", "unit", "b", "text", "tag", "bin"}

var avroOf = map[arrow.Type]string{
	arrow.INT32: "int", arrow.INT64: "long", arrow.FLOAT32: "float", arrow.FLOAT64: "double",
	arrow.BOOL: "boolean", arrow.STRING: "string", arrow.BINARY: "bytes",
}

// writeValues writes the rows of ids [from, from+n) of the value
// harness's columns to path, every column but id nullable, in blocks of
// blockRows.
func writeValues(t testing.TB, path string, from, n int64, blockRows int, codec ocf.Codec) {
	t.Helper()
	cols := vc.Pick(valueColumns...)
	var fields []string
	for _, c := range cols {
		typ := fmt.Sprintf("%q", avroOf[c.Type.ID()])
		if c.Name != "id" {
			typ = `["null", ` + typ + `]`
		}
		fields = append(fields, fmt.Sprintf(`{"name": %q, "type": %s}`, c.Name, typ))
	}
	schema := `{"type": "record", "name": "values", "fields": [` + strings.Join(fields, ", ") + `]}`
	var rows []map[string]any
	for id := from; id < from+n; id++ {
		row := map[string]any{}
		for _, c := range cols {
			v := c.Value(id)
			if i, ok := v.(int64); ok && c.Type.ID() == arrow.INT32 {
				v = int32(i)
			}
			row[c.Name] = v
		}
		rows = append(rows, row)
	}
	opts := []ocf.WriterOpt{ocf.WithBlockCount(blockRows)}
	if codec != nil {
		opts = append(opts, ocf.WithCodec(codec))
	}
	writeOCFAt(t, path, schema, rows, opts...)
}

func writeOCFAt(t testing.TB, path, schema string, rows []map[string]any, opts ...ocf.WriterOpt) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ocf.NewWriter(f, twmb.MustParse(schema), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestValueMatrix runs the value harness's randomized option matrix
// (shuffles, filters, mixes, takes, resumes, world sizes, concurrency)
// over Avro datasets, every delivered value checked against the function
// of its row id. -valuecheck.seed picks the first case.
func TestValueMatrix(t *testing.T) {
	dir := t.TempDir()
	var set matrix.Set
	for _, d := range []struct {
		name      string
		files     int
		rows      int64
		blockRows int
		unit      int64
		codec     ocf.Codec
	}{
		{"avro-units", 2, 2000, 37, 4 << 10, ocf.SnappyCodec()},
		{"avro-blocks", 3, 700, 1, 1, nil}, // a unit a one-row block
		{"avro-one-unit", 1, 3000, 500, 0, ocf.DeflateCodec(1)},
	} {
		sub := filepath.Join(dir, d.name)
		for f := range d.files {
			writeValues(t, filepath.Join(sub, fmt.Sprintf("part-%d.avro", f)), int64(f)*d.rows, d.rows, d.blockRows, d.codec)
		}
		set.Datasets = append(set.Datasets, matrix.Dataset{Name: d.name, URLs: []string{sub}, Formats: []formats.Format{avro.Format{UnitBytes: d.unit}},
			Columns: valueColumns, Rows: int64(d.files) * d.rows, Known: true})
	}
	other := filepath.Join(dir, "avro-other")
	writeValues(t, filepath.Join(other, "part.avro"), 100_000, 2500, 100, nil)
	set.Other = &matrix.Dataset{Name: "avro-other", URLs: []string{other}, Formats: []formats.Format{avro.Format{UnitBytes: 8 << 10}},
		Columns: valueColumns, From: 100_000, Rows: 2500, Known: true}
	budget := 10 * time.Second
	if testing.Short() {
		budget = 3 * time.Second
	}
	start, ran := time.Now(), 0
	// At least eight cases however slow the machine, then as many as the
	// budget holds.
	for seed := uint64(1); ran < 8 || time.Since(start) < budget; seed++ {
		c := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := c.Run(context.Background()); err != nil {
			t.Fatalf("case seed %d (%s): %v", seed, c, err)
		}
		ran++
	}
	t.Logf("%d cases in %v", ran, time.Since(start).Round(time.Millisecond))
}
