package stream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/sample"
)

// twoEpochs hands each batch of two epochs of batches to each.
func twoEpochs(ctx context.Context, batches func(context.Context) iter.Seq2[arrow.RecordBatch, error], each func(arrow.RecordBatch) error) error {
	for range 2 {
		for b, err := range batches(ctx) {
			if err != nil {
				return err
			}
			if err := each(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// recycleCorpus is the options of a shuffled read of each small file of
// the shared corpus that sluice opens: Parquet, ORC, and a spread of the
// text cases.
func recycleCorpus(t *testing.T) []Options {
	t.Helper()
	shared := corpus.Dir(t)
	var files, texts []string
	for _, dir := range []string{"parquet-testing/data", "real", "orc", "text"} {
		filepath.WalkDir(filepath.Join(shared, dir), func(path string, e fs.DirEntry, err error) error {
			switch ext := filepath.Ext(path); {
			case err != nil || e.IsDir():
			case ext == ".parquet" || ext == ".orc":
				files = append(files, path)
			case ext == ".csv" || ext == ".json" || ext == ".jsonl":
				texts = append(texts, path)
			}
			return nil
		})
	}
	// The text corpus is hundreds of DuckDB's small CSV and JSON cases: a
	// spread of 60 of them covers its decoders without its minutes under
	// -race.
	for i := 0; i < len(texts); i += max(1, len(texts)/60) {
		files = append(files, texts[i])
	}
	if len(files) == 0 {
		t.Fatal("no Parquet files in", shared)
	}
	var out []Options
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > 1<<20 {
			continue // the larger files add time under -race, not types
		}
		o := Options{URLs: []string{f}, Shuffle: true, Seed: 7, ShuffleWindow: 256, BatchSize: 100, Limits: Limits{ReadConcurrency: 3, ReadBatchSize: 100}}
		switch filepath.Ext(f) {
		case ".orc":
			o.Formats = []formats.Format{orc.Format{}}
		case ".csv":
			o.Formats = []formats.Format{text.New(text.CSV, text.Options{})}
		case ".json":
			o.Formats = []formats.Format{text.New(text.JSON, text.Options{})}
		case ".jsonl":
			o.Formats = []formats.Format{text.New(text.JSONLines, text.Options{})}
		}
		out = append(out, o)
	}
	// Under -short a spread of the kinds: each file is two or four epochs,
	// seconds under -race.
	return sample.Spread(out, 24)
}

// A shuffled epoch decoded into recycled buffers is exactly the epoch
// decoded into fresh ones (NaN equal to NaN, no tolerance), batch for
// batch, over every file of the shared test data up to 1 MiB that opens:
// Parquet of other writers (every column type and encoding they hold), ORC,
// CSV and JSON; small windows so that every file has several, three
// decoders, and two epochs, the second decoding into the first's buffers.
func TestRecycledDecodeIsExact(t *testing.T) {
	ctx := context.Background()
	// Two epochs' batches, held: the second run's are compared to them.
	epochs := func(ds *Dataset, each func(arrow.RecordBatch) error) error {
		return twoEpochs(ctx, ds.Batches, each)
	}
	corpus := recycleCorpus(t)
	compared := 0
	for _, o := range corpus {
		f := o.URLs[0]
		fresh, err := Open(ctx, o)
		if err != nil {
			continue // a file sluice refuses, with its own tests
		}
		if n := fresh.Splits()[0].Rows; n > 100_000 {
			fresh.Close() // ORC's 1.9M-row demo files: seconds, and no new types
			continue
		}
		fresh.eng.SetNoRecycle(true)
		var want []arrow.RecordBatch
		err = epochs(fresh, func(b arrow.RecordBatch) error {
			b.Retain()
			want = append(want, b)
			return nil
		})
		fresh.Close()
		if err != nil {
			for _, b := range want {
				b.Release()
			}
			continue
		}
		recycled, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		err = epochs(recycled, func(b arrow.RecordBatch) error {
			if i >= len(want) || !array.RecordApproxEqual(b, want[i], array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
				return fmt.Errorf("batch %d differs from the one decoded into fresh buffers", i)
			}
			i++
			return nil
		})
		recycled.Close()
		for _, b := range want {
			b.Release()
		}
		if err == nil && i != len(want) {
			err = fmt.Errorf("%d batches, fresh buffers gave %d", i, len(want))
		}
		if err != nil {
			t.Fatalf("%s: recycled: %v", f, err)
		}
		compared++
	}
	if compared < len(corpus)/4 {
		t.Fatalf("compared %d of %d files", compared, len(corpus))
	}
	t.Logf("%d of %d files compared", compared, len(corpus))
}

// TestRecycledMixIsExact: a mix's lanes permute their windows into
// recycled buffers, unzeroed where every column takes a fast path of the
// gather; each file of the corpus mixed with itself (two shuffles, weights
// 1:2) gives the same batches, value for value over two epochs, as the
// same mix with nothing recycled. Files whose counts are not known before
// reading (which a mix refuses), and those of more than 30,000 rows, are
// left out.
func TestRecycledMixIsExact(t *testing.T) {
	ctx := context.Background()
	run := func(o Options, fresh bool, each func(arrow.RecordBatch) error) error {
		var srcs []MixSource
		defer func() {
			for _, s := range srcs {
				s.Dataset.Close()
			}
		}()
		for k := range 2 {
			o.Seed = uint64(7 + k)
			ds, err := Open(ctx, o)
			if err != nil {
				return err
			}
			ds.eng.SetNoRecycle(fresh)
			srcs = append(srcs, MixSource{Dataset: ds, Weight: float64(1 + k)})
			if ds.Splits()[0].Rows > 30_000 {
				// The demo ORC files and the larger tables: seconds
				// under -race, and no types the others lack.
				return errors.New("too large")
			}
		}
		m, err := Mix(srcs, MixOptions{Seed: 3, BatchSize: 100})
		if err != nil {
			return err
		}
		return twoEpochs(ctx, m.Batches, each)
	}
	corpus := recycleCorpus(t)
	compared := 0
	for _, o := range corpus {
		var want []arrow.RecordBatch
		err := run(o, true, func(b arrow.RecordBatch) error {
			b.Retain()
			want = append(want, b)
			return nil
		})
		if err != nil {
			for _, b := range want {
				b.Release()
			}
			continue // a file sluice refuses, or will not mix
		}
		i := 0
		err = run(o, false, func(b arrow.RecordBatch) error {
			if i >= len(want) || !array.RecordApproxEqual(b, want[i], array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
				return fmt.Errorf("batch %d differs from the one made of fresh buffers", i)
			}
			i++
			return nil
		})
		for _, b := range want {
			b.Release()
		}
		if err == nil && i != len(want) {
			err = fmt.Errorf("%d batches, fresh buffers gave %d", i, len(want))
		}
		if err != nil {
			t.Fatalf("%s: recycled: %v", o.URLs[0], err)
		}
		compared++
	}
	if compared < len(corpus)/4 {
		t.Fatalf("compared %d of %d files", compared, len(corpus))
	}
	t.Logf("%d of %d files compared", compared, len(corpus))
}
