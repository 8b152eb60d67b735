package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/stream"
)

// naiveRows computes a snapshot's rows the plain way, apart from the
// package's planning: every manifest entry of the snapshot, every data
// and delete file read whole with arrow-go's own Parquet reader, and the
// spec's rules applied row by row. Rows are rendered as text over the
// current schema's columns (null where a file lacks one), in a sorted
// multiset.
func naiveRows(t *testing.T, meta table.Metadata, snap *table.Snapshot, local func(string) string) []string {
	t.Helper()
	fio := iceio.LocalFS{}
	manifests, err := snap.Manifests(pathIO{fio, local})
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		df  ice.DataFile
		seq int64
	}
	var data, pos, eq []entry
	for _, m := range manifests {
		var entries []ice.ManifestEntry
		if m.ManifestContent() == ice.ManifestContentDeletes {
			// The content as the manifest list gives it: older engines'
			// delete manifests leave it out of their header.
			b, err := os.ReadFile(local(m.FilePath()))
			if err != nil {
				t.Fatal(err)
			}
			b = editAvroMeta(t, b, func(keys []string, vals [][]byte) ([]string, [][]byte) {
				if !slices.Contains(keys, "content") {
					keys, vals = append(keys, "content"), append(vals, []byte("deletes"))
				}
				if !slices.Contains(keys, "format-version") {
					keys, vals = append(keys, "format-version"), append(vals, []byte(strconv.Itoa(m.Version())))
				}
				return keys, vals
			})
			entries, err = ice.ReadManifest(m, bytes.NewReader(b), true)
			if err != nil {
				t.Fatal(err)
			}
		} else if entries, err = m.FetchEntries(pathIO{fio, local}, true); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			en := entry{e.DataFile(), e.SequenceNum()}
			switch e.DataFile().ContentType() {
			case ice.EntryContentData:
				data = append(data, en)
			case ice.EntryContentPosDeletes:
				pos = append(pos, en)
			case ice.EntryContentEqDeletes:
				eq = append(eq, en)
			}
		}
	}
	cur := meta.CurrentSchema()
	var out []string
	for _, d := range data {
		cols, n := readByID(t, local(d.df.FilePath()), cur.Fields())
		partitionColumns(t, meta, d.df, cols)
		deleted := map[int64]bool{}
		for _, p := range pos {
			if p.seq < d.seq {
				continue
			}
			pc, pn := readByName(t, local(p.df.FilePath()), "file_path", "pos")
			for r := range pn {
				if local(pc[0][r]) == local(d.df.FilePath()) {
					v, _ := strconv.ParseInt(pc[1][r], 10, 64)
					deleted[v] = true
				}
			}
		}
		var eqSets []map[string]bool
		var eqIdx [][]int
		for _, e := range eq {
			if e.seq <= d.seq {
				continue
			}
			spec := meta.PartitionSpecByID(int(e.df.SpecID()))
			if !spec.IsUnpartitioned() && (e.df.SpecID() != d.df.SpecID() || !reflect.DeepEqual(e.df.Partition(), d.df.Partition())) {
				continue
			}
			var fields []ice.NestedField
			var idx []int
			for _, id := range e.df.EqualityFieldIDs() {
				for i, f := range cur.Fields() {
					if f.ID == id {
						fields = append(fields, f)
						idx = append(idx, i)
					}
				}
			}
			ec, en := readByID(t, local(e.df.FilePath()), fields)
			set := map[string]bool{}
			for r := range en {
				var k []string
				for c := range ec {
					k = append(k, ec[c][r])
				}
				set[strings.Join(k, "\x00")] = true
			}
			eqSets = append(eqSets, set)
			eqIdx = append(eqIdx, idx)
		}
	rows:
		for r := range n {
			if deleted[int64(r)] {
				continue
			}
			for s, set := range eqSets {
				var k []string
				for _, c := range eqIdx[s] {
					k = append(k, cols[c][r])
				}
				if set[strings.Join(k, "\x00")] {
					continue rows
				}
			}
			var vals []string
			for c := range cols {
				vals = append(vals, cols[c][r])
			}
			out = append(out, strings.Join(vals, "|"))
		}
	}
	sort.Strings(out)
	return out
}

// partitionColumns fills the columns a data file lacks (all null in cols)
// that an identity partition of the file's spec has a value of, with that
// value, as the spec's column projection says: the partition columns of a
// table migrated from Hive are only in its manifests.
func partitionColumns(t *testing.T, meta table.Metadata, df ice.DataFile, cols [][]string) {
	t.Helper()
	cur := meta.CurrentSchema()
	as, err := table.SchemaToArrowSchema(cur, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	for _, part := range spec.Fields() {
		if _, ok := part.Transform.(ice.IdentityTransform); !ok {
			continue
		}
		for c, f := range cur.Fields() {
			if f.ID != part.SourceID() || slices.ContainsFunc(cols[c], func(v string) bool { return v != "(null)" }) {
				continue
			}
			v := df.Partition()[part.FieldID]
			for r := range cols[c] {
				cols[c][r] = partitionCell(t, v, as.Field(c).Type)
			}
		}
	}
}

// partitionCell renders a partition value as cell renders the column.
func partitionCell(t *testing.T, v any, typ arrow.DataType) string {
	t.Helper()
	if v == nil {
		return "(null)"
	}
	b := array.NewBuilder(memory.DefaultAllocator, typ)
	defer b.Release()
	switch v := v.(type) {
	case string:
		b.(*array.StringBuilder).Append(v)
	case int32:
		switch bb := b.(type) {
		case *array.Int32Builder:
			bb.Append(v)
		case *array.Date32Builder:
			bb.Append(arrow.Date32(v))
		default:
			t.Fatalf("partition value %v (int32) of a %s column", v, typ)
		}
	case int64:
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(v)
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(v))
		default:
			t.Fatalf("partition value %v (int64) of a %s column", v, typ)
		}
	case ice.Date:
		b.(*array.Date32Builder).Append(arrow.Date32(v))
	case ice.Timestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v))
	default:
		t.Fatalf("partition value %v of Go type %T: not rendered", v, v)
	}
	a := b.NewArray()
	defer a.Release()
	return cell(a, 0)
}

// pathIO reads the table's locations at their local copies.
type pathIO struct {
	iceio.LocalFS
	local func(string) string
}

func (p pathIO) Open(name string) (iceio.File, error) { return p.LocalFS.Open(p.local(name)) }

// readByID reads a Parquet file whole and renders the columns whose field
// id (or, for a file without ids, name) matches fields, in fields' order;
// a column the file lacks renders as null.
func readByID(t *testing.T, path string, fields []ice.NestedField) ([][]string, int) {
	t.Helper()
	tbl := readParquet(t, path)
	defer tbl.Release()
	out := make([][]string, len(fields))
	n := int(tbl.NumRows())
	for i, f := range fields {
		col := -1
		for c, fl := range tbl.Schema().Fields() {
			if v, ok := fl.Metadata.GetValue("PARQUET:field_id"); ok && v == strconv.Itoa(f.ID) {
				col = c
			}
		}
		if col < 0 {
			if idx := tbl.Schema().FieldIndices(f.Name); len(idx) > 0 && !hasIDs(tbl.Schema()) {
				col = idx[0]
			}
		}
		out[i] = render(tbl, col, n)
	}
	return out, n
}

func readByName(t *testing.T, path string, names ...string) ([][]string, int) {
	t.Helper()
	tbl := readParquet(t, path)
	defer tbl.Release()
	n := int(tbl.NumRows())
	out := make([][]string, len(names))
	for i, name := range names {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("%s has no column %s", path, name)
		}
		out[i] = render(tbl, idx[0], n)
	}
	return out, n
}

func hasIDs(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if v, ok := f.Metadata.GetValue("PARQUET:field_id"); ok && v != "-1" {
			return true
		}
	}
	return false
}

func render(tbl arrow.Table, col, n int) []string {
	out := make([]string, 0, n)
	if col < 0 {
		for range n {
			out = append(out, "(null)")
		}
		return out
	}
	for _, ch := range tbl.Column(col).Data().Chunks() {
		for r := range ch.Len() {
			out = append(out, cell(ch, r))
		}
	}
	return out
}

// cell renders one value so that a value widened by a promotion (int to
// long, float to double) renders as before.
func cell(a arrow.Array, r int) string {
	if a.IsNull(r) {
		return "(null)"
	}
	s := a.ValueStr(r)
	if f, err := strconv.ParseFloat(s, 64); err == nil && (a.DataType().ID() == arrow.FLOAT32 || a.DataType().ID() == arrow.FLOAT64) {
		return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
	}
	return s
}

func readParquet(t *testing.T, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tbl
}

// streamRows streams a dataset whole, as a training loop would (shuffled,
// in batches), and renders its rows like naiveRows.
func streamRows(t *testing.T, o stream.Options) []string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	o.Allocator = mem
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var out []string
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		for r := range int(b.NumRows()) {
			var vals []string
			for c := range int(b.NumCols()) {
				vals = append(vals, cell(b.Column(c), r))
			}
			out = append(out, strings.Join(vals, "|"))
		}
		b.Release()
	}
	sort.Strings(out)
	return out
}

// sameRows fails with the first difference of two sorted multisets.
func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	msg := fmt.Sprintf("%s: %d rows, want %d", what, len(got), len(want))
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			msg += fmt.Sprintf("; first difference at %d: got %q, want %q", i, got[i], want[i])
			break
		}
	}
	t.Fatal(msg)
}
