package text_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/formatstest"
	"github.com/sluicedata/sluice/formats/text"
)

// unitBytes cuts the suite's files into many units.
const unitBytes = 4 << 10

// badValue is what a bad row holds in its f64 column: not a number.
const badValue = "not a number"

// writeCSV writes rec as CSV with a header, as encoding/csv quotes it; a
// null is an empty field (the table has no empty string).
func writeCSV(w io.Writer, rec arrow.RecordBatch, bad func(int64) bool) error {
	cw := csv.NewWriter(w)
	var head []string
	for _, f := range rec.Schema().Fields() {
		head = append(head, f.Name)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for r := range int(rec.NumRows()) {
		rowBad := bad != nil && bad(rec.Column(0).(*array.Int64).Value(r))
		var fields []string
		for c, f := range rec.Schema().Fields() {
			v := ""
			if !rec.Column(c).IsNull(r) {
				v = rec.Column(c).ValueStr(r)
			}
			if rowBad && f.Name == "f64" {
				v = badValue
			}
			fields = append(fields, v)
		}
		if err := cw.Write(fields); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonObjects are rec's rows as JSON objects, in column order.
func jsonObjects(rec arrow.RecordBatch, bad func(int64) bool) [][]byte {
	var out [][]byte
	for r := range int(rec.NumRows()) {
		rowBad := bad != nil && bad(rec.Column(0).(*array.Int64).Value(r))
		var b bytes.Buffer
		b.WriteByte('{')
		for c, f := range rec.Schema().Fields() {
			if c > 0 {
				b.WriteString(", ")
			}
			name, _ := json.Marshal(f.Name)
			b.Write(name)
			b.WriteString(": ")
			col := rec.Column(c)
			switch {
			case rowBad && f.Name == "f64":
				b.WriteString(strconv.Quote(badValue))
			case col.IsNull(r):
				b.WriteString("null")
			case col.DataType().ID() == arrow.STRING || col.DataType().ID() == arrow.DATE32:
				v, _ := json.Marshal(col.ValueStr(r))
				b.Write(v)
			default:
				b.WriteString(col.ValueStr(r))
			}
		}
		b.WriteByte('}')
		out = append(out, b.Bytes())
	}
	return out
}

// writeJSONLines writes rec as JSON Lines, an object a line.
func writeJSONLines(w io.Writer, rec arrow.RecordBatch, bad func(int64) bool) error {
	for _, o := range jsonObjects(rec, bad) {
		if _, err := w.Write(append(o, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writeJSON writes rec as one JSON array of objects.
func writeJSON(w io.Writer, rec arrow.RecordBatch, bad func(int64) bool) error {
	out := []byte("[")
	for i, o := range jsonObjects(rec, bad) {
		if i > 0 {
			out = append(out, ",\n"...)
		}
		out = append(out, o...)
	}
	_, err := w.Write(append(out, "]\n"...))
	return err
}

// invalidUTF8 puts a byte that is not UTF-8 into the string of the row
// with id 650, which the drivers refuse unless told to replace it.
func invalidUTF8(b []byte) []byte {
	at := bytes.Index(b, []byte("s650"))
	b[at+1] = 0xff
	return b
}

// unclosedObject leaves the object of the row with id 650 unclosed.
func unclosedObject(b []byte) []byte {
	at := bytes.Index(b, []byte(`"id": 650,`))
	end := at + bytes.IndexByte(b[at:], '}')
	b[end] = ' '
	return b
}

// lacks: JSON has no date type, and sluice leaves dates in JSON strings
// strings (docs/formats.md, "Dates and times").
func lacks(kind text.Kind) []string {
	if kind == text.JSON || kind == text.JSONLines {
		return []string{"d"}
	}
	return nil
}

func conformance(kind text.Kind, ext string, write func(io.Writer, arrow.RecordBatch, func(int64) bool) error, count bool, damages ...formatstest.Damage) formatstest.Driver {
	return formatstest.Driver{
		Name:     kind.String(),
		Formats:  []formats.Format{text.New(kind, text.Options{UnitBytes: unitBytes, Count: count})},
		Ext:      ext,
		Write:    func(w io.Writer, rec arrow.RecordBatch, _ int) error { return write(w, rec, nil) },
		Unframed: kind != text.JSON,
		Lacks:    lacks(kind),
		Damages:  damages,
		Skips: &formatstest.Skips{
			Formats: []formats.Format{text.New(kind, text.Options{UnitBytes: unitBytes, Count: count, Schema: formatstest.Schema, BadRows: text.BadRowsSkip})},
			Write: func(w io.Writer, rec arrow.RecordBatch, _ int, bad func(int64) bool) error {
				return write(w, rec, bad)
			},
		},
	}
}

func TestConformance(t *testing.T) {
	utf8 := formatstest.Damage{Name: "a string not UTF-8", Apply: invalidUTF8}
	unclosed := formatstest.Damage{Name: "an object not closed", Apply: unclosedObject}
	for _, c := range []struct {
		name string
		d    formatstest.Driver
	}{
		{"CSV", conformance(text.CSV, ".csv", writeCSV, false, utf8)},
		{"CSVCounted", conformance(text.CSV, ".csv", writeCSV, true, utf8)},
		{"JSONLines", conformance(text.JSONLines, ".jsonl", writeJSONLines, false, utf8, unclosed)},
		{"JSONLinesCounted", conformance(text.JSONLines, ".jsonl", writeJSONLines, true, utf8, unclosed)},
		{"JSON", conformance(text.JSON, ".json", writeJSON, false, utf8, unclosed)},
	} {
		t.Run(c.name, func(t *testing.T) { formatstest.Run(t, c.d) })
	}
}
