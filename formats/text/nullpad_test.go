package text

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// ragged are CSV files whose records are shorter than their header, the
// shapes NullPadding exists for.
var ragged = map[string]string{
	"comma.csv":     "a,b,c\n1,x,2.5\n2,y\n3\n4,z,4.5\n",
	"pipe.csv":      "a|b|c\n1|x|2.5\n2|y\n3\n",
	"quoted.csv":    "id,name,note\n1,\"a,b\",\"n\"\n2,\"c\"\n",
	"lastshort.csv": "a,b\n1,2\n3\n",
}

func TestNullPadding(t *testing.T) {
	dir := write(t, ragged)
	got, err := readAll(t, Options{NullPadding: true}, nil, filepath.Join(dir, "comma.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"1", "x", "2.5"}, {"2", "y", "NULL"}, {"3", "NULL", "NULL"}, {"4", "z", "4.5"}}
	if !equalRows(got.rows, want) || got.schema.Field(0).Type.ID() != arrow.INT64 || got.schema.Field(2).Type.ID() != arrow.FLOAT64 {
		t.Fatalf("got %v %v, want %v as int64, string, float64", got.schema, got.rows, want)
	}
	// The pipe is detected: a short record is consistent with the header.
	got, err = readAll(t, Options{NullPadding: true}, nil, filepath.Join(dir, "pipe.csv"))
	if err != nil || got.schema.NumFields() != 3 || !equalRows(got.rows, want[:3]) {
		t.Fatalf("pipe: got %v %v, err %v; want %v", got.schema, got.rows, err, want[:3])
	}
	// Without the option a short row fails naming it.
	_, err = readAll(t, Options{}, nil, filepath.Join(dir, "lastshort.csv"))
	if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), "NullPadding") || !strings.Contains(err.Error(), "--null-padding") || !strings.Contains(err.Error(), "lastshort.csv") {
		t.Fatalf("got %v, want a bad row naming NullPadding and the file", err)
	}
	// A long row stays an error, with or without it.
	long := write(t, map[string]string{"long.csv": "a,b\n1,2\n3,4,5\n"})
	_, err = readAll(t, Options{NullPadding: true}, nil, long)
	if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), "3 fields, the header has 2") || !strings.Contains(err.Error(), "always an error") {
		t.Fatalf("long row: got %v, want a bad row", err)
	}
	// With a schema given, and with bad rows skipped and counted.
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}, {Name: "b", Type: arrow.BinaryTypes.String}}, nil)
	got, err = readAll(t, Options{NullPadding: true, Schema: s, Count: true}, nil, filepath.Join(dir, "lastshort.csv"))
	if err != nil || !equalRows(got.rows, [][]string{{"1", "2"}, {"3", "NULL"}}) {
		t.Fatalf("schema: got %v, err %v", got, err)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

// TestNullPaddingMatchesDuckDB reads each ragged file with NullPadding and
// with DuckDB's null_padding=true: same names, same values.
func TestNullPaddingMatchesDuckDB(t *testing.T) {
	db := duckdb.ForTest(t)
	dir := write(t, ragged)
	for name := range ragged {
		p := filepath.Join(dir, name)
		got, err := readAll(t, Options{NullPadding: true}, nil, p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		res, err := db.Query("SELECT * FROM read_csv(" + duckdb.Quote(p) + ", null_padding=true)")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Columns) != got.schema.NumFields() || len(res.Rows) != len(got.rows) {
			t.Errorf("%s: sluice %d columns %d rows, DuckDB %d columns %d rows", name, got.schema.NumFields(), len(got.rows), len(res.Columns), len(res.Rows))
			continue
		}
		for c, col := range res.Columns {
			if got.schema.Field(c).Name != col.Name {
				t.Errorf("%s: column %d is %q, DuckDB names it %q", name, c, got.schema.Field(c).Name, col.Name)
			}
		}
		for i, row := range res.Rows {
			for c, v := range row {
				if a, b := got.rows[i][c], duckValue(v); !sameValue(a, b) {
					t.Errorf("%s: row %d column %d: sluice %q, DuckDB %q", name, i, c, a, b)
				}
			}
		}
	}
}
