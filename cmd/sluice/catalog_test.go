package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icetable "github.com/apache/iceberg-go/table"
)

// writeEvents creates ns (nested namespaces with dots) and the table
// ns.events in cat, with rows ids 0..n-1 appended in two commits, and
// returns its metadata location.
func writeEvents(t *testing.T, cat catalog.Catalog, ns icetable.Identifier, n int) string {
	t.Helper()
	ctx := context.Background()
	for i := range ns {
		if err := cat.CreateNamespace(ctx, ns[:i+1], nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			t.Fatal(err)
		}
	}
	schema := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "name", Type: ice.PrimitiveTypes.String},
	)
	tbl, err := cat.CreateTable(ctx, append(ns, "events"), schema)
	if err != nil {
		t.Fatal(err)
	}
	as, err := icetable.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, half := range [][2]int{{0, n / 2}, {n / 2, n}} {
		var rows []string
		for i := half[0]; i < half[1]; i++ {
			rows = append(rows, fmt.Sprintf(`{"id": %d, "name": "row %d"}`, i, i))
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader("["+strings.Join(rows, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		data := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
		rec.Release()
		tbl, err = tbl.AppendTable(ctx, data, 64, nil)
		data.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return tbl.MetadataLocation()
}

// sqliteCatalog writes a SQLite catalog named "lake" holding ns.events
// (40 rows) and a.b.events (nested namespaces, 10 rows); it returns the
// database's path and ns.events's metadata location.
func sqliteCatalog(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "catalog.db")
	db, err := sql.Open("sqlite", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("lake", db, sqlcat.SQLite, ice.Properties{"warehouse": "file://" + filepath.Join(dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	loc := writeEvents(t, cat, icetable.Identifier{"ns"}, 40)
	writeEvents(t, cat, icetable.Identifier{"a", "b"}, 10)
	return dbPath, loc
}

// TestCatalogSQLite names tables through a SQLite SQL catalog, by URI and
// by configuration file, and reads what the metadata file reads.
func TestCatalogSQLite(t *testing.T) {
	dbPath, loc := sqliteCatalog(t)
	want := ok(t, "cat", "--iceberg", "--no-progress", loc)
	if n := strings.Count(want, "\n"); n != 40 {
		t.Fatalf("the metadata file reads %d rows, want 40", n)
	}
	uri := "sqlite://" + dbPath
	if got := ok(t, "cat", "--no-progress", "--catalog", uri, "--catalog-name", "lake", "ns.events"); got != want {
		t.Errorf("cat through the catalog:\n%s\nwant:\n%s", got, want)
	}
	// SQLAlchemy's four slashes, as pyiceberg's configurations write it.
	if got := ok(t, "cat", "--no-progress", "--catalog", "sqlite:///"+dbPath, "--catalog-name", "lake", "ns.events"); got != want {
		t.Errorf("cat through sqlite:////: differs")
	}
	if got := strings.Count(ok(t, "cat", "--no-progress", "--catalog", uri, "--catalog-name", "lake", "a.b.events"), "\n"); got != 10 {
		t.Errorf("a.b.events: %d rows, want 10", got)
	}
	rep := inspectJSON(t, "--catalog", uri, "--catalog-name", "lake", "ns.events")
	if rep.Iceberg == nil || rep.Iceberg.RowsAfterDeletes != 40 || rep.Iceberg.DataFiles != 2 || strings.TrimPrefix(rep.Iceberg.Metadata, "file://") != strings.TrimPrefix(loc, "file://") {
		t.Errorf("inspect says %+v, want 40 rows in 2 files of %s", rep.Iceberg, loc)
	}
	if rep.Iceberg.Table != "ns.events" || rep.Iceberg.Catalog != `"lake" (`+uri+`)` {
		t.Errorf("inspect names table %q of catalog %q", rep.Iceberg.Table, rep.Iceberg.Catalog)
	}
	if text := ok(t, "inspect", "--catalog", uri, "--catalog-name", "lake", "ns.events"); !strings.Contains(text, "ns.events of catalog \"lake\"") {
		t.Errorf("inspect does not name the table and catalog:\n%s", text)
	}
	dir := t.TempDir()
	// Time travel as with --iceberg: the first snapshot holds the first
	// append, half the rows.
	var meta struct {
		Snapshots []struct {
			ID int64 `json:"snapshot-id"`
		} `json:"snapshots"`
	}
	b, err := os.ReadFile(strings.TrimPrefix(loc, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil || len(meta.Snapshots) != 2 {
		t.Fatalf("%s: %d snapshots (%v), want 2", loc, len(meta.Snapshots), err)
	}
	if got := strings.Count(ok(t, "cat", "--no-progress", "--catalog", uri, "--catalog-name", "lake", "--snapshot-id", fmt.Sprint(meta.Snapshots[0].ID), "ns.events"), "\n"); got != 20 {
		t.Errorf("the first snapshot through the catalog: %d rows, want 20", got)
	}
	// locate reads the table as cat does: its position 0 comes from a
	// data file of the table.
	if out := ok(t, "locate", "--no-progress", "--json", "--catalog", uri, "--catalog-name", "lake", "--positions", "0", "ns.events"); !strings.Contains(out, "/warehouse/ns.db/events/data/") {
		t.Errorf("locate through the catalog:\n%s", out)
	}
	yml := filepath.Join(dir, "catalogs.yaml")
	writeFile(t, yml, "catalog:\n  lake:\n    type: sql\n    uri: sqlite:///"+dbPath+"\n  other:\n    uri: http://localhost:1\n")
	if got := ok(t, "cat", "--no-progress", "--catalog", yml, "--catalog-name", "lake", "ns.events"); got != want {
		t.Errorf("cat through %s differs", yml)
	}
	js := filepath.Join(dir, "catalogs.json")
	writeFile(t, js, `{"catalog": {"lake": {"uri": "sqlite://`+dbPath+`"}}}`)
	if got := ok(t, "cat", "--no-progress", "--catalog", js, "ns.events"); got != want {
		t.Errorf("cat through %s (its one entry) differs", js)
	}

	fails(t, 3, []string{`"lake"`, "ns.nope", "ns.events"}, "cat", "--catalog", uri, "--catalog-name", "lake", "ns.nope")
	fails(t, 3, []string{"no namespace zz", "zz.events", "a, a.b, ns"}, "cat", "--catalog", uri, "--catalog-name", "lake", "zz.events")
	fails(t, 3, []string{`not of "default"`, "lake", "--catalog-name"}, "inspect", "--catalog", uri, "ns.events")
	fails(t, 3, []string{"nope.db", "does not exist"}, "cat", "--catalog", "sqlite://"+dir+"/nope.db", "ns.events")
	fails(t, 3, []string{"no Iceberg catalog", "empty.db"}, "cat", "--catalog", "sqlite://"+emptySQLite(t, dir), "ns.events")
	fails(t, 3, []string{`no catalog "prod"`, "lake, other"}, "cat", "--catalog", yml, "--catalog-name", "prod", "ns.events")
	fails(t, 2, []string{"lake, other", "--catalog-name"}, "cat", "--catalog", yml, "ns.events")
	fails(t, 2, []string{"mysql://x", "not a catalog URI"}, "cat", "--catalog", "mysql://x", "ns.events")
	// Passwords stay out of messages.
	for _, c := range []struct {
		code int
		uri  string
	}{{2, "mysql://u:s3cret@x/db"}, {1, "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable"}} {
		r := fails(t, c.code, []string{"u:xxxxx@"}, "cat", "--catalog", c.uri, "ns.events")
		if strings.Contains(r.stderr, "s3cret") {
			t.Errorf("the message shows the password: %s", r.stderr)
		}
	}
	fails(t, 2, []string{`"events"`, "namespace.table"}, "cat", "--catalog", uri, "events")
	fails(t, 2, []string{"hive", "metastore"}, "cat", "--catalog", writeFile(t, filepath.Join(dir, "hive.yml"), "catalog:\n  h:\n    type: hive\n    uri: thrift://x:9083\n"), "ns.events")
	fails(t, 2, []string{"--catalog-name needs --catalog"}, "cat", "--catalog-name", "lake", loc)
	fails(t, 2, []string{"--format"}, "cat", "--catalog", uri, "--format", "csv", "ns.events")
}

func writeFile(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// emptySQLite is a SQLite database that holds no catalog.
func emptySQLite(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "empty.db")
	db, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE other (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCatalogHadoop names a table of a Hadoop warehouse folder.
func TestCatalogHadoop(t *testing.T) {
	dir := t.TempDir()
	cat, err := hadoop.NewCatalog("wh", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	loc := writeEvents(t, cat, icetable.Identifier{"db"}, 20)
	want := ok(t, "cat", "--iceberg", "--no-progress", loc)
	if got := ok(t, "cat", "--no-progress", "--catalog", "hadoop://"+dir, "db.events"); got != want || strings.Count(got, "\n") != 20 {
		t.Errorf("cat through the Hadoop catalog:\n%s\nwant:\n%s", got, want)
	}
	fails(t, 3, []string{"db.nope", "db.events"}, "cat", "--catalog", "hadoop://"+dir, "db.nope")
	fails(t, 3, []string{"does not exist"}, "cat", "--catalog", "hadoop://"+dir+"/missing", "db.events")
}

// TestCatalogPostgres is TestCatalogSQLite's reads on PostgreSQL, the
// server scripts/postgres.sh starts (SLUICE_POSTGRES_DSN); skipped
// without one.
func TestCatalogPostgres(t *testing.T) {
	dsn := os.Getenv("SLUICE_POSTGRES_DSN")
	if dsn == "" && os.Getenv("SLUICE_REQUIRE_POSTGRES") != "" {
		t.Fatal("SLUICE_REQUIRE_POSTGRES is set but SLUICE_POSTGRES_DSN is not")
	}
	if dsn == "" {
		t.Skip("SLUICE_POSTGRES_DSN is not set: eval \"$(bash scripts/postgres.sh start)\"")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("sluice_cli", db, sqlcat.Postgres, ice.Properties{"warehouse": "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A namespace of its own per run: the server outlives the test.
	ns := fmt.Sprintf("cli_%d", time.Now().UnixNano())
	loc := writeEvents(t, cat, icetable.Identifier{ns}, 30)
	want := ok(t, "cat", "--iceberg", "--no-progress", loc)
	if got := ok(t, "cat", "--no-progress", "--catalog", dsn, "--catalog-name", "sluice_cli", ns+".events"); got != want || strings.Count(got, "\n") != 30 {
		t.Errorf("cat through PostgreSQL:\n%s\nwant:\n%s", got, want)
	}
	fails(t, 3, []string{ns + ".nope"}, "cat", "--catalog", dsn, "--catalog-name", "sluice_cli", ns+".nope")
}

// TestCatalogREST names a table through a REST catalog: a server that
// serves a SQLite catalog's tables by the REST protocol (GET /v1/config,
// GET /v1/namespaces/{ns}/tables/{table}, GET /v1/namespaces/{ns}), written
// from the spec, as formats/iceberg tests it.
func TestCatalogREST(t *testing.T) {
	dbPath, loc := sqliteCatalog(t)
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("lake", db, sqlcat.SQLite, ice.Properties{"init_catalog_tables": "false"})
	if err != nil {
		t.Fatal(err)
	}
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	fail := func(w http.ResponseWriter, code int, typ, msg string) {
		reply(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{namespace}", func(w http.ResponseWriter, r *http.Request) {
		ns := strings.Split(r.PathValue("namespace"), "\x1f")
		if ok, _ := cat.CheckNamespaceExists(r.Context(), ns); !ok {
			fail(w, http.StatusNotFound, "NoSuchNamespaceException", "no namespace "+strings.Join(ns, "."))
			return
		}
		reply(w, 200, map[string]any{"namespace": ns, "properties": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		tbl, err := cat.LoadTable(r.Context(), append(icetable.Identifier(strings.Split(r.PathValue("namespace"), "\x1f")), r.PathValue("table")))
		switch {
		case errors.Is(err, catalog.ErrNoSuchTable):
			fail(w, http.StatusNotFound, "NoSuchTableException", err.Error())
		case err != nil:
			fail(w, http.StatusInternalServerError, "ServerError", err.Error())
		default:
			reply(w, 200, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": map[string]string{}})
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	want := ok(t, "cat", "--iceberg", "--no-progress", loc)
	if got := ok(t, "cat", "--no-progress", "--catalog", srv.URL, "ns.events"); got != want {
		t.Errorf("cat through REST:\n%s\nwant:\n%s", got, want)
	}
	cfg := writeFile(t, filepath.Join(t.TempDir(), "pyiceberg.yaml"), "catalog:\n  default:\n    type: rest\n    uri: "+srv.URL+"\n    warehouse: lake\n  other:\n    uri: sqlite:///nowhere.db\n")
	if got := ok(t, "cat", "--no-progress", "--catalog", cfg, "ns.events"); got != want {
		t.Errorf("cat through REST by %s (its default entry) differs", cfg)
	}
	if got := strings.Count(ok(t, "cat", "--no-progress", "--catalog", srv.URL, "a.b.events"), "\n"); got != 10 {
		t.Errorf("a.b.events through REST: %d rows, want 10", got)
	}
	r := fails(t, 3, []string{"ns.nope", srv.URL}, "cat", "--catalog", srv.URL, "ns.nope")
	if strings.Contains(r.stderr, "holds") {
		t.Errorf("the server lists no tables, the message says what it holds: %s", r.stderr)
	}
	fails(t, 3, []string{"no namespace zz", "zz.events"}, "cat", "--catalog", srv.URL, "zz.events")
}
