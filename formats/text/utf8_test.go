package text

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
)

// A header name and a value with the same invalid UTF-8 bytes are treated
// alike: an error naming ReplaceInvalidUTF8 without it, U+FFFD with it.
func TestInvalidUTF8HeaderAndValues(t *testing.T) {
	dir := write(t, map[string]string{
		"name.csv":  "a,caf\xe9\n1,2\n",
		"value.csv": "a,b\n1,caf\xe9\n",
	})
	_, err := readAll(t, Options{}, nil, filepath.Join(dir, "name.csv"))
	if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "name.csv") || !strings.Contains(err.Error(), "column 2 of 2") || !strings.Contains(err.Error(), "ReplaceInvalidUTF8") {
		t.Fatalf("header: got %v, want an error naming the file, column 2 and ReplaceInvalidUTF8", err)
	}
	_, err = readAll(t, Options{}, nil, filepath.Join(dir, "value.csv"))
	if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), "ReplaceInvalidUTF8") {
		t.Fatalf("value: got %v, want a bad row naming ReplaceInvalidUTF8", err)
	}
	got, err := readAll(t, Options{ReplaceInvalidUTF8: true}, nil, filepath.Join(dir, "name.csv"))
	if err != nil || got.schema.Field(1).Name != "caf\uFFFD" || got.rows[0][1] != "2" {
		t.Fatalf("header replaced: got %v, err %v", got, err)
	}
	got, err = readAll(t, Options{ReplaceInvalidUTF8: true}, nil, filepath.Join(dir, "value.csv"))
	if err != nil || got.rows[0][1] != "caf\uFFFD" {
		t.Fatalf("value replaced: got %v, err %v", got, err)
	}
	// A header-less file's first record is a value like any other.
	got, err = readAll(t, Options{NoHeader: true, ReplaceInvalidUTF8: true}, nil, filepath.Join(dir, "name.csv"))
	if err != nil || got.rows[0][1] != "caf\uFFFD" {
		t.Fatalf("no header, replaced: got %v, err %v", got, err)
	}
}

// JSON strings and keys that are not UTF-8 are treated as CSV values are:
// a bad row naming the file, line or record and byte by default, U+FFFD
// with ReplaceInvalidUTF8. Flat (scalar) and nested columns take both
// paths of the decoder; the sample must not name a key U+FFFD silently.
func TestInvalidUTF8JSON(t *testing.T) {
	dir := write(t, map[string]string{
		"value.jsonl":  "{\"a\":1,\"s\":\"ok\"}\n{\"a\":2,\"s\":\"caf\xe9\"}\n",
		"key.jsonl":    "{\"a\":1,\"caf\xe9\":\"x\"}\n",
		"nested.jsonl": "{\"a\":[\"ok\"]}\n{\"a\":[\"caf\xe9\"]}\n",
		"value.json":   "[{\"a\":1,\"s\":\"ok\"},\n{\"a\":2,\"s\":\"caf\xe9\"}]",
		"nested.json":  "[{\"a\":{\"s\":\"ok\"}},\n{\"a\":{\"s\":\"caf\xe9\"}}]",
	})
	for _, c := range []struct {
		file, where, replaced string
	}{
		{"value.jsonl", "line 2, byte 17: byte 15 of the record", "1 ok|2 caf\uFFFD"},
		{"key.jsonl", "line 1, byte 0: byte 11 of the record", "1 x"},
		{"nested.jsonl", "line 2, byte 13: byte 10 of the record", `["ok"]|["caf` + "\uFFFD" + `"]`},
		{"value.json", "record 1 of the range, byte 17: byte 15 of the record", "1 ok|2 caf\uFFFD"},
		{"nested.json", "record 1 of the range, byte 17: byte 14 of the record", `{"s":"ok"}|{"s":"caf` + "\uFFFD" + `"}`},
	} {
		p := filepath.Join(dir, c.file)
		_, err := readAll(t, Options{}, nil, p)
		if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.where) || !strings.Contains(err.Error(), "not valid UTF-8") || !strings.Contains(err.Error(), "ReplaceInvalidUTF8") {
			t.Errorf("%s: got %v, want a bad row at %q naming ReplaceInvalidUTF8", c.file, err, c.where)
		}
		got, err := readAll(t, Options{ReplaceInvalidUTF8: true}, nil, p)
		if err != nil {
			t.Errorf("%s replaced: %v", c.file, err)
			continue
		}
		var rows []string
		for _, r := range got.rows {
			rows = append(rows, strings.Join(r, " "))
		}
		if s := strings.Join(rows, "|"); s != c.replaced {
			t.Errorf("%s replaced: got %q, want %q", c.file, s, c.replaced)
		}
		if c.file == "key.jsonl" && got.schema.Field(1).Name != "caf\uFFFD" {
			t.Errorf("key replaced: schema %v", got.schema)
		}
	}
	// Skipped as bad rows, the good ones stay.
	got, err := readAll(t, Options{BadRows: BadRowsSkip}, nil, filepath.Join(dir, "value.jsonl"))
	if err != nil || len(got.rows) != 1 || got.rows[0][1] != "ok" {
		t.Errorf("skipped: got %v, err %v", got, err)
	}
}
