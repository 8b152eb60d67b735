//go:build unix

package avro_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
)

// benchSchema is a row of a training table: ids, features, a label, text.
const benchSchema = `{"type": "record", "name": "row", "fields": [
	{"name": "id", "type": "long"},
	{"name": "label", "type": "int"},
	{"name": "x", "type": {"type": "array", "items": "float"}},
	{"name": "score", "type": ["null", "double"]},
	{"name": "text", "type": "string"}
]}`

func benchFile(b *testing.B, n int) string {
	rng := rand.New(rand.NewPCG(7, 8))
	rows := make([]map[string]any, n)
	for i := range rows {
		x := make([]any, 16)
		for j := range x {
			x[j] = rng.Float32()
		}
		rows[i] = map[string]any{"id": int64(i), "label": int32(rng.IntN(10)), "x": x, "score": rng.Float64(), "text": "some text of a row"}
	}
	return writeOCF(b, b.TempDir(), "bench.avro", benchSchema, rows, ocf.WithCodec(ocf.SnappyCodec()))
}

// BenchmarkDecode reads a file of 100,000 rows through the driver, and
// (for the ratio) decodes it with twmb/avro into Go values.
func BenchmarkDecode(b *testing.B) {
	const n = 100_000
	path := benchFile(b, n)
	b.Run("sluice", func(b *testing.B) {
		benchRead(b, path, n)
	})
	b.Run("twmb-any", func(b *testing.B) {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		cpu := cpuClock()
		for b.Loop() {
			r, err := ocf.NewReader(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			for {
				var v any
				if err := r.Decode(&v); err != nil {
					break
				}
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/cpu(), "rows/cpu-s")
	})
}

// cpuClock starts a clock of the process's CPU time (user and system), in
// seconds: on a shared machine, wall time says more of the neighbours.
func cpuClock() func() float64 {
	now := func() float64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	start := now()
	return func() float64 { return now() - start }
}

// BenchmarkDecodeFlat reads rows of the bench's avro_benchdata shape (two
// longs, a double, a string of 16 bytes; snappy blocks of 4,096 rows), the
// shape most training tables take.
func BenchmarkDecodeFlat(b *testing.B) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(7, 8))
	rows := make([]map[string]any, n)
	for i := range rows {
		s := make([]byte, 16)
		for j := range s {
			s[j] = byte('a' + rng.IntN(26))
		}
		rows[i] = map[string]any{"id": int64(i), "label": int64(rng.IntN(10)), "x": rng.Float64(), "s": string(s)}
	}
	path := writeOCF(b, b.TempDir(), "flat.avro", `{"type": "record", "name": "row", "fields": [
		{"name": "id", "type": "long"}, {"name": "label", "type": "long"},
		{"name": "x", "type": "double"}, {"name": "s", "type": "string"}]}`, rows, ocf.WithCodec(ocf.SnappyCodec()), ocf.WithBlockCount(4096))
	benchRead(b, path, n)
}

// benchRead reads the n rows of path through the driver at each turn of
// b's loop, reporting rows per CPU second.
func benchRead(b *testing.B, path string, n int64) {
	ds := plan(b, avro.Format{}, formats.PlanOptions{}, path)
	cpu := cpuClock()
	for b.Loop() {
		err := ds.Read(context.Background(), 0, ds.RowRange(0, 0, n), 8192, memory.DefaultAllocator, func(r arrow.RecordBatch) error {
			r.Release()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/cpu(), "rows/cpu-s")
}
