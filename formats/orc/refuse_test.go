package orc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/formats/orc"
)

// refused are the example files sluice does not read, with why.
var refused = map[string]string{
	"version1999.orc": "ORC version [19 99]",
	"zero.orc":        "too small for an ORC file",
}

// TestFilesWithoutExpectedOutput reads every other example file to its
// footer's row count, or sees it refused with its reason.
func TestFilesWithoutExpectedOutput(t *testing.T) {
	examples := orcExamples(t)
	paths, _ := filepath.Glob(filepath.Join(examples, "*.orc"))
	n := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if _, err := os.Stat(filepath.Join(examples, "expected", strings.TrimSuffix(name, ".orc")+".jsn.gz")); err == nil {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rows, err := readFile(p, mem)
			if why, ok := refused[name]; ok {
				if err == nil || !strings.Contains(err.Error(), why) || !errors.Is(err, formats.ErrCorrupt) {
					t.Fatalf("want a refusal saying %q, got %v", why, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rows < 0 {
				t.Fatal("no row count")
			}
		})
	}
	if n < 8 {
		t.Fatalf("only %d example files without expected output", n)
	}
}

// readFile plans one file and reads it whole, checking that it delivers
// the footer's row count.
func readFile(path string, mem memory.Allocator) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{orc.Format{}}})
	if err != nil {
		return 0, err
	}
	defer ds.Close()
	f := ds.Fragments[0]
	// Under the race detector the largest files (demo-11 and demo-12, 1.9M
	// rows) are read at both ends and in the middle; without it, whole.
	ranges := [][2]int64{{0, f.Rows}}
	if raceEnabled && f.Rows > 300_000 {
		ranges = [][2]int64{{0, 100_000}, {f.Rows/2 - 50_000, f.Rows/2 + 50_000}, {f.Rows - 100_000, f.Rows}}
	}
	var got, want int64
	for _, r := range ranges {
		want += r[1] - r[0]
		err = ds.Read(ctx, 0, ds.RowRange(0, r[0], r[1]), 4096, mem, func(b arrow.RecordBatch) error {
			got += b.NumRows()
			b.Release()
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if got != want {
		return 0, errors.New("row count differs from the footer's")
	}
	return f.Rows, nil
}

// TestCorruptAndEncrypted: every file under corrupt/ and encrypted/ is a
// clear error (ErrCorrupt, naming the file), never a panic or a hang.
func TestCorruptAndEncrypted(t *testing.T) {
	examples := orcExamples(t)
	for _, dir := range []string{"corrupt", "encrypted"} {
		paths, _ := filepath.Glob(filepath.Join(examples, dir, "*.orc"))
		if len(paths) == 0 {
			t.Fatalf("no files under %s", dir)
		}
		for _, p := range paths {
			t.Run(dir+"/"+filepath.Base(p), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				_, err := readFile(p, mem)
				if err == nil || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(p)) {
					t.Fatalf("want an error wrapping ErrCorrupt naming the file, got %v", err)
				}
				if pe := (*panics.Error)(nil); errors.As(err, &pe) {
					t.Fatalf("the decoder panicked (%v): %v", pe.Value, err)
				}
				t.Log(err)
			})
		}
	}
}
