package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/formats/iceberg/catalogs"
	"github.com/sluicedata/sluice/stream"
)

// icebergFlags read the URL as an Apache Iceberg table.
type icebergFlags struct {
	table       bool
	catalog     string // --catalog: the URL names a table of this catalog
	catalogName string
	opened      catalogs.Spec // set by open with --catalog
	snapshot    int64
	ref         string
	asOf        string
	rewrite     listFlag
}

func (f *icebergFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.table, "iceberg", false, "read the one URL as an Iceberg table: its metadata JSON file, or a table folder with metadata/version-hint.text")
	fs.StringVar(&f.catalog, "catalog", "", "read the one argument as a table identifier (db.table, a.b.table) of the Iceberg catalog `spec`: sqlite:///catalog.db, postgres://..., http(s)://... (REST), hadoop:///warehouse, with ?warehouse=...; or a YAML or JSON file of catalogs as pyiceberg's .pyiceberg.yaml (see docs/cli.md)")
	fs.StringVar(&f.catalogName, "catalog-name", "", "with --catalog, the catalog's `name`: the entry of a configuration file, and the name a SQL catalog keys its tables by (default: a file's only entry or \"default\")")
	fs.Int64Var(&f.snapshot, "snapshot-id", 0, "with --iceberg, read snapshot `id` (default: the current one)")
	fs.StringVar(&f.ref, "ref", "", "with --iceberg, read the snapshot a tag or branch `name`s")
	fs.StringVar(&f.asOf, "as-of", "", "with --iceberg, read the snapshot current at `time` (RFC 3339)")
	fs.Var(&f.rewrite, "rewrite", "with --iceberg, map location prefixes the metadata holds onto URLs, as `from=to` pairs, comma-separated (such as /test-warehouse/=file:///data/)")
}

// open opens the table and plans opts through it. The table must be
// closed after the dataset.
func (f *icebergFlags) open(ctx context.Context, urls []string, opts stream.Options) (stream.Options, *iceberg.Table, error) {
	if f.catalogName != "" && f.catalog == "" {
		return opts, nil, usageErrorf("--catalog-name needs --catalog")
	}
	if !f.table && f.catalog == "" {
		if f.snapshot != 0 || f.ref != "" || f.asOf != "" || len(f.rewrite) > 0 {
			return opts, nil, usageErrorf("--snapshot-id, --ref, --as-of and --rewrite need --iceberg or --catalog")
		}
		return opts, nil, nil
	}
	if len(urls) != 1 && f.catalog != "" {
		return opts, nil, usageErrorf("--catalog reads one table, not %d", len(urls))
	}
	if len(urls) != 1 {
		return opts, nil, usageErrorf("--iceberg reads one table, not %d URLs", len(urls))
	}
	o := iceberg.Options{SnapshotID: f.snapshot, Ref: f.ref, Rewrite: map[string]string{}, Storage: opts.Storage}
	if f.asOf != "" {
		at, err := time.Parse(time.RFC3339Nano, f.asOf)
		if err != nil {
			return opts, nil, usageErrorf("--as-of %q is not an RFC 3339 time: %v", f.asOf, err)
		}
		o.AsOf = at
	}
	for _, p := range f.rewrite {
		from, to, ok := strings.Cut(p, "=")
		if !ok || from == "" {
			return opts, nil, usageErrorf("--rewrite %q is not from=to", p)
		}
		o.Rewrite[from] = to
	}
	var tbl *iceberg.Table
	var err error
	if f.catalog != "" {
		tbl, err = f.openCatalog(ctx, urls[0], o)
	} else {
		tbl, err = iceberg.Open(ctx, urls[0], o)
	}
	if err != nil {
		return opts, nil, err
	}
	opts.URLs = nil
	opts.Plan = tbl.Plan
	return opts, tbl, nil
}

// catalogTerms are the flags that messages about catalogs name.
var catalogTerms = catalogs.Terms{Spec: "--catalog", Name: "--catalog-name"}

// openCatalog opens the table ident names in --catalog.
func (f *icebergFlags) openCatalog(ctx context.Context, ident string, o iceberg.Options) (*iceberg.Table, error) {
	if _, err := catalogs.ParseIdentifier(ident); err != nil {
		return nil, err
	}
	spec, err := catalogs.Parse(f.catalog, f.catalogName, catalogTerms)
	if err != nil {
		return nil, err
	}
	f.opened = spec
	return spec.OpenTable(ctx, ident, o)
}

// icebergInfo is what inspect says of a table.
type icebergInfo struct {
	// Catalog and Table are set for a table named through --catalog: the
	// catalog's name and what names it (a URI without its password, or a
	// configuration file), and the identifier.
	Catalog             string `json:"catalog,omitempty"`
	Table               string `json:"table,omitempty"`
	Metadata            string `json:"metadata"`
	Snapshot            int64  `json:"snapshot"`      // 0: none
	SnapshotTime        string `json:"snapshot_time"` // "": no snapshot
	DataFiles           int    `json:"data_files"`
	PositionDeleteFiles int    `json:"position_delete_files"`
	DeletionVectors     int    `json:"deletion_vectors"`
	EqualityDeleteFiles int    `json:"equality_delete_files"`
	// RowsBeforeDeletes is the data files' rows; RowsAfterDeletes what
	// position deletes leave, or -1 where equality deletes make it unknown
	// until read.
	RowsBeforeDeletes        int64 `json:"rows_before_deletes"`
	PositionDeletedRows      int64 `json:"position_deleted_rows"`
	RowsAfterDeletes         int64 `json:"rows_after_deletes"`
	FilesWithEqualityDeletes int   `json:"files_with_equality_deletes"`
}

func newIcebergInfo(t *iceberg.Table) *icebergInfo {
	st := t.Stats()
	snap := t.Snapshot()
	info := &icebergInfo{
		Metadata:                 t.MetadataLocation(),
		Snapshot:                 snap.SnapshotID,
		SnapshotTime:             time.UnixMilli(snap.TimestampMs).UTC().Format(time.RFC3339Nano),
		DataFiles:                st.DataFiles,
		PositionDeleteFiles:      st.PositionDeleteFiles,
		DeletionVectors:          st.DeletionVectors,
		EqualityDeleteFiles:      st.EqualityDeleteFiles,
		RowsBeforeDeletes:        st.Records,
		PositionDeletedRows:      st.PositionDeleted,
		RowsAfterDeletes:         st.Records - st.PositionDeleted,
		FilesWithEqualityDeletes: st.FilesWithEqualityDeletes,
	}
	if st.FilesWithEqualityDeletes > 0 {
		info.RowsAfterDeletes = -1
	}
	if !t.HasSnapshot() {
		info.SnapshotTime = ""
	}
	return info
}

func writeIcebergInfo(w io.Writer, i *icebergInfo) {
	fmt.Fprintf(w, "iceberg table: %s\n", i.Metadata)
	if i.Table != "" {
		fmt.Fprintf(w, "  %s of catalog %s\n", i.Table, i.Catalog)
	}
	if i.SnapshotTime == "" {
		fmt.Fprintf(w, "  no snapshot: the table has never been written, and reads as empty\n")
	} else {
		fmt.Fprintf(w, "  snapshot %d of %s\n", i.Snapshot, i.SnapshotTime)
	}
	fmt.Fprintf(w, "  %d data files, %d position delete files, %d deletion vectors, %d equality delete files\n",
		i.DataFiles, i.PositionDeleteFiles, i.DeletionVectors, i.EqualityDeleteFiles)
	fmt.Fprintf(w, "  rows: %s before deletes, %s deleted by position", count(i.RowsBeforeDeletes), count(i.PositionDeletedRows))
	if i.RowsAfterDeletes < 0 {
		fmt.Fprintf(w, ", %s left, less what equality deletes drop while reading %d files\n\n", count(i.RowsBeforeDeletes-i.PositionDeletedRows), i.FilesWithEqualityDeletes)
		return
	}
	fmt.Fprintf(w, ", %s after\n\n", count(i.RowsAfterDeletes))
}
