//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	twmb "github.com/twmb/avro"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/stream"
)

// TestStreamOptionsCarryEveryOption: each option of the ABI's JSON reaches
// stream.Options under its own field.
func TestStreamOptionsCarryEveryOption(t *testing.T) {
	var o openOptions
	js := `{"urls":["u"],"format":"avro","shuffle":true,"shuffle_memory":123456,"shuffle_passes":3,"header":true,"null_padding":true,
		"num_splits":4,"read_concurrency":5,"plan_concurrency":6,"take_cache_bytes":-1,"prefetch_bytes":1048576,"plan_cache":"/tmp/c"}`
	if err := decodeOptions([]byte(js), datasetOptions, &o); err != nil {
		t.Fatal(err)
	}
	so, err := o.streamOptions()
	if err != nil {
		t.Fatal(err)
	}
	want := stream.Options{URLs: []string{"u"}, Format: "avro", Shuffle: true, ShuffleMemory: 123456, ShufflePasses: 3, NumSplits: 4,
		Limits: stream.Limits{ReadConcurrency: 5, PlanConcurrency: 6, TakeCacheBytes: -1, PrefetchBytes: 1 << 20}}
	got := so
	got.Formats = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if formats.Named(so.Formats, "avro") == nil || formats.Named(so.Formats, "csv") == nil {
		t.Fatalf("drivers %v", formats.Names(so.Formats))
	}
	if !o.Header || !o.NullPadding || o.PlanCacheAt != "/tmp/c" {
		t.Fatal("header, null_padding and plan_cache not decoded")
	}
	for _, js := range []string{
		`{"urls":["u"],"format":"orcish"}`,
		`{"urls":["u"],"header":true,"no_header":true}`,
		`{"urls":["u"],"quote":"ab"}`,
		`{"urls":["u"],"escape":"none"}`,
		`{"urls":["u"],"comment":"//"}`,
	} {
		if _, err := openDataset([]byte(js)); kindOf(err) != "usage" {
			t.Errorf("%s: %v (kind %s), want usage", js, err, kindOf(err))
		}
	}
}

// TestOptionMistakesAreNamed: an unknown name, a value of the wrong type,
// or anything but one JSON object is a usage error that says which.
func TestOptionMistakesAreNamed(t *testing.T) {
	for js, want := range map[string]string{
		`{"urls":["u"],"shuffle_windw":5}`:        `unknown option "shuffle_windw"`,
		`{"urls":["u"],"batch_size":"x"}`:         "option batch_size: json: cannot unmarshal string",
		`{"urls":["u"],"read_concurrency":1.5}`:   "option read_concurrency: json: cannot unmarshal number 1.5",
		`{"urls":["u"],"ShuffleWindow":5}`:        `unknown option "ShuffleWindow"`,
		`{"urls":["u"]} {}`:                       "trailing data",
		`["u"]`:                                   "cannot unmarshal array",
		`{"urls":["u"],"zz":1,"aa":2}`:            `unknown option "aa"`,
		`{"urls":["u"],"plan_store_wait":"soon"}`: "option plan_store_wait",
	} {
		var o openOptions
		err := decodeOptions([]byte(js), datasetOptions, &o)
		if kindOf(err) != "usage" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v (kind %s), want a usage error containing %q", js, err, kindOf(err), want)
		}
	}
	var m mixOptions
	if err := decodeOptions([]byte(`{"sources":[],"epoch":"rows","rows":7,"concurrency":2,"shuffle":true}`), mixOptionNames, &m); kindOf(err) != "usage" || !strings.Contains(err.Error(), `unknown option "shuffle"`) {
		t.Errorf("a dataset's option given to a mix: %v", err)
	}
	m = mixOptions{}
	if err := decodeOptions([]byte(`{"sources":[{"dataset":3,"weight":0.5}],"epoch":"rows","rows":7,"concurrency":2}`), mixOptionNames, &m); err != nil {
		t.Fatal(err)
	}
	if m.EpochRule != "rows" || m.Rows != 7 || m.Concurrency != 2 || len(m.Sources) != 1 || m.Sources[0] != (mixSource{3, 0.5}) {
		t.Errorf("mix options %+v", m)
	}
}

// notNamed are the stream.Options fields the ABI sets from other options,
// or not at all: a table (iceberg, catalog), the drivers (the text
// options), the plan cache and store (by URL), and what only Go can give.
var notNamed = []string{"Plan", "Formats", "PlanCache", "PlanStore", "Storage", "Allocator", "Metrics", "Logger"}

// TestEveryStreamOptionHasAName: every field of stream.Options (and of its
// Limits) is in datasetOptions or in notNamed, so that a new stream option
// gets its name in the ABI, and from there in Python's list.
func TestEveryStreamOptionHasAName(t *testing.T) {
	var o openOptions
	named := map[uintptr]bool{}
	for _, field := range datasetOptions {
		named[reflect.ValueOf(field(&o)).Pointer()] = true
	}
	opts := reflect.ValueOf(&o.Options).Elem()
	for _, n := range notNamed {
		if !opts.FieldByName(n).IsValid() {
			t.Errorf("notNamed lists %s, which stream.Options does not have", n)
		}
	}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, fv := v.Type().Field(i), v.Field(i)
			switch {
			case f.Type == reflect.TypeFor[stream.Limits]():
				walk(fv, path+f.Name+".")
			case slices.Contains(notNamed, path+f.Name):
			case !named[fv.Addr().Pointer()]:
				t.Errorf("stream.Options.%s%s has no name in the ABI (datasetOptions), nor is it in notNamed", path, f.Name)
			}
		}
	}
	walk(opts, "")
}

// TestPythonNamesEveryOption: the Python package's lists of option names
// (python/sluice/_options.py, DATASET and MIX, which check each value
// before the call) are the ABI's, less what Python passes by itself (a
// dataset's urls, a mix's sources).
func TestPythonNamesEveryOption(t *testing.T) {
	src, err := os.ReadFile("../python/sluice/_options.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dict string
		abi  []string
		own  string
	}{
		{"DATASET", slices.Collect(maps.Keys(datasetOptions)), "urls"},
		{"MIX", slices.Collect(maps.Keys(mixOptionNames)), "sources"},
	} {
		py := pythonDictKeys(t, string(src), c.dict)
		for _, n := range c.abi {
			if n != c.own && !slices.Contains(py, n) {
				t.Errorf("_options.py's %s has no entry for the ABI's option %s", c.dict, n)
			}
		}
		for _, n := range py {
			if n == c.own || !slices.Contains(c.abi, n) {
				t.Errorf("_options.py's %s names %s, which the ABI does not know", c.dict, n)
			}
		}
	}
}

// pythonDictKeys are the string keys of the dict literal `name = {...}`
// in src, one entry a line as _options.py writes them.
func pythonDictKeys(t *testing.T, src, name string) []string {
	t.Helper()
	_, body, ok := strings.Cut(src, "\n"+name+" = {\n")
	if !ok {
		t.Fatalf("_options.py has no %s = {", name)
	}
	body, _, ok = strings.Cut(body, "\n}\n")
	if !ok {
		t.Fatalf("_options.py's %s has no closing brace", name)
	}
	key := regexp.MustCompile(`^\s+"([a-z_0-9]+)":`)
	var keys []string
	for line := range strings.SplitSeq(body, "\n") {
		if m := key.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		} else if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			t.Fatalf("_options.py's %s: line %q is neither a \"name\": entry nor a comment", name, line)
		}
	}
	if len(keys) == 0 {
		t.Fatalf("_options.py's %s names nothing", name)
	}
	return keys
}

// avroSchema is exampledata's schema in Avro.
const avroSchema = `{"type": "record", "name": "r", "fields": [
	{"name": "id", "type": "long"}, {"name": "label", "type": "long"},
	{"name": "x", "type": "double"}, {"name": "s", "type": "string"}]}`

// readRows reads every row of a handle's epoch as id, label, x, s.
func readRows(t *testing.T, id int64) [][4]any {
	t.Helper()
	h, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	var out [][4]any
	for {
		b, err := h.next(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return out
		}
		var vals [4][]any
		for c := range 4 {
			col := b.Column(c)
			for r := range col.Len() {
				vals[c] = append(vals[c], col.GetOneForMarshal(r))
			}
		}
		for r := range vals[0] {
			out = append(out, [4]any{vals[0][r], vals[1][r], vals[2][r], vals[3][r]})
		}
		b.Release()
	}
}

// TestAvroFiles: .avro files are read by name, and any file by format
// "avro", as the same rows as the Parquet files they were written from.
func TestAvroFiles(t *testing.T) {
	dir := writeData(t)
	pq := openJSON(t, map[string]any{"urls": []string{dir}, "batch_size": 333})
	want := readRows(t, pq)
	if err := closeHandle(pq); err != nil {
		t.Fatal(err)
	}
	avroDir, datDir := filepath.Join(t.TempDir(), "avro"), filepath.Join(t.TempDir(), "dat")
	for _, d := range []string{avroDir, datDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	half := len(want) / 2
	for i, part := range [][][4]any{want[:half], want[half:]} {
		writeAvroRows(t, filepath.Join(avroDir, fmt.Sprintf("p%d.avro", i)), part)
		writeAvroRows(t, filepath.Join(datDir, fmt.Sprintf("p%d.dat", i)), part)
	}
	for _, o := range []map[string]any{
		{"urls": []string{avroDir}, "batch_size": 333},
		{"urls": []string{datDir}, "batch_size": 333, "format": "avro"},
	} {
		id := openJSON(t, o)
		got := readRows(t, id)
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || !slices.Equal(got, want) {
			t.Fatalf("%v: %d rows differ from the Parquet files' %d", o, len(got), len(want))
		}
	}
}

func writeAvroRows(t *testing.T, path string, rows [][4]any) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ocf.NewWriter(f, twmb.MustParse(avroSchema), ocf.WithCodec(ocf.SnappyCodec()), ocf.WithBlockCount(300))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Encode(map[string]any{"id": r[0], "label": r[1], "x": r[2], "s": r[3]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEstimate: sluice_estimate's figures are the dataset's Estimate, the
// peak for its shuffle; a mix has none.
func TestEstimate(t *testing.T) {
	dir := writeData(t)
	for _, shuffle := range []bool{true, false} {
		id := openJSON(t, map[string]any{"urls": []string{dir}, "shuffle": shuffle, "shuffle_window": 500})
		h, _ := lookup(id)
		got, err := h.estimate()
		if err != nil {
			t.Fatal(err)
		}
		e := h.ds.Estimate()
		if got.WindowRows != 500 || got.Windows != e.Windows || got.MaxRows != e.MaxRows || got.Mixing != e.Mixing ||
			got.RowBytes != e.RowBytes || got.PeakBytes != e.PeakBytes(shuffle) || got.PeakBytes == 0 || got.MixingBatches == 0 {
			t.Fatalf("shuffle %v: %+v, want %+v", shuffle, got, e)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"sources": []map[string]any{{"dataset": id, "weight": 1}}})
		m, err := openMix(b)
		if err != nil {
			t.Fatal(err)
		}
		hm, _ := lookup(m)
		if _, err := hm.estimate(); kindOf(err) != "usage" {
			t.Fatalf("estimate of a mix: %v", err)
		}
		if err := closeHandle(m); err != nil {
			t.Fatal(err)
		}
		if err := closeHandle(id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDialectOptions: quote, escape and comment reach the CSV driver, which
// reads a file with them instead of what it would detect.
func TestDialectOptions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	if err := os.WriteFile(path, []byte("id,text\n1,\"a\\\"b\"\n2,c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for js, want := range map[string]string{
		`{"urls":["u"]}`: `delimiter ',', quote '"', escape '\\', comment none, header`,
		`{"urls":["u"],"quote":"'","escape":"'","comment":";"}`: `delimiter ',', quote '\'', escape doubled quote, comment ';', header`,
		`{"urls":["u"],"quote":"none","comment":"none"}`:        `delimiter ',', quote none, escape none, comment none, header`,
	} {
		var o openOptions
		if err := decodeOptions([]byte(js), datasetOptions, &o); err != nil {
			t.Fatal(err)
		}
		so, err := o.streamOptions()
		if err != nil {
			t.Fatal(err)
		}
		ds, err := formats.Plan(t.Context(), []string{path}, formats.PlanOptions{Formats: so.Formats})
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		got := text.Dialect(ds.Fragments[0])
		ds.Close()
		if got != want {
			t.Errorf("%s: the file reads as %q, want %q", js, got, want)
		}
	}
}
