package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/klauspost/compress/gzip"

	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/stream"
)

// The text scenario: the bench data written as CSV and as JSON Lines,
// plain and gzip-compressed, streamed by sluice's text drivers and read by
// DuckDB's read_csv / read_json in the same stretch of time. Each line's
// ratio_vs_duckdb is sluice's rows/s over DuckDB's, both the fastest of
// their runs.

var textLines = []string{"csv_plain", "csv_gzip", "jsonl_plain", "jsonl_gzip"}

// textVariant is one way of writing the data as text.
type textVariant struct {
	line   string
	ext    string // file name extension, compression included
	reader string // DuckDB's reader: csv or json
	gzip   bool
}

var textVariants = []textVariant{
	{"csv_plain", ".csv", "csv", false},
	{"csv_gzip", ".csv.gz", "csv", true},
	{"jsonl_plain", ".jsonl", "json", false},
	{"jsonl_gzip", ".jsonl.gz", "json", true},
}

func (e *env) textScenario(ctx context.Context) error {
	cols := strings.Join(columnNames(), ",")
	for _, v := range textVariants {
		dir, err := e.writeText(ctx, v)
		if err != nil {
			return fmt.Errorf("%s: write the data as text: %w", v.line, err)
		}
		o := e.opts()
		o.Formats = text.All(text.Options{})
		var best, bestPeer *record
		var sluiceRates, peerRates []float64
		var peerErr string
		for range max(e.cfg.PeerReps, 1) {
			e.cfg.Progress.status("text: sluice " + v.line)
			runtime.GC()
			m, err := measureStream(ctx, streamRun{urls: []string{dir}, opts: o})
			if err == nil {
				err = expectRows(m, e.data.spec.Rows())
			}
			if err != nil {
				return fmt.Errorf("%s: %w", v.line, err)
			}
			sluiceRates = append(sluiceRates, m.rowsPerSec())
			if best == nil || m.rowsPerSec() > best.float("rows_per_s") {
				best = e.result(v.line, e.single(m))
			}
			if e.peers == nil || e.peers.missing != "" || peerErr != "" {
				continue
			}
			e.cfg.Progress.status("text: duckdb " + v.line)
			runtime.GC()
			r, err := e.peers.run(ctx, "duckdb_text.mjs", "--glob", filepath.Join(dir, "*"+v.ext), "--reader", v.reader, "--columns", cols)
			if err == nil {
				if rows, _ := num(r.get("rows")); int64(rows) != e.data.spec.Rows() {
					err = fmt.Errorf("duckdb read %v rows, the data has %d", r.get("rows"), e.data.spec.Rows())
				}
			}
			if err != nil {
				peerErr = err.Error()
				continue
			}
			rate, _ := num(r.get("rows_per_s"))
			peerRates = append(peerRates, rate)
			if bestPeer == nil || rate > bestPeer.float("rows_per_s") {
				bestPeer = r
			}
		}
		best.set("format", strings.TrimPrefix(v.ext, "."))
		best.set("sluice_runs_rows_per_s", roundAll(sluiceRates))
		switch {
		case e.peers == nil || e.peers.missing != "":
			reason := "peers not set up"
			if e.peers != nil {
				reason = e.peers.missing
			}
			best.set("ratio_vs_duckdb", nil).set("duckdb_skipped", "run "+setupCommand+": "+reason)
		case peerErr != "":
			best.set("ratio_vs_duckdb", nil).set("duckdb_error", peerErr)
			e.failed = append(e.failed, fmt.Errorf("%s duckdb: %s", v.line, peerErr))
		default:
			peerRate := bestPeer.float("rows_per_s")
			best.set("duckdb_rows_per_s", peerRate)
			best.set("duckdb_runs_rows_per_s", roundAll(peerRates))
			best.set("duckdb_threads", bestPeer.get("threads"))
			best.set("duckdb_version", bestPeer.get("duckdb_version"))
			best.set("duckdb_query", bestPeer.get("query"))
			best.set("ratio_vs_duckdb", best.float("rows_per_s")/peerRate)
		}
		best.target("ratio_vs_duckdb", ">=", 0.5)
		if err := e.emit(best); err != nil {
			return err
		}
	}
	return nil
}

// writeText writes the dataset's rows as text files of variant v, one per
// Parquet file, in a directory beside the dataset's; it reuses the
// directory when a marker says it holds the same rows.
func (e *env) writeText(ctx context.Context, v textVariant) (string, error) {
	dir := e.data.dir + "-text" + strings.ReplaceAll(v.ext, ".", "-")
	marker := filepath.Join(dir, "_rows")
	want := strconv.FormatInt(e.data.spec.Rows(), 10)
	if b, err := os.ReadFile(marker); err == nil && string(b) == want {
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	e.cfg.Progress.status("text: writing " + v.line)
	for i, src := range e.data.files {
		name := filepath.Join(dir, fmt.Sprintf("part-%05d%s", i, v.ext))
		if err := writeTextFile(ctx, src, name, v); err != nil {
			return "", err
		}
	}
	return dir, os.WriteFile(marker, []byte(want), 0o644)
}

func writeTextFile(ctx context.Context, src, name string, v textVariant) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	var w io.Writer = f
	var zw *gzip.Writer
	if v.gzip {
		zw = gzip.NewWriter(f)
		w = zw
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	ds, err := stream.Open(ctx, stream.Options{URLs: []string{src}})
	if err != nil {
		return err
	}
	defer ds.Close()
	csv := v.reader == "csv"
	names := columnNames()
	if csv {
		bw.WriteString(strings.Join(names, ",") + "\n")
	}
	var line []byte
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return err
		}
		for i := range int(b.NumRows()) {
			line = line[:0]
			if !csv {
				line = append(line, '{')
			}
			for c := range names {
				if c > 0 {
					line = append(line, ',')
				}
				if !csv {
					line = strconv.AppendQuote(line, names[c]) // ASCII names: JSON and Go quoting agree
					line = append(line, ':')
				}
				line = appendText(line, b.Column(c), i, csv)
			}
			if !csv {
				line = append(line, '}')
			}
			line = append(line, '\n')
			bw.Write(line)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

// appendText appends value i of a as a CSV field or a JSON value.
func appendText(b []byte, a arrow.Array, i int, csv bool) []byte {
	if a.IsNull(i) {
		if csv {
			return b
		}
		return append(b, "null"...)
	}
	switch a := a.(type) {
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(i), 10)
	case *array.Float64:
		return strconv.AppendFloat(b, a.Value(i), 'g', -1, 64)
	case *array.String:
		s := a.Value(i)
		if csv {
			if strings.ContainsAny(s, ",\"\r\n") || s == "" {
				return append(append(b, '"'), strings.ReplaceAll(s, `"`, `""`)+`"`...)
			}
			return append(b, s...)
		}
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	return append(b, a.ValueStr(i)...)
}
