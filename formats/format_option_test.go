package formats_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
)

// TestPlanFormatOption: PlanOptions.Format reads every file of a listing
// with the driver it names, whatever the file's name; a name no driver of
// Formats has is refused, naming the drivers there are.
func TestPlanFormatOption(t *testing.T) {
	dir, rows := writeLayout(t, layout)
	if err := os.Rename(filepath.Join(dir, "part-03.arrow"), filepath.Join(dir, "part-03.bin")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fs := []formats.Format{arrowfile.Format{}}
	count := func(s *formats.Scan) (n int64) {
		for _, f := range s.Fragments {
			n += f.Rows
		}
		return n
	}
	without, err := formats.Plan(ctx, []string{dir}, formats.PlanOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	if len(without.Fragments) != len(layout)-1 || count(without) != rows-31 {
		t.Errorf("without Format: %d files, %d rows; want the .bin file left out", len(without.Fragments), count(without))
	}
	with, err := formats.Plan(ctx, []string{dir}, formats.PlanOptions{Formats: fs, Format: "arrow"})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if len(with.Fragments) != len(layout) || count(with) != rows {
		t.Errorf("with Format: %d files, %d rows, want %d and %d", len(with.Fragments), count(with), len(layout), rows)
	}
	_, err = formats.Plan(ctx, []string{dir}, formats.PlanOptions{Formats: fs, Format: "csv"})
	if err == nil || !strings.Contains(err.Error(), `PlanOptions.Format "csv"`) || !strings.Contains(err.Error(), "(arrow)") {
		t.Errorf("Format csv over an arrow driver: %v", err)
	}
}
