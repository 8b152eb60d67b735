package main

import (
	"bytes"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// synthetic is a results set as a run with peers writes it, figures made up.
const synthetic = `{"kind":"machine","date":"2026-01-02T03:04:05Z","command":"go run ./bench -quick -out results","go_version":"go1.26.0","goos":"linux","goarch":"amd64","cores":2,"gomaxprocs":2,"cpu_model":"Test CPU","load_avg_1m":1.5,"mode":"quick","reps":3,"batch_size":1024,"dataset_files":8,"dataset_rows":2000000,"row_group_rows":32768,"columns":"id int64, label int64, x float64, s string","dataset_bytes":72534372,"peers":"node v20.0.0, @duckdb/node-api 1.0.0"}
{"kind":"scenario","scenario":"floor","rows":2000000,"seconds":1,"rows_per_s":2000000,"baseline_rows_per_s":2000000,"ratio_vs_baseline":1,"io_amplification":1}
{"kind":"scenario","scenario":"sequential","rows":2000000,"seconds":0.5,"rows_per_s":4000000,"baseline_rows_per_s":2000000,"ratio_vs_baseline":2,"io_amplification":1.001,"target":"ratio_vs_baseline >= 1.6","met":true}
{"kind":"scenario","scenario":"shuffled","rows":2000000,"seconds":1,"rows_per_s":2000000,"baseline_rows_per_s":2000000,"ratio_vs_baseline":1,"io_amplification":1.001,"target":"ratio_vs_baseline >= 0.8","met":true}
{"kind":"trace","scenario":"shuffled","interval_ms":20,"samples":4,"raw_queue_capacity":3,"prefetch_queue_capacity":8,"t_s":[0.01,0.03,0.05,0.07],"raw_queue_items":[0,2,3,1],"prefetch_queue_items":[0,4,8,6]}
{"kind":"scenario","scenario":"read_concurrency_1","rows":2000000,"seconds":0.6,"rows_per_s":3300000,"ratio_vs_baseline":1.6,"io_amplification":1}
{"kind":"scenario","scenario":"read_concurrency_2","rows":2000000,"seconds":0.5,"rows_per_s":4000000,"ratio_vs_baseline":2,"io_amplification":1}
{"kind":"scenario","scenario":"read_concurrency_4","rows":2000000,"seconds":0.55,"rows_per_s":3600000,"ratio_vs_baseline":1.8,"io_amplification":1}
{"kind":"scenario","scenario":"transform_1","rows":500000,"seconds":0.7,"rows_per_s":700000,"ratio_vs_baseline":0.35,"io_amplification":1}
{"kind":"scenario","scenario":"transform_2","rows":500000,"seconds":0.4,"rows_per_s":1300000,"ratio_vs_baseline":0.65,"io_amplification":1,"speedup":1.86,"target":"speedup >= 1.7","met":true}
{"kind":"scenario","scenario":"transform_4","rows":500000,"seconds":0.4,"rows_per_s":1250000,"ratio_vs_baseline":0.63,"io_amplification":1,"speedup":1.79}
{"kind":"scenario","scenario":"arrowgo_sequential","peer":"arrow-go","rows":2000000,"seconds":1,"rows_per_s":2000000,"matches":"sequential","sluice_rows_per_s":4000000,"sluice_ratio":2,"method":"pqarrow record reader"}
{"kind":"scenario","scenario":"duckdb_sequential","peer":"duckdb","rows":2000000,"seconds":0.4,"rows_per_s":5000000,"matches":"sequential","sluice_rows_per_s":4000000,"sluice_ratio":0.8,"method":"read_parquet | streamed"}
{"kind":"scenario","scenario":"lancedb_sequential","peer":"lancedb","rows":2000000,"seconds":1.2,"rows_per_s":1666667,"matches":"sequential","sluice_rows_per_s":4000000,"sluice_ratio":2.4,"method":"query","lance_table_cached":false,"lance_write_seconds":9.5,"arrow_export_seconds":1.2}
{"kind":"scenario","scenario":"lancedb_shuffled","peer":"lancedb","rows":65536,"seconds":2.3,"rows_per_s":30000,"matches":"shuffled","sluice_rows_per_s":2000000,"sluice_ratio":66.7,"method":"permutation","complete":false,"epoch_rows":2000000,"fetch_seconds":2,"permutation_seconds":0.3,"take_rows_per_s":32768,"lance_table_cached":false,"lance_write_seconds":9.5,"arrow_export_seconds":1.2}
`

func syntheticLines(t *testing.T) []*record {
	t.Helper()
	lines, err := loadRecords(strings.NewReader(synthetic))
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("%s is %dx%d pixels", path, b.Dx(), b.Dy())
	}
}

func TestLoadRecordsKeepsOrderAndFigures(t *testing.T) {
	lines := syntheticLines(t)
	if len(lines) != 15 {
		t.Fatalf("%d lines, want 15", len(lines))
	}
	var buf bytes.Buffer
	for _, r := range lines {
		b, err := marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if buf.String() != synthetic {
		t.Errorf("lines do not survive a round trip:\n%s", buf.String())
	}
	if got := lines[2].float("rows_per_s"); got != 4e6 {
		t.Errorf("rows_per_s read as %v", got)
	}
	if _, err := loadRecords(strings.NewReader("[1]\n")); err == nil {
		t.Error("a line that is not an object was accepted")
	}
}

// TestPlotsNeedTheirLines: lines without the figures of a plot make no
// plot, and no error. (TestReportsFromJSONL renders all four.)
func TestPlotsNeedTheirLines(t *testing.T) {
	t.Parallel()
	names, err := writePlots(syntheticLines(t)[:2], t.TempDir())
	if err != nil || strings.Join(names, " ") != plotScenarios {
		t.Errorf("from the floor alone: plots %v, error %v", names, err)
	}
}

// TestReportsFromJSONL makes results.md, the plots and the README section
// from a synthetic results.jsonl, as -from does.
func TestReportsFromJSONL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from := filepath.Join(dir, "results.jsonl")
	if err := os.WriteFile(from, []byte(synthetic), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# x\n\nintro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := cli([]string{"-from", from, "-out", out, "-readme", readme}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{plotScenarios, plotRead, plotTransform, plotQueues} {
		checkPNG(t, filepath.Join(out, n))
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| duckdb_sequential |", "| 0.8 |", "![queue_depths_shuffled](queue_depths_shuffled.png)", "cpu_model: Test CPU"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	doc, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# x\n\nintro\n\n## Performance\n\n" + readmeBegin + "\n",
		"Measured with `go run ./bench -quick -out results` on 2026-01-02 03:04 UTC: 2 cores (Test CPU), go1.26.0 linux/amd64",
		"| sequential | 4M | 2.00 | 1.001 | ratio_vs_baseline >= 1.6 | yes |",
		"| duckdb_sequential | read_parquet \\| streamed | 5M | sequential | 4M | **0.80** |",
		"| lancedb_shuffled | permutation | 30k | shuffled | 2M | **66.70** |",
		"lancedb_shuffled took 65,536 of the epoch's 2,000,000 rows",
		"LanceDB's createTable in 9.5 s",
		readmeEnd + "\n",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("README lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "trace") {
		t.Error("the README shows the trace line")
	}
	// A second generation replaces the section, and only it.
	if err := cli([]string{"-from", from, "-readme", readme}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(readme)
	if strings.Count(string(again), "## Performance") != 1 || strings.Count(string(again), readmeBegin) != 1 {
		t.Errorf("a second generation added a section:\n%s", again)
	}
	if err := cli([]string{"-from", from}, io.Discard, io.Discard); err == nil {
		t.Error("-from without -out or -readme was accepted")
	}
	if err := cli([]string{"-from", from, "-quick", "-readme", readme}, io.Discard, io.Discard); err == nil {
		t.Error("-from with -quick was accepted")
	}
}

func TestSpliceReadme(t *testing.T) {
	doc := "# t\n\n## Performance\n\nHand text.\n\n" + readmeBegin + "\nold\n" + readmeEnd + "\n\n## After\n"
	got, err := spliceReadme(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# t\n\n## Performance\n\nHand text.\n\n" + readmeBegin + "\nnew\n" + readmeEnd + "\n\n## After\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if again, _ := spliceReadme(got, "new"); again != got {
		t.Errorf("splicing the same section again changed the text:\n%s", again)
	}
	for _, bad := range []string{
		readmeBegin + "\n",                                     // no end
		readmeEnd + "\n" + readmeBegin + "\n",                  // reversed
		readmeBegin + readmeEnd + readmeBegin + readmeEnd + "", // twice
	} {
		if _, err := spliceReadme(bad, "x"); err == nil {
			t.Errorf("markers %q accepted", bad)
		}
	}
}

func TestParsePeerOutput(t *testing.T) {
	ok := `[2026-01-01T00:00:00Z WARN  lance] a warning
{"peer":"duckdb","scenario":"sequential","rows":2000000,"seconds":0.5,"rows_per_s":4000000,"chunks":984,"threads":2}
`
	r, err := parsePeerOutput([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if r.str("peer") != "duckdb" || r.float("rows_per_s") != 4e6 || r.keys[len(r.keys)-1] != "threads" {
		t.Errorf("parsed %v", r.vals)
	}
	for name, out := range map[string]string{
		"error":    `{"peer":"lancedb","error":"Error: table not found\n    at main"}`,
		"no rows":  `{"peer":"duckdb","scenario":"sequential","rows":0,"seconds":1,"rows_per_s":0}`,
		"a string": `{"peer":"duckdb","scenario":"sequential","rows":"many","seconds":1,"rows_per_s":1}`,
		"two":      ok + ok,
		"none":     "Segmentation fault\n",
		"bad JSON": `{"peer":`,
	} {
		if _, err := parsePeerOutput([]byte(out)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "error" && !strings.Contains(err.Error(), "table not found") {
			t.Errorf("error: %v does not carry the script's message", err)
		}
	}
}

// TestPeerRecord checks the ratio and fields of a peer line from canned
// runs, and the lines of a skipped and of a failed peer.
func TestPeerRecord(t *testing.T) {
	e := &env{floor: 2e6}
	s := &peerSample{name: "duckdb_sequential", peer: "duckdb", matches: "sequential", method: "m"}
	for _, out := range []string{
		`{"peer":"duckdb","scenario":"sequential","rows":2000000,"seconds":0.5,"rows_per_s":4000000,"threads":2}`,
		`{"peer":"duckdb","scenario":"sequential","rows":2000000,"seconds":0.4,"rows_per_s":5000000,"threads":2,"chunks":984}`,
	} {
		r, err := parsePeerOutput([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		s.add(r)
	}
	s.sluiceRates = []float64{3e6, 4e6}
	r := e.peerRecord(s, nil)
	for k, want := range map[string]float64{"rows_per_s": 5e6, "sluice_rows_per_s": 4e6, "sluice_ratio": 0.8, "ratio_vs_baseline": 2.5, "chunks": 984, "seconds": 0.4} {
		if got := r.float(k); got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	skipped := e.peerRecord(&peerSample{name: "lancedb_shuffled", peer: "lancedb", skipped: "no node"}, nil)
	if skipped.get("skipped") != "run "+setupCommand || skipped.get("rows_per_s") != nil {
		t.Errorf("skipped line %v", skipped.vals)
	}
	failed := e.peerRecord(&peerSample{name: "lancedb_shuffled", peer: "lancedb", err: "boom"}, nil)
	if failed.get("error") != "boom" || measured(failed) {
		t.Errorf("failed line %v", failed.vals)
	}
}

func TestFindNodePeersMissing(t *testing.T) {
	p := findNodePeers(t.Context(), t.TempDir())
	if p.missing == "" {
		t.Fatal("an empty folder has the peers installed")
	}
	if !strings.Contains(p.describe(), setupCommand) {
		t.Errorf("describe() = %q does not say how to set up", p.describe())
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, quit: make(chan struct{})}
	p.expect(4)
	p.status("shuffled")
	p.lineDone()
	if got := p.bar(8); !strings.HasPrefix(got, "[##......] 1/4 lines") || !strings.HasSuffix(got, "shuffled") {
		t.Errorf("bar %q", got)
	}
	if _, err := p.Write([]byte("a log line\n")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\r\033[Ka log line\n[") {
		t.Errorf("a log line does not clear the bar first: %q", buf.String())
	}
	p.close()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Errorf("close leaves the bar: %q", buf.String())
	}
	var nilBar *progress
	nilBar.status("x") // no-ops
	nilBar.lineDone()
	nilBar.close()
	if isTerminal(&buf) {
		t.Error("a buffer is a terminal")
	}
}

func TestCommandLine(t *testing.T) {
	if got := commandLine([]string{"-quick", "-out", "my results"}); got != "go run ./bench -quick -out 'my results'" {
		t.Errorf("commandLine = %q", got)
	}
}
