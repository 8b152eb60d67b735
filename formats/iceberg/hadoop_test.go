package iceberg_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// TestHadoopCatalogHistory is TestSQLCatalogHistory through iceberg-go's
// Hadoop catalog on a local warehouse folder (warehouse/ns/events/metadata/
// vN.metadata.json and version-hint.text, committed by renaming as the
// Java HadoopCatalog does): every snapshot read through the catalog, and
// the table folder read without one reads the same.
func TestHadoopCatalogHistory(t *testing.T) {
	dir := t.TempDir()
	cat, err := hadoop.NewCatalog("sluice", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := buildHistoryOn(t, cat, "ns")
	checkHistory(t, h)

	// The folder alone: sluice finds version-hint.text itself.
	ctx := context.Background()
	viaCatalog, err := iceberg.OpenCatalog(ctx, cat, h.ident, iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer viaCatalog.Close()
	folder, err := iceberg.Open(ctx, "file://"+filepath.Join(dir, "ns", "events"), iceberg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	if strings.TrimPrefix(folder.MetadataLocation(), "file://") != strings.TrimPrefix(viaCatalog.MetadataLocation(), "file://") {
		t.Errorf("the folder's version hint names %s, the catalog %s", folder.MetadataLocation(), viaCatalog.MetadataLocation())
	}
	sameRows(t, "the table folder", streamRows(t, stream.Options{Plan: folder.Plan}), streamRows(t, stream.Options{Plan: viaCatalog.Plan}))

	_, err = iceberg.OpenCatalog(ctx, cat, table.Identifier{"ns", "nope"}, iceberg.Options{})
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("a table not in the warehouse: %v, want ErrNoSuchTable", err)
	}
}

// TestHadoopCatalogSpark reads, through iceberg-go's Hadoop catalog, a
// warehouse the Java HadoopCatalog wrote (Spark, in the shared corpus:
// warehouse/mydb/mytable with equality deletes), as the table folder
// reads.
func TestHadoopCatalogSpark(t *testing.T) {
	rw, _ := rewrites(t)
	ctx := context.Background()
	warehouse := filepath.Join(icebergData(t), "duckdb-iceberg/data/persistent/equality_deletes/warehouse")
	cat, err := hadoop.NewCatalog("spark", warehouse, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ident, rows := range map[string]int{"mytable": 2, "mytable_partitioned": 3} {
		tbl, err := iceberg.OpenCatalog(ctx, cat, table.Identifier{"mydb", ident}, iceberg.Options{Rewrite: rw})
		if err != nil {
			t.Fatal(err)
		}
		got := streamRows(t, stream.Options{Plan: tbl.Plan})
		tbl.Close()
		if len(got) != rows {
			t.Errorf("mydb.%s: %d rows, counted by hand %d: %q", ident, len(got), rows, got)
		}
		folder, err := iceberg.Open(ctx, "file://"+filepath.Join(warehouse, "mydb", ident), iceberg.Options{Rewrite: rw})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, "mydb."+ident+" as a folder", streamRows(t, stream.Options{Plan: folder.Plan}), got)
		folder.Close()
	}
}
