package stream

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats/text"
)

// writeBadCSV writes a CSV file whose bad rows are scattered, fill whole
// byte ranges (windows with no row) and end the file, and returns options
// over it with BadRowsSkip, the good ids and the number of bad rows. The
// last tail rows are bad, and with block 400 rows in the middle.
func writeBadCSV(t *testing.T, count bool, tail int, block bool) (Options, []int64, int64) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,label\n")
	var good []int64
	var bad int64
	for i := range 4000 {
		switch {
		case block && i >= 2000 && i < 2400, i >= 4000-tail:
			fmt.Fprintf(&b, "bad%d,%d\n", i, i%10)
			bad++
		case i%97 == 5:
			fmt.Fprintf(&b, "x%d,%d\n", i, i%10)
			bad++
		case i%89 == 7:
			fmt.Fprintf(&b, "%d,%d,extra\n", i, i%10)
			bad++
		default:
			fmt.Fprintf(&b, "%d,%d\n", i, i%10)
			good = append(good, int64(i))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}
	o := textOptions(t, dir, false)
	o.Formats = text.All(text.Options{UnitBytes: 1 << 10, BadRows: text.BadRowsSkip, Count: count, Schema: arrow.NewSchema(fields, nil)})
	o.Columns = []string{"id", "label"}
	o.Shuffle, o.NumSplits = true, 4
	return o, good, bad
}

// TestSkippedRowsCounted checks that the bad rows are counted once per
// epoch over the ranks, whatever the world size, in the dataset, its
// metrics and its state, and that a second epoch counts them again.
func TestSkippedRowsCounted(t *testing.T) {
	for _, c := range []struct{ count, shuffle bool }{{false, true}, {true, true}, {false, false}} {
		t.Run(fmt.Sprintf("count=%t,shuffle=%t", c.count, c.shuffle), func(t *testing.T) {
			// In storage order the last windows hold only bad rows: the
			// epoch ends with no batch taken from them.
			base, good, bad := writeBadCSV(t, c.count, 600, true)
			base.Shuffle = c.shuffle
			for _, world := range []int{1, 2, 4} {
				var ids []int64
				var fromDS, fromMetrics, twice int64
				var states []State
				for rank := range world {
					o := base
					o.WorldSize, o.Rank = world, rank
					ds := open(t, o)
					bs, st := consume(t, ds, -1)
					ids = append(ids, allIDs(bs)...)
					fromDS += ds.SkippedRows()
					fromMetrics += ds.Metrics().Snapshot().SkippedRows
					states = append(states, st)
					if st.TotalSkipped() != ds.SkippedRows() {
						t.Fatalf("world %d rank %d: state has %d skipped, dataset %d", world, rank, st.TotalSkipped(), ds.SkippedRows())
					}
					if world == 2 {
						// A second epoch counts its bad rows again (the
						// splits' windows differ by epoch: only the sum
						// over the ranks is the file's).
						consume(t, ds, -1)
						twice += ds.SkippedRows()
					}
				}
				if world == 2 && twice != 2*bad {
					t.Fatalf("after two epochs the ranks count %d, want %d", twice, 2*bad)
				}
				slices.Sort(ids)
				if !slices.Equal(ids, good) {
					t.Fatalf("world %d: %d rows, want the %d good ones", world, len(ids), len(good))
				}
				if fromDS != bad || fromMetrics != bad {
					t.Fatalf("world %d: %d skipped by the datasets, %d by their metrics; the file has %d bad rows", world, fromDS, fromMetrics, bad)
				}
				m, err := checkpoint.Merge(states...)
				if err != nil {
					t.Fatal(err)
				}
				if m.TotalSkipped() != bad {
					t.Fatalf("world %d: merged state has %d skipped, want %d", world, m.TotalSkipped(), bad)
				}
			}
		})
	}
}

// TestSkippedRowsResume stops the ranks at random batches, often inside a
// window, merges their states and resumes on another world size, several
// times within an epoch: the count carried by the last states is exactly
// the file's bad rows, none lost at a stop and none counted twice for a
// window read again after a resume.
func TestSkippedRowsResume(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, count := range []bool{false, true} {
		// Bad rows scattered only: a split made mostly of bad rows would
		// let a rank finish its epoch before the others, and the ranks'
		// states of one step would not merge.
		base, good, bad := writeBadCSV(t, count, 0, false)
		for trial := range 4 {
			worlds := [][]int{{4, 2, 1}, {1, 4, 2}, {2, 2, 4}, {1, 1, 2}}[trial]
			var merged *State
			var ids []int64
			var counted int64 // rows the metrics of each process counted
			for i, world := range worlds {
				last := i == len(worlds)-1
				var states []State
				for rank := range world {
					o := base
					o.WorldSize, o.Rank = world, rank
					ds := open(t, o)
					if merged != nil {
						if err := ds.LoadStateDict(*merged); err != nil {
							t.Fatal(err)
						}
					}
					limit := 1 + r.IntN(4) // a rank owns a split of about 12 batches at world 4
					if last {
						limit = -1
					}
					bs, st := consume(t, ds, limit)
					ids = append(ids, allIDs(bs)...)
					counted += ds.Metrics().Snapshot().SkippedRows
					states = append(states, st)
				}
				if last {
					var total int64
					for _, st := range states {
						total += st.TotalSkipped()
					}
					if total != bad {
						t.Fatalf("count=%t worlds %v: the last states carry %d skipped rows, the file has %d", count, worlds, total, bad)
					}
					break
				}
				m, err := checkpoint.Merge(states...)
				if err != nil {
					t.Fatal(err)
				}
				merged = &m
			}
			slices.Sort(ids)
			if !slices.Equal(ids, good) {
				t.Fatalf("count=%t worlds %v: %d rows, want the %d good ones once each", count, worlds, len(ids), len(good))
			}
			// The processes' metrics together count each finished window
			// once too: a window is counted by the process that finished it.
			if counted != bad {
				t.Fatalf("count=%t worlds %v: the processes' metrics counted %d, want %d", count, worlds, counted, bad)
			}
		}
	}
}
