package avro_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/storage"
)

const textSchema = `{"type": "record", "name": "t", "fields": [{"name": "id", "type": "long"}, {"name": "text", "type": "string"}]}`

func textRows(n, width int) []map[string]any {
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([]map[string]any, n)
	for i := range rows {
		b := make([]byte, width)
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		rows[i] = map[string]any{"id": int64(i), "text": string(b)}
	}
	return rows
}

// counted plans path through a bucket that counts requests and bytes.
func counted(t *testing.T, path string, opts formats.PlanOptions) (*formats.Scan, *storage.Counting) {
	t.Helper()
	var counter *storage.Counting
	opts.Storage.Wrap = func(b storage.Bucket) storage.Bucket {
		counter = storage.NewCounting(b)
		return counter
	}
	opts.Formats = []formats.Format{avro.Format{UnitBytes: 64 << 10}}
	ds, err := formats.Plan(context.Background(), []string{path}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds, counter
}

type mapCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *mapCache) Get(_ context.Context, k []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(k)]
	if !ok {
		return nil, os.ErrNotExist
	}
	return v, nil
}

func (c *mapCache) Set(_ context.Context, k, v []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[string(k)] = v
	return nil
}

// TestPlanningReads: planning a file of small blocks costs a few large
// requests, one of large blocks a request a block; with a plan cache, a
// second plan reads nothing and plans the same units.
func TestPlanningReads(t *testing.T) {
	dir := t.TempDir()
	small := writeOCF(t, dir, "small.avro", textSchema, textRows(20000, 100), ocf.WithBlockCount(50))
	big := writeOCF(t, dir, "big.avro", textSchema, textRows(300, 40000), ocf.WithBlockCount(30), ocf.WithBlockBytes(4<<20))
	for _, c := range []struct {
		path          string
		blocks        int
		most, atLeast int64
	}{
		{small, 400, 3, 1}, // the header's read, then 4 MiB windows
		{big, 10, 12, 10},  // a request a block of 1.2 MB
	} {
		cache := &mapCache{m: map[string][]byte{}}
		ds, counter := counted(t, c.path, formats.PlanOptions{Cache: cache})
		fr := ds.Fragments[0]
		reads := counter.Requests() - 1 // the Stat
		if reads > c.most || reads < c.atLeast {
			t.Errorf("%s: planning made %d read requests (%d bytes) for %d units, want %d to %d", fr.URL, reads, counter.Bytes(), len(fr.Units), c.atLeast, c.most)
		}
		again, counter2 := counted(t, c.path, formats.PlanOptions{Cache: cache})
		if n := counter2.Requests() - 1; n != 0 {
			t.Errorf("%s: a cached plan made %d read requests", fr.URL, n)
		}
		if fmt.Sprint(again.Fragments[0].Units) != fmt.Sprint(fr.Units) || again.Fragments[0].Rows != fr.Rows {
			t.Errorf("%s: cached plan's units %v, want %v", fr.URL, again.Fragments[0].Units, fr.Units)
		}
		// A damaged cache entry is a miss.
		for k := range cache.m {
			cache.m[k] = []byte{5, 1, 2}
		}
		third, _ := counted(t, c.path, formats.PlanOptions{Cache: cache})
		if fmt.Sprint(third.Fragments[0].Units) != fmt.Sprint(fr.Units) {
			t.Errorf("%s: plan after a damaged cache entry differs", fr.URL)
		}
	}
}

// TestRangesFetchTheirBlocks: reads of row ranges that together cover a
// file fetch its blocks about once: a block cut by a boundary twice, no
// other block.
func TestRangesFetchTheirBlocks(t *testing.T) {
	path := writeOCF(t, t.TempDir(), "r.avro", textSchema, textRows(20000, 100), ocf.WithBlockCount(50))
	ds, counter := counted(t, path, formats.PlanOptions{})
	fr := ds.Fragments[0]
	first := fr.Units[0].Offset
	data := fr.Size - first
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, cuts := range [][]int64{{0, 20000}, {0, 7001, 20000}, {0, 25, 9999, 10000, 14321, 20000}} {
		counter.Reset()
		var ids []int64
		for k := range len(cuts) - 1 {
			err := ds.Read(context.Background(), 0, ds.RowRange(0, cuts[k], cuts[k+1]), 1000, mem, func(b arrow.RecordBatch) error {
				defer b.Release()
				col := b.Column(0)
				for i := range col.Len() {
					ids = append(ids, goValue(col, i).(int64))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, id := range ids {
			if id != int64(i) {
				t.Fatalf("cuts %v: row %d has id %d", cuts, i, id)
			}
		}
		if len(ids) != 20000 {
			t.Fatalf("cuts %v: %d rows", cuts, len(ids))
		}
		// Blocks of 50 rows of about 110 bytes: a cut costs at most one
		// block more.
		most := data + int64(len(cuts)-2)*6000
		if got := counter.Bytes(); got < data || got > most {
			t.Errorf("cuts %v: fetched %d bytes of %d block bytes, want at most %d", cuts, got, data, most)
		}
	}
	if !strings.HasSuffix(fr.URL, "r.avro") {
		t.Fatal(fr.URL)
	}
}

// failingBucket fails every read past the first 64 KiB of an object.
type failingBucket struct{ storage.Bucket }

var errInjected = errors.New("injected read failure")

func (b failingBucket) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	if off >= 64<<10 {
		return 0, errInjected
	}
	return b.Bucket.ReadAt(ctx, obj, p, off)
}

// TestReadFailureIsNotCorrupt: a read that fails while planning walks the
// blocks is the storage's error, not the file's.
func TestReadFailureIsNotCorrupt(t *testing.T) {
	path := writeOCF(t, t.TempDir(), "f.avro", textSchema, textRows(5000, 100), ocf.WithBlockCount(50))
	_, err := formats.Plan(context.Background(), []string{path}, formats.PlanOptions{
		Formats: []formats.Format{avro.Format{}},
		Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket { return failingBucket{b} }},
	})
	if !errors.Is(err, errInjected) || errors.Is(err, formats.ErrCorrupt) {
		t.Fatalf("got %v, want the injected error, not ErrCorrupt", err)
	}
}
