package text

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
)

// oneObject passes what JSON allows and says where a line's structure
// breaks.
func TestOneObject(t *testing.T) {
	for _, ok := range []string{
		`{}`, ` {"a":1}  `, `{"a":{}}`, `{"a":[]}`, `{"a":[{},[],"}",{"b":[1,2,[3]]}]}`,
		`{"a\"}": "x\\", "b": -1.5e3, "c": true, "d": null}`, "{\"a\" : [ 1 , 2 ] }\r",
	} {
		if err := oneObject([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		`[1]`:                         "not a JSON object",
		`{"a":1} {"b":2}`:             "data after the object at byte 7",
		`{"a":1`:                      "not closed on its line",
		`{"a":"1}`:                    "not closed on its line",
		`{"a":1,-"b":2}`:              `'-' at byte 7 of the line, where an object key belongs`,
		`{"a : 1", "b":2}`:            `',' at byte 8 of the line, where the colon after a key belongs`,
		`{1:2}`:                       `'1' at byte 1 of the line, where an object key belongs`,
		`{"a":1,}`:                    `'}' at byte 7 of the line, where an object key belongs`,
		`{"a":}`:                      `'}' at byte 5 of the line, where a value belongs`,
		`{"a":1 2}`:                   `'2' at byte 7 of the line, where a comma or the end of the object belongs`,
		`{"a":[1 2]}`:                 `'2' at byte 8 of the line, where a comma or the end of the array belongs`,
		`{"a":[1,]}`:                  `']' at byte 8 of the line, where a value belongs`,
		`{"a":{"b":1]}`:               `']' at byte 11 of the line, where a comma or the end of the object belongs`,
		`{"a":{"x":2},-"b":3}`:        `'-' at byte 13`,
		`{"field1 : uvalue1", "f":1}`: `',' at byte 19`,
	} {
		err := oneObject([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", bad, err, want)
		}
	}
}

func FuzzOneObject(f *testing.F) {
	f.Add([]byte(`{"a":[{},[],"}",{"b":[1,2,[3]]}]}`))
	f.Add([]byte(`{"a":1,-"b":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = oneObject(b) // must not panic
	})
}

// A JSON Lines row whose object is malformed where a key belongs made
// arrow-go's decoder panic ("JSON decoder panicked: interface conversion:
// json.Token is json.Number, not string"), which ended the read whatever
// the bad-row policy. Now it is a bad row like any other: an error that
// says where the line breaks, or, under BadRowsSkip, a row left out.
func TestMalformedJSONLine(t *testing.T) {
	// Nested values, so that arrow-go's decoder reads the rows (flat ones
	// have a decoder of sluice's own).
	body := `{"a":{"x":1}}` + "\n" + `{"a":{"x":2},-"b":3}` + "\n" + `{"a":{"x":3}}` + "\n"
	dir := write(t, map[string]string{"m.jsonl": body})
	_, err := readAll(t, Options{}, nil, dir)
	if err == nil || !errors.Is(err, ErrBadRow) || !errors.Is(err, formats.ErrCorrupt) {
		t.Fatalf("err = %v, want a bad row", err)
	}
	for _, want := range []string{"m.jsonl", "line 2", `'-' at byte 13 of the line, where an object key belongs`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "panicked") {
		t.Errorf("err = %v", err)
	}
	tb, err := readAll(t, Options{BadRows: BadRowsSkip}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !arrow.TypeEqual(tb.schema.Field(0).Type, arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true})) {
		t.Fatalf("schema %s: the rows are not read by arrow-go's decoder", tb.schema)
	}
	if got := tb.String(); got != "{\"x\":1}\n{\"x\":3}\n" {
		t.Fatalf("skipping the bad row: %q", got)
	}
}
