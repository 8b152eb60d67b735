package valuecheck

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
)

// Formats are the file formats WriteFormat writes, by the extension their
// files take.
var Formats = []string{"parquet", "orc", "avro", "csv", "jsonl"}

// WriteFormat writes the rows of ids [from, from+n) of cols to path in
// format (one of Formats), uncompressed, in units of unitRows rows where the
// format has units (Parquet row groups without dictionaries, ORC stripes,
// Avro blocks): two files of one format, column set and row count whose
// values take as many bytes are the same size.
func WriteFormat(path, format string, cols []Column, from, n, unitRows int64) error {
	switch format {
	case "parquet":
		return WriteParquet(path, cols, from, n, Parquet{RowGroupRows: unitRows, Plain: true})
	case "orc":
		return WriteORC(path, cols, from, n, orcwrite.Options{StripeRows: int(unitRows), RowIndexStride: -1})
	case "avro":
		return WriteAvro(path, cols, from, n, unitRows)
	case "csv":
		return WriteCSV(path, cols, from, n)
	case "jsonl":
		return WriteJSONL(path, cols, from, n)
	}
	return fmt.Errorf("valuecheck: no writer of %q files", format)
}

// avroTypes are the Avro types of the Arrow types WriteAvro writes.
var avroTypes = map[arrow.Type]string{
	arrow.INT64: "long", arrow.INT32: "int", arrow.FLOAT64: "double", arrow.FLOAT32: "float",
	arrow.BOOL: "boolean", arrow.STRING: "string", arrow.BINARY: "bytes",
}

// WriteAvro writes the rows of ids [from, from+n) of cols to path as an
// Avro object container file, uncompressed, in blocks of blockRows rows.
// It takes flat columns of 32- and 64-bit integers, floats, booleans,
// strings and binaries; every column but id is a union with null.
func WriteAvro(path string, cols []Column, from, n, blockRows int64) error {
	schema := `{"type": "record", "name": "row", "fields": [`
	for i, c := range cols {
		t, ok := avroTypes[c.Type.ID()]
		if !ok {
			return fmt.Errorf("valuecheck: no Avro type for column %s of %s", c.Name, c.Type)
		}
		if c.Name != "id" {
			t = `["null", "` + t + `"]`
		} else {
			t = `"` + t + `"`
		}
		if i > 0 {
			schema += ", "
		}
		schema += fmt.Sprintf(`{"name": %q, "type": %s}`, c.Name, t)
	}
	schema += "]}"
	s, err := twmb.Parse(schema)
	if err != nil {
		return err
	}
	return writeFile(path, func(out io.Writer) error {
		w, err := ocf.NewWriter(out, s, ocf.WithBlockCount(int(max(1, blockRows))))
		if err != nil {
			return err
		}
		for id := from; id < from+n; id++ {
			row := make(map[string]any, len(cols))
			for _, c := range cols {
				v := c.Value(id)
				if i, ok := v.(int64); ok && c.Type.ID() == arrow.INT32 {
					v = int32(i)
				}
				row[c.Name] = v
			}
			if err := w.Encode(row); err != nil {
				return err
			}
		}
		return w.Close()
	})
}

// Encode is the file WriteFormat writes, as bytes, for tests that put it
// in a bucket or write it over another.
func Encode(format string, cols []Column, from, n, unitRows int64) ([]byte, error) {
	dir, err := os.MkdirTemp("", "valuecheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "part."+format)
	if err := WriteFormat(path, format, cols, from, n, unitRows); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
