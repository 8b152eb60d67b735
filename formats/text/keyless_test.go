package text

import (
	"path/filepath"
	"testing"
)

// An empty file (no bytes, an empty JSON array) adds nothing to a dataset,
// first in it or later: the dataset's columns are the other files', with
// their values. Before, an empty file first made the dataset's columns
// none, so every row read as a row of no values, and one later was refused
// as lacking the columns.
func TestEmptyFileAddsNothing(t *testing.T) {
	for _, c := range []struct {
		name, empty, data string
	}{
		{"csv", "", "x,y\n1,a\n2,b\n"},
		{"jsonl", "", "{\"x\": 1, \"y\": \"a\"}\n{\"x\": 2, \"y\": \"b\"}\n"},
		{"json", "[]", `[{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]`},
	} {
		dir := write(t, map[string]string{"a." + c.name: c.empty, "b." + c.name: c.data, "c." + c.name: c.empty})
		for _, urls := range [][]string{{dir}, {filepath.Join(dir, "b."+c.name), filepath.Join(dir, "c."+c.name)}} {
			tb := mustRead(t, Options{}, nil, urls...)
			if got := tb.schema.String(); got != "schema:\n  fields: 2\n    - x: type=int64, nullable\n    - y: type=utf8, nullable" {
				t.Errorf("%s %v: schema %s", c.name, urls, got)
			}
			if got := tb.String(); got != "1|a\n2|b\n" {
				t.Errorf("%s %v: read\n%s", c.name, urls, got)
			}
		}
	}
}
