package text

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// The shapes of CSV file whose reading follows DuckDB's read_csv (issue
// 46): each with its names, types and every value as DuckDB gives them
// (testdata/dialects holds the same files for TestDialectsMatchDuckDB,
// which asks DuckDB itself). Each is read whole, cut into byte ranges of a
// few bytes, and with the counting pass.
func TestReadsAsDuckDB(t *testing.T) {
	cases := []struct {
		file  string
		names string // name:type, ...
		rows  string
	}{
		// Blank lines are rows of null in a file of one column (item 5),
		// and skipped in a file of more.
		{"blank_lines_one_column.csv", "word:utf8", "alpha\nNULL\nbeta\nNULL\nNULL\ngamma\n"},
		{"blank_lines_two_columns.csv", "id:int64,score:float64", "1|2.5\n2|3.5\n3|4.5\n"},
		// A comment prefix detected (item 6): full-line comments are no
		// rows, one after a value ends the row (DuckDB keeps the spaces
		// before it, so the column is text).
		{"comments.csv", "id:int64,score:utf8", "1|2.5\n2|3.5 \n3|4.5\n"},
		// Quotes that do not close, or close before a stray byte: no quote
		// (item 7).
		{"stray_quotes.csv", "id:int64,text:utf8,n:int64", "1|she said \"hi|5\n2|\"quoted\" twice|6\n3|a \"b\" c|7\n"},
		// A first line of numbers with leading spaces is data (item 8).
		{"noheader_leading_spaces.csv", "column0:int64,column1:utf8,column2:utf8", "123|TEST3|text1\n124|TEST4|text2\n125|TEST5|text3\n"},
		// Eleven columns without a header are named column00 to column10.
		{"noheader_eleven_columns.csv", "column00:int64,column01:int64,column02:int64,column03:int64,column04:int64,column05:int64,column06:int64,column07:int64,column08:int64,column09:int64,column10:int64",
			"0|1|2|3|4|5|6|7|8|9|10\n11|12|13|14|15|16|17|18|19|20|21\n22|23|24|25|26|27|28|29|30|31|32\n"},
		// A quoted value after a leading space is quoted; a number with
		// spaces around it is an integer (item 9).
		{"leading_spaces.csv", "id:int64,name:utf8,year:int64", "1|Smith, J|1992\n2|Doe, A|2001\n3|plain|1999\n"},
		// A month-first date with a time of 24 hours is text; a zone's
		// name after an ISO timestamp reads it in that zone (item 10).
		{"month_first_24h.csv", "id:int64,seen:utf8", "1|2/18/2008 02:36:48\n2|3/19/2008 12:36:48\n"},
		{"zone_names.csv", "id:int64,at:timestamp[us]", "1|2008-02-18T02:36:48\n2|2008-07-18T07:36:48\n3|2008-07-18T06:36:48\n4|2008-02-17T17:36:48.5\n"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path, _ := filepath.Abs(filepath.Join("testdata/dialects", c.file))
			for _, o := range []Options{{}, {UnitBytes: 7}, {UnitBytes: 7, Count: true}} {
				tb := mustRead(t, o, nil, path)
				var names []string
				for _, f := range tb.schema.Fields() {
					names = append(names, f.Name+":"+f.Type.String())
				}
				if got := strings.Join(names, ","); got != c.names {
					t.Errorf("%+v: columns %s, want %s", o, got, c.names)
				}
				if got := tb.String(); got != c.rows {
					t.Errorf("%+v: rows\n%s\nwant\n%s", o, got, c.rows)
				}
			}
		})
	}
}

// A blank line is a row of null only where null reads so: with "" not a
// null string it is skipped.
func TestBlankLinesWithoutEmptyNull(t *testing.T) {
	dir := write(t, map[string]string{"a.csv": "word\nalpha\n\nNA\nbeta\n"})
	tb := mustRead(t, Options{NullStrings: []string{"NA"}}, nil, dir)
	if got, want := tb.String(), "alpha\nNULL\nbeta\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// What the comment prefix does, byte by byte: a line it starts, after
// spaces at most, is no row; after a value it ends the row, also after a
// closing quote; inside quotes it is data. Given, it needs no line that
// shows it.
func TestCommentPrefix(t *testing.T) {
	body := "# head\na;b\n  # indented\n1;x#y\n2;\"p#q\" # c\n3;#\n"
	dir := write(t, map[string]string{"c.csv": body})
	tb := mustRead(t, Options{Comment: '#', Delimiter: ';'}, nil, dir)
	if got, want := tb.String(), "1|x\n2|p#q\n3|NULL\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// NoComment reads the '#' lines as rows.
	dir = write(t, map[string]string{"c.csv": "a;b\n1;#2\n#;3\n"})
	tb = mustRead(t, Options{NoComment: true}, nil, dir)
	if got, want := tb.String(), "1|#2\n#|3\n"; got != want {
		t.Fatalf("NoComment: got\n%s\nwant\n%s", got, want)
	}
}

// A row with one field more than the header, null, reads as the header's
// fields (a delimiter that ends every data row, or one row).
func TestTrailingDelimiter(t *testing.T) {
	dir := write(t, map[string]string{"t.csv": "a|b\n1|2|\n3|4|\n"})
	tb := mustRead(t, Options{}, nil, dir)
	if got, want := tb.String(), "1|2\n3|4\n"; got != want || tb.schema.NumFields() != 2 {
		t.Fatalf("got %v\n%s\nwant\n%s", tb.schema, got, want)
	}
	dir = write(t, map[string]string{"t.csv": "a,b\n1,2,3\n"})
	if _, err := readAll(t, Options{Delimiter: ','}, nil, dir); err == nil || !strings.Contains(err.Error(), "3 fields, the header has 2") {
		t.Fatalf("a third value that is not null: %v", err)
	}
}

// Numbers, booleans and times read as DuckDB's casts read them: the types a
// column gets from its values.
func TestCastsAsDuckDB(t *testing.T) {
	for _, c := range []struct {
		values []string
		typ    arrow.Type
		want   string // the first value read
	}{
		{[]string{" 1992", "2001 "}, arrow.INT64, "1992"},
		{[]string{"-007", "5"}, arrow.INT64, "-7"},
		{[]string{"00012", "7"}, arrow.STRING, "00012"}, // a leading zero: a code, not a number
		{[]string{"+5", "6"}, arrow.STRING, "+5"},
		{[]string{"0x10", "0b101"}, arrow.INT64, "16"},
		{[]string{" 1.5", "2"}, arrow.FLOAT64, "1.5"},
		{[]string{"1.5 ", "2"}, arrow.STRING, "1.5 "}, // spaces after a float: text, as in DuckDB
		{[]string{"007.5", "1"}, arrow.STRING, "007.5"},
		{[]string{"yes", "No"}, arrow.BOOL, "true"},
		{[]string{"t", "F"}, arrow.BOOL, "true"},
		{[]string{"y", "n"}, arrow.STRING, "y"},
		{[]string{" 2020-01-01", "2020-01-02 "}, arrow.DATE32, "2020-01-01"},
		{[]string{" 12:00:00", "13:00:00"}, arrow.TIME64, "12:00:00.000000"},
		{[]string{"2/18/2008 02:36:48 PM", "3/19/2008 12:36:48 AM"}, arrow.TIMESTAMP, "2008-02-18T14:36:48"},
		{[]string{"2/18/2008 02:36:48", "3/19/2008 12:36:48"}, arrow.STRING, "2/18/2008 02:36:48"},
		{[]string{"18/2/2008 14:36:48", "19/3/2008 12:36:48"}, arrow.TIMESTAMP, "2008-02-18T14:36:48"},
		{[]string{"2008-02-18 02:36:48 utc", "2008-02-18 02:36:48 PST"}, arrow.TIMESTAMP, "2008-02-18T02:36:48"},
		{[]string{"2008/02/18 02:36:48 EST", "2008/07/18 02:36:48 CET"}, arrow.TIMESTAMP, "2008-02-18T07:36:48"},
		{[]string{"2008-02-18 02:36 UTC", "x"}, arrow.STRING, "2008-02-18 02:36 UTC"}, // a zone needs seconds
		{[]string{"18-02-2008 02:36:48 UTC", "x"}, arrow.STRING, "18-02-2008 02:36:48 UTC"},
		{[]string{"2008-02-18 02:36:48 Mars/Olympus", "x"}, arrow.STRING, "2008-02-18 02:36:48 Mars/Olympus"},
		{[]string{"2008-02-18 02:36:48  UTC", "x"}, arrow.STRING, "2008-02-18 02:36:48  UTC"},
	} {
		body := "v\n" + strings.Join(c.values, "\n") + "\n"
		dir := write(t, map[string]string{"v.csv": body})
		tb := mustRead(t, Options{Delimiter: ',', Quote: '"'}, nil, dir)
		if got := tb.schema.Field(0).Type.ID(); got != c.typ || tb.rows[0][0] != c.want {
			t.Errorf("%q: %s %q, want %s %q", c.values, tb.schema.Field(0).Type, tb.rows[0][0], c.typ, c.want)
		}
	}
}

// A value read into a column of a type it did not give (a Schema's, or
// one from other values) takes what DuckDB's cast takes, spaces and a
// sign: a column of integers reads " +7 ", one of booleans "1" and "y".
func TestCastsPastTheSample(t *testing.T) {
	var b strings.Builder
	b.WriteString("n,ok\n")
	for i := range 10 {
		fmt.Fprintf(&b, "%d,true\n", i)
	}
	b.WriteString(" +7 ,1\n007,y\n")
	dir := write(t, map[string]string{"p.csv": b.String()})
	s := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "ok", Type: arrow.FixedWidthTypes.Boolean}}, nil)
	tb := mustRead(t, Options{Schema: s}, nil, dir)
	if got := tb.rows[10]; got[0] != "7" || got[1] != "true" {
		t.Errorf("row 10: %v, want 7 true", got)
	}
	if got := tb.rows[11]; got[0] != "7" || got[1] != "true" {
		t.Errorf("row 11: %v, want 7 true", got)
	}
}
