package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // the SQLite catalog

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// icebergDeleted is how many of the lowest ids the table's second snapshot
// deletes by position.
const icebergDeleted = 100

// writeIceberg registers the Parquet files of DIR/other as the data of the
// table ns.events in a SQLite catalog named "lake" (DIR/catalog.db, its
// warehouse DIR/warehouse), deletes the ids below icebergDeleted in a
// second snapshot, and describes it in DIR/iceberg.json: the catalog URI,
// name, table, metadata location and snapshot ids.
func writeIceberg(dir string) error {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(dir, "other", "*.parquet"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("iceberg: no data files in %s/other (%v)", dir, err)
	}
	dbPath := filepath.Join(dir, "catalog.db")
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("lake", db, sqlcat.SQLite, ice.Properties{"warehouse": "file://" + filepath.Join(dir, "warehouse")})
	if err != nil {
		return err
	}
	if err := cat.CreateSQLTables(ctx); err != nil {
		return err
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		return err
	}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 2, Name: "label", Type: ice.PrimitiveTypes.Int64},
		ice.NestedField{ID: 3, Name: "x", Type: ice.PrimitiveTypes.Float64},
		ice.NestedField{ID: 4, Name: "s", Type: ice.PrimitiveTypes.String},
	)
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "events"}, schema, catalog.WithProperties(ice.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
	}))
	if err != nil {
		return err
	}
	for i, f := range files {
		files[i] = "file://" + f
	}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(ctx, files, nil, false); err != nil {
		return fmt.Errorf("iceberg: add files: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return err
	}
	first := tbl.CurrentSnapshot().SnapshotID
	if tbl, err = tbl.Delete(ctx, ice.LessThan(ice.Reference("id"), int64(icebergDeleted)), nil); err != nil {
		return fmt.Errorf("iceberg: position deletes: %w", err)
	}
	out, err := json.Marshal(map[string]any{
		"catalog":        "sqlite:///" + dbPath,
		"catalog_name":   "lake",
		"table":          "ns.events",
		"metadata":       tbl.MetadataLocation(),
		"first_snapshot": first,
		"deleted_below":  icebergDeleted,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "iceberg.json"), out, 0o644)
}

// serve copies the files of DIR/numbers under a fresh prefix of each
// object store whose bucket URL the environment names (scratch's
// variables), prints one JSON line mapping each store's name (S3, GCS,
// Azure) to URLs under its prefix, keeping the driver's query (numbers:
// the files; plan: a plan store's object; cache: a plan cache), and waits
// for its standard input to close: then it deletes the prefixes. A test
// that ends, or dies, closes it. A store whose variable is unset is left
// out.
func serve(dir string) (err error) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(dir, "numbers", "*.parquet"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("serve: no data files in %s/numbers (%v)", dir, err)
	}
	var prefixes []*scratch.Prefix
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, p := range prefixes {
			err = errors.Join(err, p.Close(ctx))
		}
	}()
	urls := map[string]map[string]string{}
	for _, be := range scratch.Backends {
		if be.URL() == "" {
			continue
		}
		p, err := scratch.New(ctx, be, "sluice-python")
		if err != nil {
			return err
		}
		prefixes = append(prefixes, p)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := p.Bucket.WriteAll(ctx, p.Key+"numbers/"+filepath.Base(f), b, nil); err != nil {
				return fmt.Errorf("serve: %s: %w", be.Name, err)
			}
		}
		urls[be.Name] = map[string]string{"numbers": p.URL("numbers/"), "plan": p.URL("plan/plan.json"), "cache": p.URL("cache/")}
	}
	line, err := json.Marshal(urls)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	_, err = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return err
}
