package steplog_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/steplog"
)

// A run's lines read back as written; a line a kill cut short is dropped,
// and only the steps between two checkpoints count as committed.
func TestReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.log")
	l, err := steplog.Create(path, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []steplog.Entry{{Step: 5, IDs: []int64{1, 2}}, {Step: 6, IDs: []int64{3}}, {Step: 7, IDs: []int64{4, 5, 6}}}
	for _, e := range steps {
		if err := l.Step(e.Step, e.IDs); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Done(); err != nil {
		t.Fatal(err)
	}
	r, err := steplog.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Start != 4 || !r.Done || len(r.Entries) != 3 {
		t.Fatalf("read %+v", r)
	}
	for i, e := range r.Entries {
		if e.Step != steps[i].Step || !slices.Equal(e.IDs, steps[i].IDs) {
			t.Errorf("entry %d: %+v, want %+v", i, e, steps[i])
		}
	}
	if got := r.Committed(nil, 4, 6); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("committed %v", got)
	}

	// Step 6 was synced with its checkpoint; step 7 was not, and a kill
	// cut its line short.
	cut := filepath.Join(t.TempDir(), "cut.log")
	if err := os.WriteFile(cut, []byte("start 4\n5 1 2\n6 3\n7 4 5"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = steplog.Read(cut)
	if err != nil {
		t.Fatal(err)
	}
	if r.Done || len(r.Entries) != 2 || r.Entries[1].Step != 6 {
		t.Fatalf("a cut log read as %+v", r)
	}

	r, err = steplog.Read(filepath.Join(t.TempDir(), "never"))
	if err != nil || r.Start != -1 || len(r.Entries) != 0 {
		t.Fatalf("a run killed before it logged: %+v, %v", r, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.log")
	if err := os.WriteFile(bad, []byte("start 0\n1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := steplog.Read(bad); err == nil {
		t.Fatal("a malformed line read without an error")
	}
}
