package iceberg_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/internal/testkit/valuecheck/matrix"
	"github.com/sluicedata/sluice/stream"
)

// editAvroMeta rewrites the header metadata of the Avro object container
// file b with edit; the sync marker and blocks are kept byte for byte.
func editAvroMeta(t *testing.T, b []byte, edit func(keys []string, vals [][]byte) ([]string, [][]byte)) []byte {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("Obj\x01")) {
		t.Fatal("not an Avro file")
	}
	pos := 4
	long := func() int64 {
		v, n := binary.Varint(b[pos:])
		if n <= 0 {
			t.Fatalf("bad varint at %d", pos)
		}
		pos += n
		return v
	}
	str := func() []byte {
		n := long()
		v := b[pos : pos+int(n)]
		pos += int(n)
		return v
	}
	var keys []string
	var vals [][]byte
	for {
		n := long()
		if n == 0 {
			break
		}
		if n < 0 {
			long()
			n = -n
		}
		for range n {
			keys = append(keys, string(str()))
			vals = append(vals, str())
		}
	}
	keys, vals = edit(keys, vals)
	out := binary.AppendVarint([]byte("Obj\x01"), int64(len(keys)))
	for i, k := range keys {
		out = binary.AppendVarint(out, int64(len(k)))
		out = append(out, k...)
		out = binary.AppendVarint(out, int64(len(vals[i])))
		out = append(out, vals[i]...)
	}
	out = binary.AppendVarint(out, 0)
	return append(out, b[pos:]...)
}

// stripAvroKeys rewrites the header of the Avro file at path without the
// keys drop, as older engines wrote delete manifests: the schema and
// codec, no "content" or "format-version". It returns the keys it had.
func stripAvroKeys(t *testing.T, path string, drop ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var had []string
	b = editAvroMeta(t, b, func(keys []string, vals [][]byte) ([]string, [][]byte) {
		had = keys
		var k2 []string
		var v2 [][]byte
		for i, k := range keys {
			if !slices.Contains(drop, k) {
				k2, v2 = append(k2, k), append(v2, vals[i])
			}
		}
		return k2, v2
	})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return had
}

// A table whose delete manifests (position and equality) carry neither
// "content" nor "format-version" in their Avro header, as older engines
// wrote them, reads as the table did before: the content comes from the
// manifest list, as in the Java reference. iceberg-go v0.7.0 alone refuses
// it ("manifest file's 'content' metadata indicates "data", but entry
// from manifest list indicates "deletes"").
func TestDeleteManifestsWithoutContent(t *testing.T) {
	const n = 3000
	ctx := context.Background()
	orig := valuesTable(t, n)
	manifests, err := orig.Snapshot().Manifests(iceio.LocalFS{})
	if err != nil {
		t.Fatal(err)
	}
	stripped := 0
	for _, m := range manifests {
		if m.ManifestContent() != ice.ManifestContentDeletes {
			continue
		}
		path := strings.TrimPrefix(m.FilePath(), "file://")
		had := stripAvroKeys(t, path, "content", "format-version")
		if !strings.Contains(strings.Join(had, ","), "content") {
			t.Fatalf("%s had no content key to strip: %v", path, had)
		}
		stripped++
	}
	if stripped < 2 {
		t.Fatalf("%d delete manifests stripped, want the position and the equality deletes'", stripped)
	}

	tbl, err := iceberg.Open(ctx, orig.MetadataLocation(), iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if got, want := tbl.Stats(), orig.Stats(); got.DataFiles != want.DataFiles || got.PositionDeleteFiles != want.PositionDeleteFiles ||
		got.PositionDeleted != want.PositionDeleted || got.EqualityDeleteFiles != want.EqualityDeleteFiles || got.Records != want.Records {
		t.Fatalf("planned %+v, the table as written %+v", got, want)
	}

	columns := []string{"id", "i32", "unit", "f64", "b", "text", "tag", "dec", "date", "ts", "tstz", "lst", "st", "mp"}
	deleted := func(id int64) bool { return id%50 == 7 || id%50 == 13 }
	var want []int64
	for id := range int64(n) {
		if !deleted(id) {
			want = append(want, id)
		}
	}
	streamChecked(t, stream.Options{Plan: tbl.Plan, Columns: columns}, want)

	set := matrix.Set{Datasets: []matrix.Dataset{{Name: "iceberg-legacy-manifests", Plan: tbl.Plan, Columns: columns, Rows: n, Deleted: deleted}}}
	for seed := uint64(1); seed <= 6; seed++ {
		c := matrix.Draw(set, matrix.NewSeeded(seed))
		if err := c.Run(ctx); err != nil {
			t.Fatalf("case seed %d (%s): %v", seed, c, err)
		}
	}
}

// Impala's position delete files name their data files with the scheme
// and authority (hdfs://localhost:20500/test-warehouse/…) that its
// metadata leaves out (/test-warehouse/…). Compared as strings, the
// deletes named no file and every deleted row came back; without a
// rewrite of both spellings the table is refused, naming them and the
// option, and with one it reads as Impala reads it (TestSharedTables).
func TestPositionDeletesSpelledOtherwise(t *testing.T) {
	m, _ := rewrites(t)
	only := map[string]string{}
	for from, to := range m {
		if !strings.HasPrefix(from, "hdfs://") {
			only[from] = to
		}
	}
	root := icebergData(t)
	for _, name := range []string{"iceberg_v2_delete_positional", "iceberg_v2_positional_delete_all_rows"} {
		tbl, err := iceberg.Open(context.Background(), root+"/impala/"+name, iceberg.Options{Rewrite: only})
		if err == nil {
			tbl.Close()
			t.Fatalf("%s: opened with its deletes unmatched", name)
		}
		if !strings.Contains(err.Error(), `names data file "hdfs://localhost:20500/test-warehouse/`) || !strings.Contains(err.Error(), "Options.Rewrite") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
