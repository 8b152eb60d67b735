package iceberg_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// restServer serves a catalog's tables read-only through the Iceberg REST
// catalog protocol, written from the spec (rest-catalog-open-api.yaml):
// GET /v1/config and GET /v1/namespaces/{namespace}/tables/{table}. No
// REST catalog server could be installed here (none is packaged for
// Debian, npm or as a Go module; the reference one is a Java image).
func restServer(t *testing.T, cat catalog.Catalog) *httptest.Server {
	t.Helper()
	fail := func(w http.ResponseWriter, code int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	})
	mux.HandleFunc("GET /v1/namespaces/{namespace}/tables/{table}", func(w http.ResponseWriter, r *http.Request) {
		ns := strings.Split(r.PathValue("namespace"), "\x1f")
		tbl, err := cat.LoadTable(r.Context(), append(table.Identifier(ns), r.PathValue("table")))
		if errors.Is(err, catalog.ErrNoSuchTable) {
			fail(w, http.StatusNotFound, "NoSuchTableException", err.Error())
			return
		}
		if err != nil {
			fail(w, http.StatusInternalServerError, "ServerError", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"metadata-location": tbl.MetadataLocation(),
			"metadata":          tbl.Metadata(),
			"config":            map[string]string{},
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestRESTCatalog opens the SQL catalog's table through the REST protocol:
// every snapshot streams to the rows the SQL catalog gives, and a missing
// table is refused by name.
func TestRESTCatalog(t *testing.T) {
	db, warehouse := openSQLite(t)
	h := buildHistory(t, db, sqlcat.SQLite, warehouse)
	srv := restServer(t, h.cat)
	ctx := context.Background()
	rc, err := rest.NewCatalog(ctx, "rest", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range h.snaps {
		viaREST, err := iceberg.OpenCatalog(ctx, rc, h.ident, iceberg.Options{SnapshotID: id})
		if err != nil {
			t.Fatalf("%s: %v", h.what[i], err)
		}
		viaSQL, err := iceberg.OpenCatalog(ctx, h.cat, h.ident, iceberg.Options{SnapshotID: id})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, h.what[i], streamRows(t, stream.Options{Plan: viaREST.Plan}), streamRows(t, stream.Options{Plan: viaSQL.Plan}))
		viaREST.Close()
		viaSQL.Close()
	}
	_, err = iceberg.OpenCatalog(ctx, rc, table.Identifier{"ns", "missing"}, iceberg.Options{})
	if !errors.Is(err, catalog.ErrNoSuchTable) || !strings.Contains(err.Error(), "ns.missing") {
		t.Errorf("a missing table: %v", err)
	}
}
