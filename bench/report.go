package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// record is one JSON line. Its fields keep the order they were set in, so
// that every line reads kind, scenario, the common figures, then the rest.
type record struct {
	keys []string
	vals map[string]any
}

func newRecord(kind string) *record {
	r := &record{vals: map[string]any{}}
	return r.set("kind", kind)
}

// set sets a field; floats are rounded to what the measurement can tell.
func (r *record) set(key string, v any) *record {
	if f, ok := v.(float64); ok {
		v = round(f)
	}
	if _, ok := r.vals[key]; !ok {
		r.keys = append(r.keys, key)
	}
	r.vals[key] = v
	return r
}

func (r *record) get(key string) any { return r.vals[key] }

func (r *record) float(key string) float64 {
	f, _ := num(r.vals[key])
	return f
}

// num is v as a float64 if it is a number: as set in this process, or as
// read back from results.jsonl (json.Number).
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func (r *record) str(key string) string {
	s, _ := r.vals[key].(string)
	return s
}

// loadRecords reads JSON lines (results.jsonl) back into records, their
// fields in the order of the file and numbers as json.Number, so that the
// reports made from them are those of the run.
func loadRecords(rd io.Reader) ([]*record, error) {
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	var out []*record
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return nil, fmt.Errorf("line %d: want a JSON object, got %v", len(out)+1, tok)
		}
		r := &record{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d, field %s: %w", len(out)+1, key, err)
			}
			if _, dup := r.vals[key]; !dup {
				r.keys = append(r.keys, key)
			}
			r.vals[key] = v
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, err
		}
		out = append(out, r)
	}
}

// target records a target on a field of the line and whether it was met.
// A line with several targets lists them joined by " and ", is met only if
// all are, and names in "missed" the ones missed with the figure measured.
func (r *record) target(field, op string, want float64) *record {
	got := r.float(field)
	ok := got >= want
	if op == "<=" {
		ok = got <= want
	}
	t := fmt.Sprintf("%s %s %g", field, op, want)
	met := ok
	if prev, found := r.get("target").(string); found {
		t = prev + " and " + t
		met = met && r.get("met").(bool)
	}
	r.set("target", t)
	r.set("met", met)
	if !ok {
		missed, _ := r.get("missed").([]string)
		r.set("missed", append(missed, fmt.Sprintf("%s is %g", field, round(got))))
	}
	return r
}

func (r *record) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range r.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := marshal(k)
		vb, err := marshal(r.vals[k])
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping: targets read ">=", not
// "\u003e=".
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// round keeps four significant digits of small figures and whole numbers of
// large ones: timings on a shared machine tell no more.
func round(f float64) float64 {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	if math.Abs(f) >= 1000 {
		return math.Round(f)
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(f))))
	return math.Round(f*scale) / scale
}

// reporter prints records as JSON lines to stdout and keeps them for the
// files written by close.
type reporter struct {
	stdout   io.Writer
	outDir   string
	lines    []*record
	progress *progress // counts scenario lines, if not nil
}

func newReporter(stdout io.Writer, outDir string) (*reporter, error) {
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return nil, err
		}
	}
	return &reporter{stdout: stdout, outDir: outDir}, nil
}

func (p *reporter) emit(r *record) error {
	if r.get("kind") == "scenario" {
		if l := loadAverage(); l >= 0 {
			r.set("load_avg_1m", l) // when the line was done
		}
	}
	line, err := marshal(r)
	if err != nil {
		return err
	}
	p.lines = append(p.lines, r)
	if r.get("kind") == "scenario" {
		p.progress.lineDone()
	}
	_, err = fmt.Fprintf(p.stdout, "%s\n", line)
	return err
}

// close writes results.jsonl, the plots and results.md into the output
// directory.
func (p *reporter) close() error {
	if p.outDir == "" {
		return nil
	}
	var jl bytes.Buffer
	for _, r := range p.lines {
		line, err := marshal(r)
		if err != nil {
			return err
		}
		jl.Write(line)
		jl.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(p.outDir, "results.jsonl"), jl.Bytes(), 0o644); err != nil {
		return err
	}
	return writeReports(p.lines, p.outDir)
}

// writeReports writes the plots and results.md of lines into dir.
func writeReports(lines []*record, dir string) error {
	plots, err := writePlots(lines, dir)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(lines, plots)), 0o644)
}

// Columns of the Markdown table; the fields in tableOmits stay in
// results.jsonl only, and every other one goes to "details".
var tableFields = []struct{ key, title string }{
	{"scenario", "scenario"},
	{"rows", "rows"},
	{"seconds", "seconds"},
	{"rows_per_s", "rows/s"},
	{"ratio_vs_baseline", "× floor"},
	{"sluice_ratio", "sluice ÷ peer"},
	{"rows_per_cpu_s", "rows/CPU-s"},
	{"io_amplification", "I/O amp."},
	{"load_avg_1m", "load"},
	{"target", "target"},
	{"met", "met"},
}

var tableOmits = []string{
	"kind", "baseline", "baseline_rows_per_s", "floor_probes_rows_per_s", "runs_rows_per_s",
	"cpu_seconds", "read_bytes", "stored_bytes", "read_requests", "plan_bytes",
	"fetch_seconds", "transform_seconds", "consumer_wait_seconds", "reader", "peak_heap_runs",
	"sluice_runs_rows_per_s", "method", "query", "rows_per_s_basis", "duckdb_native_query", "duckdb_native_runs_rows_per_s",
}

// markdown is results.md: the machine, a table of every scenario line, and
// the plots (file names in the same directory).
func markdown(lines []*record, plots []string) string {
	var b strings.Builder
	b.WriteString("# sluice benchmark\n\n")
	shown := map[string]bool{}
	for _, k := range tableOmits {
		shown[k] = true
	}
	for _, f := range tableFields {
		shown[f.key] = true
	}
	for _, r := range lines {
		if r.get("kind") != "machine" {
			continue
		}
		for _, k := range r.keys[1:] {
			fmt.Fprintf(&b, "- %s: %s\n", k, cell(r.vals[k]))
		}
		b.WriteString("\n")
	}
	var title, rule []string
	for _, f := range tableFields {
		title = append(title, f.title)
		rule = append(rule, "---")
	}
	title = append(title, "details")
	rule = append(rule, "---")
	fmt.Fprintf(&b, "| %s |\n| %s |\n", strings.Join(title, " | "), strings.Join(rule, " | "))
	for _, r := range lines {
		if r.get("kind") != "scenario" {
			continue
		}
		var cells []string
		for _, f := range tableFields {
			cells = append(cells, cell(r.vals[f.key]))
		}
		var details []string
		for _, k := range r.keys {
			if !shown[k] {
				details = append(details, k+"="+cell(r.vals[k]))
			}
		}
		cells = append(cells, strings.Join(details, ", "))
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	b.WriteString("\n× floor is rows/s over the floor's rows/s measured alongside (see results.jsonl: " +
		"baseline, floor_probes_rows_per_s); rows/CPU-s counts the CPU of the whole process; " +
		"sluice ÷ peer is the matching sluice scenario's rows/s (runs alternating with the peer's) over the peer's: " +
		"above 1, sluice is faster. Every field of every line is in results.jsonl.\n")
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, name := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(name, ".png"), name)
		}
	}
	return b.String()
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.ReplaceAll(x, "|", `\|`)
	case bool:
		if x {
			return "yes"
		}
		return "**no**"
	default:
		raw, _ := marshal(x)
		return string(raw)
	}
}

// machineRecord describes where and on what the run happened.
func machineRecord(cfg config, d *dataset, peers *nodePeers) *record {
	r := newRecord("machine")
	r.set("date", time.Now().UTC().Format(time.RFC3339))
	if cfg.Command != "" {
		r.set("command", cfg.Command)
	}
	r.set("go_version", runtime.Version())
	r.set("godebug", os.Getenv("GODEBUG"))
	r.set("goos", runtime.GOOS).set("goarch", runtime.GOARCH)
	r.set("cores", runtime.NumCPU()).set("gomaxprocs", runtime.GOMAXPROCS(0))
	r.set("cpu_model", cpuModel())
	if l := loadAverage(); l >= 0 {
		r.set("load_avg_1m", l)
	}
	r.set("mode", cfg.Mode).set("reps", cfg.Reps).set("batch_size", cfg.BatchSize)
	r.set("dataset_files", d.spec.Files)
	r.set("dataset_rows", d.spec.Rows())
	r.set("row_group_rows", d.spec.RowGroupRows)
	r.set("columns", "id int64, label int64, x float64, s string")
	r.set("dataset_bytes", dirBytes(d.files))
	r.set("dataset_generated", d.generated)
	if d.generated {
		r.set("generate_seconds", d.genSeconds)
	}
	if peers != nil {
		r.set("peers", peers.describe())
	}
	return r
}

// cpuModel is the first "model name" of /proc/cpuinfo, if there is one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAverage is the 1-minute load average of /proc/loadavg, -1 if there
// is none: more than the cores means neighbours took CPU from the run.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return -1
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return l
}

func dirBytes(files []string) int64 {
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}
