package parquet

import (
	"slices"
	"testing"
)

// The cases are DuckDB 1.5's names for files with these columns (read with
// read_parquet), but for names that differ only in case, which DuckDB
// renames too.
func TestUniqueNames(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"id", "x"}, []string{"id", "x"}},
		{[]string{"id", "x", "id"}, []string{"id", "x", "id_1"}},
		{[]string{"id", "id", "id", "id"}, []string{"id", "id_1", "id_2", "id_3"}},
		{[]string{"id", "id", "id_1", "id"}, []string{"id", "id_1", "id_1_1", "id_2"}},
		{[]string{"id_1", "id", "id"}, []string{"id_1", "id", "id_1_1"}},
		{[]string{"id", "id_1", "id"}, []string{"id", "id_1", "id_1_1"}},
		{[]string{"id_1", "id", "id", "id"}, []string{"id_1", "id", "id_1_1", "id_2"}},
		{[]string{"id", "id", "id_2", "id", "id"}, []string{"id", "id_1", "id_2", "id_2_1", "id_3"}},
		{[]string{"id_1", "id_2", "id", "id", "id"}, []string{"id_1", "id_2", "id", "id_1_1", "id_2_1"}},
		{[]string{"id", "ID", "Id"}, []string{"id", "ID", "Id"}}, // DuckDB: id, ID_1, Id_2
	} {
		got, renamed := uniqueNames(c.in)
		if !slices.Equal(got, c.want) || renamed != !slices.Equal(c.in, c.want) {
			t.Errorf("uniqueNames(%q) = %q, %v; want %q", c.in, got, renamed, c.want)
		}
	}
}
