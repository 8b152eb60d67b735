package avro_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// TestJavaWrittenFiles reads the files Apache Avro's Java implementation
// wrote, with each codec, and checks every value against twmb/avro.
func TestJavaWrittenFiles(t *testing.T) {
	for _, name := range []string{"weather.avro", "weather-deflate.avro", "weather-snappy.avro", "weather-zstd.avro", "weather-sorted.avro", "syncInMeta.avro"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			want := reference(t, path)
			ds := plan(t, avro.Format{}, formats.PlanOptions{}, path)
			if got := ds.Fragments[0].Rows; got != int64(len(want)) {
				t.Fatalf("planned %d rows, want %d", got, len(want))
			}
			sameRows(t, name, readRows(t, ds, 0, 0, int64(len(want)), 3), want)
		})
	}
}

// TestIcebergManifests reads the manifests and manifest lists of the
// shared corpus's Iceberg tables (Avro files written by Spark, PyIceberg
// and others: nested records, Iceberg's key-value arrays as maps, field
// ids) and checks every value against twmb/avro.
func TestIcebergManifests(t *testing.T) {
	root := filepath.Join(corpus.Dir(t), "iceberg")
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".avro") && !strings.HasPrefix(d.Name(), ".") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d manifests in %s", len(files), root)
	}
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		want, refErr := referenceErr(t, path)
		if refErr != nil {
			// A damaged manifest (one of the corpus has a long of more
			// than 64 bits): the driver refuses it too.
			if err := readErr(t, path); !errors.Is(err, formats.ErrCorrupt) {
				t.Errorf("%s: twmb/avro refuses it (%v); the driver gives %v, want ErrCorrupt", rel, refErr, err)
			}
			continue
		}
		for _, w := range want {
			entriesAsMaps(w)
		}
		ds := plan(t, avro.Format{}, formats.PlanOptions{}, path)
		got := readRows(t, ds, 0, 0, ds.Fragments[0].Rows, 100)
		sameRows(t, rel, got, want)
	}
}

// entriesAsMaps rewrites, in place, what twmb/avro decodes Iceberg's
// arrays of key-value records into: the map the driver reads them as.
func entriesAsMaps(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = entriesAsMaps(x)
		}
	case []any:
		if len(v) > 0 {
			m := map[string]any{}
			for _, e := range v {
				kv, ok := e.(map[string]any)
				if !ok || len(kv) != 2 || kv["key"] == nil {
					m = nil
					break
				}
				if _, ok := kv["value"]; !ok {
					m = nil
					break
				}
				m[fmt.Sprint(kv["key"])] = kv["value"]
			}
			if m != nil {
				return m
			}
		}
		for i, x := range v {
			v[i] = entriesAsMaps(x)
		}
	}
	return v
}

// TestDamagedCodecData: blocks whose compressed data or checksum is
// damaged are refused with ErrCorrupt, naming the block. (The files end
// in a stray byte after their last block, which planning refuses; the
// blocks are read without it.)
func TestDamagedCodecData(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"deflate-invalid-data.avro", "snappy-invalid-crc.avro", "snappy-invalid-data.avro", "snappy-short-crc.avro", "zstd-invalid-data.avro"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if name != "snappy-short-crc.avro" {
				err = readErr(t, filepath.Join("testdata", name))
				if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "block 1 at byte") || !strings.Contains(err.Error(), name) {
					t.Fatalf("got %v, want ErrCorrupt naming the file and the stray block 1", err)
				}
				b = b[:len(b)-1]
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			err = readErr(t, path)
			if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), "block 0") || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want ErrCorrupt naming the file and block 0", err)
			}
			t.Log(err)
		})
	}
}
