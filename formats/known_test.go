package formats_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
)

// A plan given what an earlier one found (PlanOptions.Known) is that plan,
// unit for unit and row for row, with a mask and a filter that change the
// units' counts, while its driver inspects each file only when it is first
// read; and a file the earlier plan described otherwise than its footer
// fails its reads with ErrNotAsKnown.
func TestKnownFiles(t *testing.T) {
	dir, _ := writeLayout(t, layout)
	written := fileIDs(layout)
	mem := checkedMem(t)
	masks := map[string]*formats.RowMask{}
	for i, f := range planArrow(t, dir, false, formats.PlanOptions{}).Fragments {
		m := &formats.RowMask{}
		for row := int64(1); row < int64(len(written[i])); row += 4 {
			m.Deleted = append(m.Deleted, row)
		}
		masks[f.URL] = m
	}
	o := formats.PlanOptions{Columns: []string{"id", "s"}, Filter: modFilter{"id", 3, mem}, Masks: masks}
	first := planArrow(t, dir, false, o)
	known := map[string]formats.KnownFile{}
	for _, f := range first.Fragments {
		k := f.Inspected()
		k.SchemaOf = first.Fragments[0].URL
		known[f.URL] = k
	}
	o.Known = func(f *formats.Fragment) (formats.KnownFile, bool) {
		k, ok := known[f.URL]
		return k, ok
	}
	again := planArrow(t, dir, false, o)
	r := rand.New(rand.NewPCG(4, 9))
	for i, f := range again.Fragments {
		g := first.Fragments[i]
		if !reflect.DeepEqual(f.Units, g.Units) || f.Rows != g.Rows || !f.Schema.Equal(g.Schema) {
			t.Fatalf("%s: planned from Known as %+v (%d rows), inspected as %+v (%d rows)", f.Rel, f.Units, f.Rows, g.Units, g.Rows)
		}
		if (f.Meta != nil) != (i == 0) {
			t.Fatalf("%s: inspected at plan time %t: want only the schema's file", f.Rel, f.Meta != nil)
		}
		want, _ := readIDs(t, first, i, whole(first, i), 1+r.IntN(8), mem)
		got, _ := readIDs(t, again, i, whole(again, i), 1+r.IntN(8), mem)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: read %v, want %v", f.Rel, got, want)
		}
		if f.Meta == nil && len(f.Units) > 0 {
			t.Fatalf("%s: read, and still not inspected", f.Rel)
		}
	}

	// Other units than the footer's: reads of that file fail, others not.
	wrong := known[again.Fragments[4].URL]
	wrong.Units = slices.Clone(wrong.Units)
	wrong.Units[0].Bytes++
	known[again.Fragments[4].URL] = wrong
	bad := planArrow(t, dir, false, o)
	if _, _, err := tryRead(bad, 4, whole(bad, 4), 4, mem); !errors.Is(err, formats.ErrNotAsKnown) {
		t.Fatalf("read of a file not as known: got %v, want ErrNotAsKnown", err)
	}
	if _, _, err := tryRead(bad, 0, whole(bad, 0), 4, mem); err != nil {
		t.Fatal(err)
	}
	// The file whose schema the others take is checked at plan time.
	wrong = known[again.Fragments[0].URL]
	wrong.Rows++
	known[again.Fragments[0].URL] = wrong
	if _, err := formats.Plan(t.Context(), []string{dir}, withArrow(o)); !errors.Is(err, formats.ErrNotAsKnown) {
		t.Fatalf("plan with the schema's file not as known: got %v, want ErrNotAsKnown", err)
	}
}

func withArrow(o formats.PlanOptions) formats.PlanOptions {
	o.Formats = []formats.Format{arrowfile.Format{}}
	return o
}
