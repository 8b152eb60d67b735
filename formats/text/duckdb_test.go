package text

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// The differential test: every file of DuckDB's own reader tests is read by
// sluice and by DuckDB, and their row counts and the values of the first
// rows compared. Where they differ, the file's class of difference must be
// the one testdata/duckdb-differences.txt lists (docs/formats.md says why each
// class exists); a file that starts or stops differing, or differs in
// another way, fails the test. SLUICE_UPDATE_DIFFERENCES=1 rewrites the
// list from what the run saw, for a reviewer to check.

const (
	differencesFile = "testdata/duckdb-differences.txt"
	comparedRows    = 100
)

// sluiceRead reads a file explicitly with the driver its name suggests:
// its count, schema and first rows.
func sluiceRead(t *testing.T, path string) (int64, *arrow.Schema, [][]string, error) {
	kind := CSV
	_, name := splitName(path)
	switch filepath.Ext(name) {
	case ".tsv", ".tab":
		kind = TSV
	case ".json", ".geojson":
		kind = JSON
	case ".jsonl", ".ndjson", ".geojsonl":
		kind = JSONLines
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ds, err := formats.Plan(t.Context(), []string{path}, formats.PlanOptions{Formats: []formats.Format{New(kind, Options{})}})
	if err != nil {
		return 0, nil, nil, err
	}
	defer ds.Close()
	var n int64
	var rows [][]string
	f := ds.Fragments[0]
	err = ds.Read(t.Context(), 0, formats.Range{Start: -1, End: -1, EndUnit: len(f.Units)}, 1024, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		n += b.NumRows()
		if len(rows) < comparedRows {
			rows = append(rows, rowsOf(b)...)
		}
		return nil
	})
	return n, ds.Schema, rows, err
}

// duckValue turns a DuckDB value into sluice's text of it.
func duckValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sameValue compares values as text, numbers by value, timestamps without
// the zone mark sluice's text adds.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb || math.Abs(fa-fb) <= 1e-9*math.Max(math.Abs(fa), math.Abs(fb)) || (math.IsNaN(fa) && math.IsNaN(fb))
	}
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSuffix(strings.Replace(s, "T", " ", 1), "Z"), "+00")
		if strings.Contains(s, ":") && strings.Contains(s, ".") { // a time's fraction: 12:00:00.000000
			s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return norm(a) == norm(b)
}

// classify compares one file and returns "" where sluice and DuckDB agree
// (both failing counts as agreeing), else the class of difference and a
// detail for the log.
func classify(t *testing.T, db *duckdb.DB, path string) (string, string) {
	json := strings.Contains(path, "duckdb-json")
	reader := "read_csv"
	if json {
		reader = "read_json"
	}
	n, schema, rows, err := sluiceRead(t, path)
	cnt, dErr := db.Query(fmt.Sprintf("SELECT count(*) FROM %s(%s)", reader, duckdb.Quote(path)))
	switch {
	case err != nil && dErr != nil:
		return "", ""
	case dErr != nil:
		return "duckdb-error", firstLine(dErr.Error())
	case err != nil:
		if class := refusal(err); class != "" {
			return class, firstLine(err.Error())
		}
		return "sluice-error", firstLine(err.Error())
	}
	dn, _ := strconv.ParseInt(duckValue(cnt.Rows[0][0]), 10, 64)
	if dn != n {
		return "count", fmt.Sprintf("sluice %d rows, duckdb %d", n, dn)
	}
	res, err := db.Query(fmt.Sprintf("SELECT * FROM %s(%s) LIMIT %d", reader, duckdb.Quote(path), comparedRows))
	if err != nil {
		return "duckdb-error", firstLine(err.Error())
	}
	if len(res.Columns) != schema.NumFields() {
		class := "columns"
		if n == 0 && schema.NumFields() == 0 {
			class = "empty-file" // DuckDB gives an empty file one column
		}
		return class, fmt.Sprintf("sluice %d columns, duckdb %d", schema.NumFields(), len(res.Columns))
	}
	for i := range min(len(rows), len(res.Rows)) {
		for c := range res.Columns {
			a, b := rows[i][c], duckValue(res.Rows[i][c])
			if !sameValue(a, b) {
				class := "values"
				if !json && a == "" && b == "NULL" {
					class = "quoted-null" // a quoted empty value
				}
				return class, fmt.Sprintf("row %d column %q: sluice %q, duckdb %q", i, res.Columns[c].Name, clip([]byte(a)), clip([]byte(b)))
			}
		}
	}
	return "", ""
}

// refusals are the errors by which sluice refuses a file that DuckDB reads,
// each for a reason docs/formats.md states ("Differences from DuckDB"):
// such a file is listed with the refusal's class, and counted apart from
// the files that differ.
var refusals = []struct{ class, says string }{
	// A row with fewer fields than the header, where DuckDB reads the file
	// as one column of lines (or pads with null_padding).
	{"refused-short-row", "reads a short row's missing values as null"},
	// A row with more fields, where DuckDB takes the rows before it for a
	// preamble and drops them, or reads one column of lines.
	{"refused-long-row", "a row longer than the header is always an error"},
	{"refused-invalid-utf8", "is not valid UTF-8"},
	// A value past the sample of a compressed file (sampled at its head
	// only) that does not fit the type the sample gave.
	{"refused-past-sample", "a type inferred from samples of the files"},
	{"refused-open-quote", "quoted field not closed"},
	{"refused-open-quote", "escape at the end of the file"},
	// JSON: a column of several types (DuckDB's JSON type), a key given
	// twice, records that are not objects, JSON Lines that are not one
	// object a line.
	{"refused-json-mixed-types", "set WidenToString to read it as text"},
	{"refused-json-duplicate-key", "given twice"},
	{"refused-json-not-object", "not an object"},
	{"refused-json-not-object", "the record is not a JSON object"},
	{"refused-json-not-object", "data after the top-level value"},
	{"refused-json-not-lines", "more than one JSON value on a line"},
	{"refused-json-not-lines", "no record of the sample reads as a JSON object"},
}

// refusal is the refusal class of a sluice error, "" if it is none.
func refusal(err error) string {
	for _, r := range refusals {
		if strings.Contains(err.Error(), r.says) {
			return r.class
		}
	}
	return ""
}

// firstLine shortens an error for the log: its first line, from past the
// last file name in it.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	for _, ext := range []string{".csv: ", ".tsv: ", ".gz: ", "json: ", "jsonl: "} {
		if i := strings.LastIndex(s, ext); i >= 0 {
			s = s[i+len(ext):]
			break
		}
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func TestDifferentialDuckDB(t *testing.T) {
	root := filepath.Join(corpus.Dir(t), "text")
	db := duckdb.ForTest(t)
	var files []string
	for _, sub := range []string{"duckdb-csv", "duckdb-json"} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // an unreadable entry (a link loop) is not a data file
			}
			if d.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	if len(files) < 500 {
		t.Fatalf("found %d files under %s, want the 520 CSV and the JSON files", len(files), root)
	}
	got := map[string]string{}
	agree, refused := 0, 0
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		class, detail := classify(t, db, p)
		if class == "" {
			agree++
			continue
		}
		if strings.HasPrefix(class, "refused-") {
			refused++
		}
		got[rel] = class
		t.Logf("%s: %s: %s", rel, class, detail)
	}
	t.Logf("%d files: %d agree with DuckDB, %d are refused for a listed reason (%d in all), %d differ", len(files), agree, refused, agree+refused, len(got)-refused)
	fmt.Printf("duckdb differential: %d of %d text files agree with DuckDB or are refused for a listed reason (%d agree, %d refused), %d differ\n", agree+refused, len(files), agree, refused, len(got)-refused)
	if agree+refused < 540 {
		t.Errorf("%d files agree or are refused for a listed reason, fewer than 540", agree+refused)
	}
	if os.Getenv("SLUICE_UPDATE_DIFFERENCES") == "1" {
		var sb strings.Builder
		sb.WriteString("# Files where sluice and DuckDB differ, with the class of difference (see docs/formats.md,\n# \"Differences from DuckDB\"). Rewritten by SLUICE_UPDATE_DIFFERENCES=1 go test -run Differential.\n")
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&sb, "%s\t%s\n", k, got[k])
		}
		if err := os.WriteFile(differencesFile, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := map[string]string{}
	f, err := os.Open(differencesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "\t")
		want[k] = v
	}
	for k, v := range got {
		if want[k] != v {
			t.Errorf("%s: differs from DuckDB as %q, the list says %q", k, v, want[k])
		}
	}
	for k, v := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: listed as %q but now agrees with DuckDB: drop it from the list", k, v)
		}
	}
}
