package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
)

func TestDrivers(t *testing.T) {
	names := func(fs []formats.Format) []string { return formats.Names(fs) }
	for _, c := range []struct {
		format string
		fs     []formats.Format
		want   []string // driver names, or nil for an error
		err    string
	}{
		{"", nil, []string{"parquet"}, ""},
		{"csv", nil, []string{"csv"}, ""},
		{"JSONL", nil, []string{"jsonl"}, ""}, // without case
		{"orc", nil, []string{"orc"}, ""},
		{"arrow", []formats.Format{parquet.Format{}, arrowfile.Format{}}, []string{"parquet", "arrow"}, ""}, // a driver of one's own
		{"xlsx", nil, nil, "parquet, orc, avro, csv, tsv, jsonl, json"},
		{"tsv", []formats.Format{parquet.Format{}}, nil, "conflicts with Options.Formats"},
		{"arrow", nil, nil, "not a known format"},
	} {
		fs, err := Drivers(c.format, c.fs)
		switch {
		case c.want == nil && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Drivers(%q, %v): %v, want an error saying %q", c.format, names(c.fs), err, c.err)
		case c.want != nil && (err != nil || !slices.Equal(names(fs), c.want)):
			t.Errorf("Drivers(%q, %v) = %v, %v, want %v", c.format, names(c.fs), names(fs), err, c.want)
		}
	}
}
