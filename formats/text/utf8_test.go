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
