package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/stream"
)

// The iceberg scenario's data (the quick run's dataset) and table, written
// once per process, for profiles of the table path beside the plain one:
//
//	go test ./bench -run '^$' -bench 'Iceberg' -cpuprofile cpu.out
var (
	icebergOnce sync.Once
	icebergData struct {
		dir, table string
		files      []string
		left       int64
		err        error
	}
)

func icebergBenchData(b *testing.B) (dir, table string, left int64) {
	b.Helper()
	d := &icebergData
	icebergOnce.Do(func() {
		spec := quickConfig().Spec
		if d.dir, d.err = os.MkdirTemp("", "sluice-bench-iceberg-"); d.err != nil {
			return
		}
		data := filepath.Join(d.dir, "data")
		if d.err = synth.WriteDir(data, spec); d.err != nil {
			return
		}
		for i := range spec.Files {
			d.files = append(d.files, filepath.Join(data, synth.FileName(i)))
		}
		d.table, d.left, d.err = icebergTable(context.Background(), filepath.Join(d.dir, "table"), d.files, spec.Rows(), true)
	})
	if d.err != nil {
		b.Fatal(d.err)
	}
	return filepath.Join(d.dir, "data"), d.table, d.left
}

func BenchmarkIcebergDeletes(b *testing.B) {
	_, loc, left := icebergBenchData(b)
	var m measurement
	for b.Loop() {
		var err error
		if m, err = measureTable(context.Background(), loc, stream.Options{BatchSize: quickConfig().BatchSize}); err == nil {
			err = expectRows(m, left)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, m)
}

// BenchmarkIcebergPlain streams the table's data files as plain Parquet.
func BenchmarkIcebergPlain(b *testing.B) {
	dir, _, _ := icebergBenchData(b)
	var m measurement
	for b.Loop() {
		var err error
		if m, err = measureStream(context.Background(), streamRun{urls: []string{dir}, opts: stream.Options{BatchSize: quickConfig().BatchSize}}); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, m)
}

// BenchmarkIcebergPlanCached plans the iceberg scenario's table of 2,000
// files from the plan cache, as iceberg_plan_2000_files's cached_seconds.
func BenchmarkIcebergPlanCached(b *testing.B) {
	dir := b.TempDir()
	spec := synth.Spec{Files: 2000, RowsPerFile: 200, RowGroupRows: 200, Seed: 3}
	data := filepath.Join(dir, "data")
	if err := synth.WriteDir(data, spec); err != nil {
		b.Fatal(err)
	}
	var files []string
	for i := range spec.Files {
		files = append(files, filepath.Join(data, synth.FileName(i)))
	}
	ctx := context.Background()
	loc, _, err := icebergTable(ctx, filepath.Join(dir, "table"), files, spec.Rows(), false)
	if err != nil {
		b.Fatal(err)
	}
	cache := &formats.MemoryCache{}
	plan := func() {
		tbl, err := iceberg.Open(ctx, loc, iceberg.Options{Cache: cache})
		if err != nil {
			b.Fatal(err)
		}
		defer tbl.Close()
		d, err := tbl.Plan(ctx, formats.PlanOptions{Cache: cache})
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	plan() // fills the cache
	for b.Loop() {
		plan()
	}
}
