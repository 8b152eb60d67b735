package iceberg

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

// FuzzPlanCache feeds the plan cache's decoder what a damaged or foreign
// entry might hold: it must miss (an error), never panic or accept a plan
// that does not hold together.
func FuzzPlanCache(f *testing.F) {
	var good bytes.Buffer
	gob.NewEncoder(&good).Encode(&tablePlan{Files: []plannedFile{{Path: "a.parquet", Format: "parquet", Records: 9, Deleted: []int64{1, 4}, EqDeletes: []int{0}}}, EqDeletes: []eqDeleteFile{{Path: "d.parquet", FieldIDs: []int{1}}}})
	f.Add(good.Bytes())
	f.Add([]byte("not a plan"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p tablePlan
		if gob.NewDecoder(bytes.NewReader(b)).Decode(&p) != nil || p.check() != nil {
			return
		}
		for _, pf := range p.Files {
			for _, e := range pf.EqDeletes {
				_ = p.EqDeletes[e] // check promised these are in range
			}
		}
	})
}

// FuzzVersionHint reads whatever a version hint holds: a metadata location
// or a clear error, never a panic or a location outside the table's
// metadata folder.
func FuzzVersionHint(f *testing.F) {
	for _, s := range []string{"3", "v3", "00002-legacy-bare-dv", "", " 12 \n", "../../etc/passwd", "%zz", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, hint string) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "metadata"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "metadata", "version-hint.text"), []byte(hint), 0o644); err != nil {
			t.Fatal(err)
		}
		res := storage.NewResolver(storage.Options{})
		defer res.Close()
		loc, err := metadataLocation(&fileIO{ctx: context.Background(), res: res}, dir)
		if err != nil {
			return
		}
		if !strings.HasPrefix(loc, dir+"/metadata/") || strings.Contains(strings.TrimPrefix(loc, dir+"/metadata/"), "/") {
			t.Fatalf("hint %q gives %s, outside the metadata folder", hint, loc)
		}
	})
}

// FuzzManifestHeader feeds the Avro header reader of delete manifests
// (completeManifestHeader) what a damaged or foreign manifest might hold:
// it must refuse or complete, never panic, and a completed header keeps
// every key it had, says "deletes", and keeps the bytes after it.
func FuzzManifestHeader(f *testing.F) {
	header := func(kv ...string) []byte {
		b := append([]byte{}, avroMagic...)
		b = binary.AppendVarint(b, int64(len(kv)/2))
		for _, s := range kv {
			b = binary.AppendVarint(b, int64(len(s)))
			b = append(b, s...)
		}
		b = binary.AppendVarint(b, 0)
		return append(b, "0123456789abcdef\x02\x04ab0123456789abcdef"...)
	}
	f.Add(header("avro.schema", `{"type":"record"}`, "avro.codec", "deflate"))
	f.Add(header("avro.schema", "{}", "content", "deletes", "format-version", "2"))
	f.Add(header("format-version", "2"))
	f.Add([]byte("Obj\x01\x03\x10"))
	f.Add([]byte("Obj\x01\x00short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := completeManifestHeader(b, 2)
		if err != nil {
			return
		}
		keys, vals, rest, err := readHeader(out)
		if err != nil {
			t.Fatalf("completed header does not read: %v", err)
		}
		k0, _, rest0, _ := readHeader(b)
		if !bytes.Equal(rest, rest0) || !slices.Equal(keys[:len(k0)], k0) {
			t.Fatalf("keys %q and %d bytes after the header, from %q and %d", keys, len(rest), k0, len(rest0))
		}
		if i := slices.Index(keys, "content"); i < 0 || (!slices.Contains(k0, "content") && string(vals[i]) != "deletes") {
			t.Fatalf("keys %q, values %q", keys, vals)
		}
	})
}
