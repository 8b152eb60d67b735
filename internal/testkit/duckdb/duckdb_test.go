package duckdb

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQuery(t *testing.T) {
	db := ForTest(t)
	res, err := db.Query("select 42::bigint as a, 'it''s' as b, 1.5::double as c, null::int as d, date '2024-11-07' as e")
	if err != nil {
		t.Fatal(err)
	}
	want := []Column{{"a", "BIGINT"}, {"b", "VARCHAR"}, {"c", "DOUBLE"}, {"d", "INTEGER"}, {"e", "DATE"}}
	for i, c := range want {
		if res.Columns[i] != c {
			t.Errorf("column %d = %+v, want %+v", i, res.Columns[i], c)
		}
	}
	row := res.Rows[0]
	if row[0] != "42" || row[1] != "it's" || row[2] != json.Number("1.5") || row[3] != nil || row[4] != "2024-11-07" {
		t.Errorf("row = %#v", row)
	}
	if _, err := db.Query("select * from no_such_table"); err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("query of a missing table: err = %v, want DuckDB's message naming it", err)
	}
	// The process survives a failed query.
	if res, err := db.Query("select " + Quote("a'b") + " as s"); err != nil || res.Rows[0][0] != "a'b" {
		t.Errorf("after an error: %v %v", res, err)
	}
}
