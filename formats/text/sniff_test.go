package text

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// The files of testdata/dialects are the shapes dialect and header
// detection exist for; each must read as DuckDB reads it, names included.
func TestDialectsMatchDuckDB(t *testing.T) {
	db := duckdb.ForTest(t)
	files, err := filepath.Glob("testdata/dialects/*.csv")
	if err != nil || len(files) < 8 {
		t.Fatalf("testdata/dialects holds %d files (%v)", len(files), err)
	}
	for _, p := range files {
		abs, _ := filepath.Abs(p)
		if class, detail := classify(t, db, abs); class != "" {
			t.Errorf("%s: differs from DuckDB (%s): %s", p, class, detail)
			continue
		}
		_, schema, _, _ := sluiceRead(t, abs)
		res, err := db.Query("SELECT * FROM read_csv(" + duckdb.Quote(abs) + ") LIMIT 0")
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range res.Columns {
			if got := schema.Field(i).Name; got != c.Name {
				t.Errorf("%s: column %d is %q, DuckDB names it %q", p, i, got, c.Name)
			}
		}
	}
}

func TestSniffDialects(t *testing.T) {
	cases := []struct {
		name, body string
		o          Options
		want       string
	}{
		{"semi.csv", "a;b\n1;\"p;q\"\n2;3,5\n", Options{}, "1|p;q\n2|3,5\n"},
		{"pipe.csv", "a|b\n1|x,y\n2|z\n", Options{}, "1|x,y\n2|z\n"},
		{"tab.csv", "a\tb\n1\tx;y\n2\tz\n", Options{}, "1|x;y\n2|z\n"},
		{"squote.csv", "a;b\n1;'p;q'\n", Options{}, "1|p;q\n"},
		{"bsl.csv", "a,b\n1,\"p\\\"q\"\n", Options{}, "1|p\"q\n"},
		{"onecol.csv", "a\n1\n2\n", Options{}, "1\n2\n"},
		{"nohead.csv", "1,2\n3,4\n", Options{}, "1|2\n3|4\n"},
		{"oneline.csv", "1,2.5,x\n", Options{}, "1|2.5|x\n"},
		{"onelinehead.csv", "a,b\n", Options{}, ""},
		{"nohead_str.csv", "x,1\ny,2\n", Options{}, "x|1\ny|2\n"},
		{"alltext.csv", "a,b\nx,y\n", Options{}, "x|y\n"},
		{"emptyhead.csv", ",\n1,2\n", Options{}, "1|2\n"},
		// What the options give wins.
		{"given_delim.csv", "a;b\n1;2\n", Options{Delimiter: ','}, "1;2\n"},
		// With '"' for quote, a single-quoted field holding the delimiter
		// is data: cut at ';', as the header is, the row is too long.
		{"given_quote.csv", "a;b\n1;'p;q'\n2;x\n", Options{Quote: '"'}, "error: 3 fields, the header has 2"},
		{"given_nohead.csv", "a,b\n1,2\n", Options{NoHeader: true}, "a|b\n1|2\n"},
		{"given_head.csv", "1,2\n3,4\n", Options{Header: true}, "3|4\n"},
		{"given_tsv.tsv", "a\tb\n1\t2;3\n", Options{}, "1|2;3\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{c.name: c.body})
			if msg, ok := strings.CutPrefix(c.want, "error: "); ok {
				if _, err := readAll(t, c.o, nil, dir); err == nil || !strings.Contains(err.Error(), msg) {
					t.Fatalf("err %v, want one saying %q", err, msg)
				}
				return
			}
			if got := mustRead(t, c.o, nil, dir).String(); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestSniffNames(t *testing.T) {
	dir := write(t, map[string]string{"n.csv": "1,x\n2,y\n"})
	tb := mustRead(t, Options{}, nil, dir)
	if got := tb.schema.Field(0).Name + "," + tb.schema.Field(1).Name; got != "column0,column1" {
		t.Fatalf("names %s, want column0,column1", got)
	}
	dir = write(t, map[string]string{"h.csv": "id,name\n1,x\n"})
	tb = mustRead(t, Options{}, nil, dir)
	if got := tb.schema.Field(0).Name; got != "id" {
		t.Fatalf("name %s, want id", got)
	}
}

func TestSniffMixedDialects(t *testing.T) {
	dir := write(t, map[string]string{
		"a.csv": "x,y\n1,2\n",
		"b.csv": "x;y\n3;4\n",
	})
	_, err := readAll(t, Options{}, nil, dir)
	if err == nil || !errors.Is(err, formats.ErrSchema) {
		t.Fatalf("err %v, want ErrSchema", err)
	}
	for _, w := range []string{"a.csv", "b.csv", `delimiter ','`, `delimiter ';'`, "Options.Delimiter"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %s", err, w)
		}
	}
	// A header in one file and none in the other is refused too.
	dir = write(t, map[string]string{
		"a.csv": "x,y\n1,2\n",
		"b.csv": "3,4\n5,6\n",
	})
	if _, err := readAll(t, Options{}, nil, dir); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Fatalf("err %v, want one naming the header", err)
	}
	// Given options make them alike.
	if tb, err := readAll(t, Options{NoHeader: true, WidenToString: true}, nil, dir); err != nil || tb.String() != "x|y\n1|2\n3|4\n5|6\n" {
		t.Fatalf("NoHeader: %v %v", tb, err)
	}
	if _, err := readAll(t, Options{Header: true, NoHeader: true}, nil, dir); err == nil {
		t.Fatal("Header and NoHeader both set: no error")
	}
}

// A split file reads with the dialect detected from its head, in every
// byte range and in the counting pass.
func TestSniffSplit(t *testing.T) {
	var sb strings.Builder
	var want strings.Builder
	for i := range 300 {
		line := []string{itoa(i), "\"a;" + itoa(i) + "\"", itoa(i * 2)}
		sb.WriteString(strings.Join(line, ";") + "\n")
		want.WriteString(itoa(i) + "|a;" + itoa(i) + "|" + itoa(i*2) + "\n")
	}
	dir := write(t, map[string]string{"s.csv": sb.String()})
	for _, count := range []bool{false, true} {
		tb := mustRead(t, Options{UnitBytes: 97, Count: count}, nil, dir)
		if got := tb.String(); got != want.String() {
			t.Fatalf("count %t: got\n%.300s\nwant\n%.300s", count, got, want.String())
		}
	}
}

var itoa = strconv.Itoa

func TestDialectOfFragment(t *testing.T) {
	dir := write(t, map[string]string{"d.csv": "1|'a|b'\n2|c\n"})
	ds, err := formats.Plan(context.Background(), []string{dir}, formats.PlanOptions{Formats: All(Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	got := Dialect(ds.Fragments[0])
	want := `delimiter '|', quote '\'', escape doubled quote, comment none, no header`
	if got != want {
		t.Fatalf("Dialect %q, want %q", got, want)
	}
}
