package text

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/storage"
)

func TestCSVBasics(t *testing.T) {
	dir := write(t, map[string]string{
		"a.csv": "id,name,score,ok,day\r\n1,\"x, y\",1.5,true,2024-01-02\r\n2,,2,false,\r\n3,\"say \"\"hi\"\"\",-3e2,TRUE,2024-03-04\r\n",
	})
	tb := mustRead(t, Options{}, nil, dir)
	wantTypes := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean, arrow.FixedWidthTypes.Date32}
	for i, w := range wantTypes {
		if got := tb.schema.Field(i).Type; !arrow.TypeEqual(got, w) {
			t.Errorf("column %d is %s, want %s", i, got, w)
		}
	}
	want := "1|x, y|1.5|true|2024-01-02\n2|NULL|2|false|NULL\n3|say \"hi\"|-300|true|2024-03-04\n"
	if got := tb.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCSVDialects(t *testing.T) {
	cases := []struct {
		name, body string
		o          Options
		want       string
	}{
		{"tsv.tsv", "a\tb\n1\tx y\n", Options{}, "1|x y\n"},
		{"semi.csv", "a;b\n1;'p;q'\n", Options{Delimiter: ';', Quote: '\''}, "1|p;q\n"},
		{"esc.csv", "a,b\n1,\"p\\\"q\"\n", Options{Escape: '\\'}, "1|p\"q\n"},
		{"comment.csv", "# made by hand\na,b\n# skip me\n1,2\n\n3,4\n", Options{Comment: '#'}, "1|2\n3|4\n"},
		{"nohead.csv", "1,2\n3,4\n", Options{NoHeader: true}, "1|2\n3|4\n"},
		{"na.csv", "a,b\nNA,x\n2,NA\n", Options{NullStrings: []string{"NA"}}, "NULL|x\n2|NULL\n"},
		{"noquote.csv", "a,b\n1,\"x\n", Options{NoQuote: true}, "1|\"x\n"},
		{"cr.csv", "a,b\r1,2\r3,4", Options{}, "1|2\n3|4\n"},
		{"trailing.csv", "a,b\n1,\n", Options{}, "1|NULL\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, map[string]string{c.name: c.body})
			if got := mustRead(t, c.o, nil, dir).String(); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestJSONLinesAndArray(t *testing.T) {
	dir := write(t, map[string]string{
		"a.jsonl": "{\"id\":1,\"x\":1.5,\"tags\":[\"a\"],\"s\":{\"k\":1}}\n\n{\"id\":2,\"x\":2,\"tags\":[],\"s\":null}\r\n  \n{\"id\":3,\"x\":null}",
	})
	tb := mustRead(t, Options{}, nil, dir)
	want := "1|1.5|[\"a\"]|{\"k\":1}\n2|2|[]|NULL\n3|NULL|NULL|NULL\n"
	if got := tb.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	dir = write(t, map[string]string{"a.json": " [ {\"id\":1,\"x\":1.5}, {\"x\":2,\"id\":2} ] "})
	if got, want := mustRead(t, Options{}, nil, dir).String(), "1|1.5\n2|2\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	dir = write(t, map[string]string{"b.json": "{\"id\":1}\n{\"id\":2}"})
	if got, want := mustRead(t, Options{}, nil, dir).String(), "1\n2\n"; got != want {
		t.Fatalf("objects one after another: got\n%s\nwant\n%s", got, want)
	}
}

func compress(t testing.TB, kind compression, body string) string {
	var buf bytes.Buffer
	switch kind {
	case gzipped:
		w := gzip.NewWriter(&buf)
		w.Write([]byte(body))
		w.Close()
	case zstded:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
		w.Close()
	}
	return buf.String()
}

func TestCompressed(t *testing.T) {
	var csv, jl strings.Builder
	csv.WriteString("id,s\n")
	for i := range 5000 {
		fmt.Fprintf(&csv, "%d,\"v%d\"\n", i, i)
		fmt.Fprintf(&jl, "{\"id\":%d,\"s\":\"v%d\"}\n", i, i)
	}
	dir := write(t, map[string]string{
		"a.csv.gz": compress(t, gzipped, csv.String()), "b.csv.zst": compress(t, zstded, csv.String()),
		"c.jsonl.gz": compress(t, gzipped, jl.String()), "d.ndjson.zst": compress(t, zstded, jl.String()),
	})
	for _, name := range []string{"a.csv.gz", "b.csv.zst", "c.jsonl.gz", "d.ndjson.zst"} {
		tb := mustRead(t, Options{}, nil, filepath.Join(dir, name))
		if len(tb.rows) != 5000 || tb.rows[4999][0] != "4999" || tb.rows[4999][1] != "v4999" {
			t.Fatalf("%s: %d rows, last %v", name, len(tb.rows), tb.rows[len(tb.rows)-1])
		}
	}
}

// A file cut into many byte ranges reads every record once, whatever the
// unit size, with records of every length, blank and comment lines, CRLF
// line ends and quoted fields (without line ends).
func TestSplitRanges(t *testing.T) {
	var csv, jl strings.Builder
	csv.WriteString("# comment\nid,s\n")
	n := 1000
	for i := range n {
		pad := strings.Repeat("z", (i*7919)%200)
		end := "\n"
		if i%3 == 0 {
			end = "\r\n"
		}
		fmt.Fprintf(&csv, "%d,\"%s,\"\"q\"\"\"%s", i, pad, end)
		if i%50 == 0 {
			csv.WriteString("\n# c\n")
		}
		fmt.Fprintf(&jl, "{\"id\":%d,\"s\":\"%s\"}%s", i, pad, end)
	}
	dir := write(t, map[string]string{"a.csv": csv.String(), "a.jsonl": jl.String()})
	for _, unit := range []int64{29, 4096, 1 << 20} {
		for _, name := range []string{"a.csv", "a.jsonl"} {
			// The quote given: with comment lines in the head, DuckDB's
			// sniffer prefers no quote (which cuts "a,b" in two).
			o := Options{UnitBytes: unit, Comment: '#', Quote: '"'}
			tb := mustRead(t, o, []string{"id"}, filepath.Join(dir, name))
			if len(tb.rows) != n {
				t.Fatalf("%s unit %d: %d rows, want %d", name, unit, len(tb.rows), n)
			}
			for i, r := range tb.rows {
				if r[0] != fmt.Sprint(i) {
					t.Fatalf("%s unit %d: row %d is %v", name, unit, i, r)
				}
			}
			o.Count = true
			tb = mustRead(t, o, []string{"id"}, filepath.Join(dir, name))
			if len(tb.rows) != n {
				t.Fatalf("%s unit %d counted: %d rows, want %d", name, unit, len(tb.rows), n)
			}
		}
	}
}

// A quoted line end in the sample makes the file one unit; past the
// sample, the plan-time scan moves the cuts to record starts (see
// TestQuotedLineEndPastSample), never rows read twice or lost.
func TestQuotedNewlines(t *testing.T) {
	var body strings.Builder
	body.WriteString("id,s\n")
	for i := range 200 {
		fmt.Fprintf(&body, "%d,\"line\nbreak %d\"\n", i, i)
	}
	dir := write(t, map[string]string{"a.csv": body.String()})
	ds, err := formats.Plan(t.Context(), []string{dir}, formats.PlanOptions{Formats: All(Options{UnitBytes: 64})})
	if err != nil {
		t.Fatal(err)
	}
	f := ds.Fragments[0]
	if len(f.Units) != 1 || !strings.Contains(Whole(f), "line end") {
		t.Fatalf("%d units, Whole %q; want one unit and a reason", len(f.Units), Whole(f))
	}
	ds.Close()
	if tb := mustRead(t, Options{UnitBytes: 64}, nil, dir); len(tb.rows) != 200 || tb.rows[199][1] != "line\nbreak 199" {
		t.Fatalf("%d rows", len(tb.rows))
	}

	// Past the sample: the cuts are settled at plan time.
	var late strings.Builder
	late.WriteString("id,s\n")
	for i := range 400 {
		if i < 300 {
			fmt.Fprintf(&late, "%d,plain %d\n", i, i)
		} else {
			fmt.Fprintf(&late, "%d,\"line\nbreak %d\"\n", i, i)
		}
	}
	dir = write(t, map[string]string{"late.csv": late.String()})
	want := mustRead(t, Options{SampleRecords: 10}, nil, dir).String()
	if got := mustRead(t, Options{UnitBytes: 50, SampleRecords: 10}, nil, dir).String(); got != want {
		t.Fatalf("cut in 50-byte ranges:\n%s\nwant\n%s", got, want)
	}
	// Counting finds them all and reads the file whole.
	tb := mustRead(t, Options{UnitBytes: 50, SampleRecords: 10, Count: true}, nil, dir)
	if len(tb.rows) != 400 {
		t.Fatalf("counted: %d rows, want 400", len(tb.rows))
	}
}

func TestSchemaAcrossFiles(t *testing.T) {
	dir := write(t, map[string]string{"a.csv": "k,v\n1,2\n", "b.csv": "v,k\n2.5,3\n", "c.csv": "k,v\nx,1\n"})
	_, err := readAll(t, Options{}, nil, dir)
	if !errors.Is(err, formats.ErrSchema) || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("got %v, want ErrSchema naming column k", err)
	}
	tb := mustRead(t, Options{WidenToString: true}, []string{"k", "v"}, dir)
	if got, want := tb.String(), "1|2\n3|2.5\nx|1\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !arrow.TypeEqual(tb.schema.Field(1).Type, arrow.PrimitiveTypes.Float64) {
		t.Fatalf("v is %s, want float64 (int widened)", tb.schema.Field(1).Type)
	}
	// Only the first file sampled: the others are read with its types.
	_, err = readAll(t, Options{SampleFiles: 1}, nil, dir)
	if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), "b.csv") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want a bad row in b.csv line 2", err)
	}
	// An explicit schema.
	s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: "v", Type: arrow.PrimitiveTypes.Float32}}, nil)
	tb = mustRead(t, Options{Schema: s}, nil, dir)
	if got, want := tb.String(), "1|2\n3|2.5\nx|1\n"; got != want {
		t.Fatalf("schema: got\n%s\nwant\n%s", got, want)
	}
}

func TestBadRows(t *testing.T) {
	body := "id,x\n1,1.5\n2,oops\n3\n4,4.5\n5,\"open\n"
	dir := write(t, map[string]string{"a.csv": body})
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	_, err := readAll(t, Options{Schema: s}, nil, dir)
	if !errors.Is(err, ErrBadRow) || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "line 3, byte 11") || !strings.Contains(err.Error(), "a.csv") {
		t.Fatalf("got %v, want a bad row at line 3, byte 11 of a.csv", err)
	}
	f := New(CSV, Options{Schema: s, BadRows: BadRowsSkip})
	mem := formats.PlanOptions{Formats: []formats.Format{f}}
	ds, err := formats.Plan(t.Context(), []string{dir}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var rows int64
	err = ds.Read(t.Context(), 0, formats.Range{Start: -1, End: -1, EndUnit: 1}, 10, nil, func(b arrow.RecordBatch) error {
		rows += b.NumRows()
		b.Release()
		return nil
	})
	if err != nil || rows != 2 || f.SkippedRows() != 3 {
		t.Fatalf("skip: %d rows, %d skipped, err %v; want 2 rows, 3 skipped", rows, f.SkippedRows(), err)
	}
}

func TestMalformed(t *testing.T) {
	full := compress(t, gzipped, strings.Repeat("a,b\n1,2\n", 1000))
	cases := map[string]string{
		"ragged.csv":     "a,b\n1,2\n3,4,5\n",
		"short.csv":      "a,b\n1,2\n3\n",
		"utf8.csv":       "a,b\n1,\xff\xfe\n",
		"trunc.csv.gz":   full[:len(full)/2],
		"notgzip.csv.gz": "plain text",
		"wrong.jsonl":    "{\"a\":1}\n{\"a\":\"x\"}\n",
		"notobj.jsonl":   "{\"a\":1}\n[1,2]\n",
		"broken.json":    "[{\"a\":1},{\"a\":",
		"scalar.json":    "[{\"a\":1}, 3]",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			dir := write(t, map[string]string{name: body})
			_, err := readAll(t, Options{}, nil, dir)
			if err == nil {
				t.Fatal("read without error")
			}
			if !(errors.Is(err, formats.ErrCorrupt) || errors.Is(err, formats.ErrSchema)) || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want ErrCorrupt or ErrSchema naming the file", err)
			}
		})
	}
	// Quotes that do not close, or close before a stray byte, are data
	// where the quote is detected (DuckDB finds no quote in such files),
	// and an error where it is given.
	for name, body := range map[string]string{
		"quote.csv": "a,b\n1,\"x\"y\n",
		"open.csv":  "a,b\n1,\"never closed\n2,3\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := write(t, map[string]string{name: body})
			_, err := readAll(t, Options{Quote: '"', Delimiter: ','}, nil, dir)
			if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want ErrCorrupt naming the file", err)
			}
		})
	}
}

// A line of 100 MB is read (records have no size limit short of 1 GiB).
func TestLongLine(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes and reads 100 MB: not under -short or -race")
	}
	big := strings.Repeat("x", 100<<20)
	dir := write(t, map[string]string{"big.csv": "a,b\n1," + big + "\n2,y\n"})
	tb := mustRead(t, Options{UnitBytes: 1 << 20}, []string{"a"}, dir)
	if got := tb.String(); got != "1\n2\n" {
		t.Fatalf("got %q", got)
	}
	_ = os.RemoveAll(dir)
}

// Reading every unit of a split file on its own fetches each byte about
// once: a unit's own bytes, the byte before it, and the rest of the record
// that straddles its end, which for a record longer than many units is
// read by its owner only.
func TestSplitFetchesOnce(t *testing.T) {
	var body strings.Builder
	body.WriteString("id,s\n")
	for i := range 3000 {
		fmt.Fprintf(&body, "%d,%s\n", i, strings.Repeat("v", i%90))
		if i == 1500 {
			fmt.Fprintf(&body, "%d,%s\n", -1, strings.Repeat("L", 300<<10)) // spans some 75 units
		}
	}
	dir := write(t, map[string]string{"a.csv": body.String()})
	var counter *storage.Counting
	po := formats.PlanOptions{Formats: All(Options{UnitBytes: 4 << 10})}
	po.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		counter = storage.NewCounting(b)
		return counter
	}
	ds, err := formats.Plan(t.Context(), []string{dir}, po)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	counter.Reset()
	f := ds.Fragments[0]
	var rows int64
	for u := range f.Units {
		err := ds.Read(t.Context(), 0, formats.Range{Start: -1, End: -1, FirstUnit: u, EndUnit: u + 1}, 1000, nil, func(b arrow.RecordBatch) error {
			rows += b.NumRows()
			b.Release()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	size := int64(body.Len())
	units := int64(len(f.Units))
	// Each unit: its bytes, the byte before, and the straddling record's
	// rest (a first read of 512 bytes, but for the long one, read once in
	// doubling steps).
	limit := size + units*(1+512) + 2*(300<<10)
	if got := counter.Bytes(); got < size-int64(len("id,s\n")) || got > limit {
		t.Fatalf("read %d bytes of a %d-byte file in %d units, want at most %d", got, size, units, limit)
	}
	if rows != 3001 {
		t.Fatalf("%d rows, want 3001", rows)
	}
}
