package iceberg_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
	"github.com/sluicedata/sluice/stream"
)

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		os.Exit(killChild()) // a child of TestKillResume
	}
	goleak.VerifyTestMain(m)
}

// icebergData is the Iceberg tables of the shared corpus.
func icebergData(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(corpus.Dir(tb), "iceberg")
}

// sharedTable is one table of the shared test data: where its metadata
// lies, how its absolute or relative locations map onto the copy here,
// and the rows after deletes, counted by hand from its files.
type sharedTable struct {
	name, location string
	rows           int
	// refused, if set, is what iceberg-go v0.7.0 says of the table, which
	// Open must pass on.
	refused string
}

var sharedTables = []sharedTable{
	{name: "equality_delete_cross_partition", location: "duckdb-iceberg/data/persistent/equality_delete_cross_partition/warehouse/ns/t/metadata/vfinal.metadata.json", refused: "cannot unmarshal number 9876543210123456789"},
	{name: "equality_delete_extra_column", location: "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t", rows: 3},
	{name: "equality_deletes", location: "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable", rows: 2},
	{name: "equality_deletes_partitioned", location: "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned", rows: 3},
	{name: "hive_partitioned_table", location: "duckdb-iceberg/data/persistent/hive_partitioned_table", rows: 6},
	{name: "lineitem_iceberg", location: "duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg", rows: 51793},
	{name: "merch_v1", location: "duckdb-iceberg/data/persistent/iceberg_v1_repro/repro/merch_v1", rows: 4},
	{name: "partition_timestamp", location: "duckdb-iceberg/data/persistent/partition_timestamp/default.db/partition_timestamp", rows: 2},
	{name: "legacy_bare_deletion_vector", location: "duckdb-iceberg/data/persistent/legacy_bare_deletion_vector/warehouse/default/legacy_bare_deletion_vector", refused: "puffin"},
	{name: "airports_parquet", location: "impala/airports_parquet", rows: 3376},
	{name: "iceberg_v2_no_deletes", location: "impala/iceberg_v2_no_deletes", rows: 3},
	{name: "iceberg_v2_delete_equality", location: "impala/iceberg_v2_delete_equality", rows: 2},
	{name: "iceberg_v2_delete_positional", location: "impala/iceberg_v2_delete_positional", rows: 2},
	{name: "iceberg_v2_positional_delete_all_rows", location: "impala/iceberg_v2_positional_delete_all_rows", rows: 0},
}

// rewrites map the locations the shared tables' metadata holds (Impala's
// absolute /test-warehouse paths, DuckDB's paths relative to its source
// tree) onto the copy here.
func rewrites(t *testing.T) (map[string]string, func(string) string) {
	root := icebergData(t)
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{
		"/test-warehouse/iceberg_test/hadoop_catalog/ice/": "file://" + root + "/impala/",
		// Impala's position delete files name the data files with the
		// scheme and authority its metadata leaves out.
		"hdfs://localhost:20500/test-warehouse/iceberg_test/hadoop_catalog/ice/": "file://" + root + "/impala/",
		"data/persistent/":  "file://" + root + "/duckdb-iceberg/data/persistent/",
		"lineitem_iceberg/": "file://" + root + "/duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg/",
	}
	local := func(p string) string {
		for from, to := range m {
			if strings.HasPrefix(p, from) {
				return strings.TrimPrefix(to, "file://") + p[len(from):]
			}
		}
		return strings.TrimPrefix(p, "file://")
	}
	return m, local
}

// TestSharedTables streams every table of the shared test data and
// compares its rows, as a multiset, with what the plain path computes;
// the tables iceberg-go refuses must fail at Open with its reason.
func TestSharedTables(t *testing.T) {
	m, local := rewrites(t)
	root := icebergData(t)
	found := 0
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "metadata" {
			found++
		}
		return nil
	})
	if found != len(sharedTables) {
		t.Errorf("the shared data holds %d tables, the test lists %d: list the new ones", found, len(sharedTables))
	}
	for _, st := range sharedTables {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			tbl, err := iceberg.Open(ctx, filepath.Join(root, st.location), iceberg.Options{Rewrite: m})
			if st.refused != "" {
				if err == nil {
					tbl.Close()
					t.Fatalf("opened; iceberg-go v0.7.0 refused it (%s): update the test", st.refused)
				}
				if !strings.Contains(err.Error(), st.refused) {
					t.Fatalf("error %v, want one saying %q", err, st.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Close()
			snap := tbl.Snapshot()
			want := naiveRows(t, tbl.Metadata(), &snap, local)
			if len(want) != st.rows {
				t.Errorf("the plain path gives %d rows, counted by hand %d", len(want), st.rows)
			}
			got := streamRows(t, stream.Options{Plan: tbl.Plan, BatchSize: 7, Shuffle: true, Seed: 3})
			sameRows(t, st.name, got, want)
		})
	}
}

// TestMetadataLocations opens a table by its folder, its metadata folder
// and its metadata file alike, and refuses a location with none.
func TestMetadataLocations(t *testing.T) {
	m, _ := rewrites(t)
	root := icebergData(t)
	dir := filepath.Join(root, "duckdb-iceberg/data/persistent/hive_partitioned_table")
	for _, loc := range []string{dir, dir + "/", "file://" + dir, dir + "/metadata/v4.metadata.json"} {
		tbl, err := iceberg.Open(context.Background(), loc, iceberg.Options{Rewrite: m})
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if !strings.HasSuffix(tbl.MetadataLocation(), "v4.metadata.json") {
			t.Errorf("%s: read %s, want v4", loc, tbl.MetadataLocation())
		}
		tbl.Close()
	}
	_, err := iceberg.Open(context.Background(), t.TempDir(), iceberg.Options{})
	if err == nil || !strings.Contains(err.Error(), "no version hint") {
		t.Errorf("an empty folder opened: %v", err)
	}
	// Without the rewrite, the absolute paths of another system are not
	// found, and the error names the file.
	_, err = iceberg.Open(context.Background(), filepath.Join(root, "impala/iceberg_v2_no_deletes"), iceberg.Options{})
	if err == nil || !strings.Contains(err.Error(), "/test-warehouse/") {
		t.Errorf("opened without a rewrite: %v", err)
	}
	if _, err := iceberg.Open(context.Background(), dir, iceberg.Options{Rewrite: m, SnapshotID: 42}); !errors.Is(err, iceberg.ErrSnapshot) {
		t.Errorf("snapshot 42: %v", err)
	}
	if _, err := iceberg.Open(context.Background(), dir, iceberg.Options{Rewrite: m, SnapshotID: 42, Ref: "main"}); err == nil {
		t.Error("two pins at once were accepted")
	}
}
