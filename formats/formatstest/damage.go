package formatstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/formats"
)

// Hang is how long a read of a damaged file may take before the suite
// calls the driver hung. A var, so that a slow machine (the race
// detector) can give more.
var Hang = 2 * time.Minute

// damage is a damaged file the suite reads.
type damage struct {
	name string
	b    []byte
	// mustFail: the read must end in an error (random bytes, a driver's
	// own damage); else it may also read rows as written only.
	mustFail bool
	// cut: the file is cut short, which an unframed format may read as a
	// shorter file whose last row is cut short.
	cut bool
}

// testDamaged: a damaged file is an error that names the file (and the
// range read, where reading found it), never a panic, a hang or rows other
// than written.
func (s *suite) testDamaged(t *testing.T) {
	if s.d.Dataset != nil {
		t.Skip("a Dataset driver's files are read by file drivers, which run the suite themselves")
	}
	ds := s.files(t, []int64{1300}, nil)
	orig, err := os.ReadFile(ds.paths[0])
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, len(orig))
	r := rng(t)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	damages := []damage{
		{name: "random bytes", b: random, mustFail: true},
		{name: "cut to half", b: orig[:len(orig)/2], cut: true},
		{name: "cut short by a byte", b: orig[:len(orig)-1], cut: true},
		{name: "cut to 16 bytes", b: orig[:min(16, len(orig))], cut: true},
	}
	for _, dm := range s.d.Damages {
		damages = append(damages, damage{name: dm.Name, b: dm.Apply(slices.Clone(orig)), mustFail: true})
	}
	for _, dm := range damages {
		t.Run(strings.ReplaceAll(dm.name, " ", "_"), func(t *testing.T) { s.damaged(t, dm) })
	}
}

// damaged plans and reads the damaged file dm whole and unit by unit.
func (s *suite) damaged(t *testing.T, dm damage) {
	path := filepath.Join(t.TempDir(), "damaged"+s.d.Ext)
	if err := os.WriteFile(path, dm.b, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := checkedMem(t)
	failed := false
	err := s.bounded(t, func(ctx context.Context) error {
		scan, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: s.d.Formats})
		if err != nil {
			failed = true
			t.Logf("planning: %v", err)
			if !names(err, path) {
				return fmt.Errorf("planning fails with an error that does not name the file: %w", err)
			}
			return nil
		}
		defer scan.Close()
		for i, f := range scan.Fragments {
			ranges := []formats.Range{whole(scan, i)}
			for u := range f.Units {
				ranges = append(ranges, units(u, u+1))
			}
			for k, rr := range ranges {
				rows, _, err := s.read(ctx, scan, i, rr, 100, mem)
				if err != nil {
					failed = true
					t.Logf("reading %v: %v", rr, err)
					if !names(err, path) || !strings.Contains(err.Error(), rr.String()) {
						return fmt.Errorf("reading %v fails with an error that does not name the file and the range: %w", rr, err)
					}
				}
				if dm.cut && s.d.Unframed && (k == 0 || k == len(ranges)-1) && err == nil && len(rows) > 0 {
					// The file's last row, read whole or with the last
					// unit, may be cut short.
					rows = rows[:len(rows)-1]
				}
				if err := s.asWritten(rows); err != nil {
					return fmt.Errorf("reading %v: %w", rr, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %s: %v", s.name, dm.name, err)
	}
	if dm.mustFail && !failed {
		t.Fatalf("%s: %s: read with no error", s.name, dm.name)
	}
}

// asWritten says which of rows, delivered from a damaged file, is not a
// row as written (in file order, each once).
func (s *suite) asWritten(rows []row) error {
	for k, r := range rows {
		if w := s.wrong(r); w != "" {
			return fmt.Errorf("a row other than written: %s", w)
		}
		if k > 0 && r.id <= rows[k-1].id {
			return fmt.Errorf("row id %d after row id %d", r.id, rows[k-1].id)
		}
	}
	return nil
}

// bounded runs fn on a goroutine of its own, turning a panic into an
// error, and fails t if it does not return within Hang.
func (s *suite) bounded(t *testing.T, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panicked: %v", p)
			}
		}()
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer in %v: the driver hangs: %w", Hang, err)
		}
		return err
	case <-time.After(Hang + Hang/2):
		t.Fatalf("%s: no answer in %v, not even to the context's deadline: the driver hangs", s.name, Hang)
		return nil
	}
}

// containsBase reports whether text holds the base name of path.
func containsBase(text, path string) bool {
	return strings.Contains(text, filepath.Base(path))
}
