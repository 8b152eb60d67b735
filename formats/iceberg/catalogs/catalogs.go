package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icetable "github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL SQL catalogs, as "pgx"
	"gopkg.in/yaml.v3"
	_ "modernc.org/sqlite" // SQLite SQL catalogs, as "sqlite"
)

// The catalogs the command opens tables through (--catalog): what a user
// names with a URI or an entry of a pyiceberg-style configuration file.
// Each is tested here (docs/formats.md, Catalogs); Hive and
// Glue, which need a metastore or AWS, are not offered.

// catalogSpec is one catalog: its type and iceberg-go's properties for it
// (uri, warehouse, credentials).
type catalogSpec struct {
	name  string // the catalog's name: a SQL catalog keys its tables by it
	typ   string // sql, rest or hadoop
	props ice.Properties
	from  string // what the user gave, for messages
}

// defaultCatalogName is the name a catalog given by URI goes by, as
// pyiceberg's load_catalog names one.
const defaultCatalogName = "default"

// parseCatalog reads --catalog: a URI (sqlite:, postgres:, http(s):,
// hadoop:) or the path of a YAML or JSON file of catalog entries, of which
// name picks one.
func parseCatalog(arg, name string) (catalogSpec, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return catalogFromFile(arg, name)
	}
	if ext := filepath.Ext(arg); ext == ".yaml" || ext == ".yml" || ext == ".json" {
		return catalogSpec{}, notFoundf("--catalog %s: no such configuration file", arg)
	}
	if name == "" {
		name = defaultCatalogName
	}
	props := ice.Properties{"uri": arg}
	from := arg
	u, err := url.Parse(arg)
	if err == nil && u.Scheme != "" {
		// Query parameters sluice takes for itself; the rest stay in the
		// URI (a PostgreSQL DSN's sslmode, say).
		q := u.Query()
		for _, k := range []string{"warehouse", "credential", "token"} {
			if q.Has(k) {
				props[k] = q.Get(k)
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
		props["uri"] = u.String()
		// Messages name the catalog without its secrets: a password in
		// the URI, a credential or token among its parameters.
		from = u.Redacted()
	}
	spec, err := catalogOfProps(name, props)
	spec.from = from
	return spec, err
}

// redact is uri with its password, if any, as xxxxx.
func redact(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		return u.Redacted()
	}
	return uri
}

// catalogOfProps types a catalog by its "type" property, or else by its
// URI's scheme.
func catalogOfProps(name string, props ice.Properties) (catalogSpec, error) {
	spec := catalogSpec{name: name, typ: strings.ToLower(props["type"]), props: props}
	uri := props["uri"]
	scheme, _, _ := strings.Cut(uri, ":")
	scheme = strings.ToLower(scheme)
	if spec.typ == "" {
		switch {
		case scheme == "sqlite" || scheme == "postgres" || strings.HasPrefix(scheme, "postgresql"):
			spec.typ = "sql"
		case scheme == "http" || scheme == "https":
			spec.typ = "rest"
		case scheme == "hadoop":
			spec.typ = "hadoop"
		default:
			return spec, usageErrorf("--catalog %q: not a catalog URI (sqlite:///catalog.db, postgres://..., http(s)://... for REST, hadoop:///warehouse) nor a configuration file", redact(uri))
		}
	}
	switch spec.typ {
	case "sql", "rest":
		if uri == "" {
			return spec, usageErrorf("catalog %q of type %s has no uri", name, spec.typ)
		}
	case "hadoop":
		if scheme == "hadoop" {
			props["warehouse"] = strings.TrimPrefix(strings.TrimPrefix(uri, "hadoop:"), "//")
		}
		if props["warehouse"] == "" {
			return spec, usageErrorf("Hadoop catalog %q has no warehouse folder", name)
		}
	case "hive", "glue":
		return spec, usageErrorf("catalog %q is of type %s, which sluice's command does not open (untested here: a %s needs a running service); read the table by its metadata file with --iceberg", name, spec.typ, map[string]string{"hive": "Hive metastore", "glue": "Glue catalog on AWS"}[spec.typ])
	default:
		return spec, usageErrorf("catalog %q is of type %q: the command opens sql, rest and hadoop catalogs", name, spec.typ)
	}
	return spec, nil
}

// catalogFile is pyiceberg's .pyiceberg.yaml: catalogs by name, each a map
// of properties (type, uri, warehouse, ...).
type catalogFile struct {
	Catalog map[string]map[string]any `yaml:"catalog"`
}

func catalogFromFile(path, name string) (catalogSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return catalogSpec{}, err
	}
	var f catalogFile
	if err := yaml.Unmarshal(b, &f); err != nil { // YAML reads JSON too
		return catalogSpec{}, usageErrorf("--catalog %s: not a catalog configuration: %v", path, err)
	}
	names := slices.Sorted(maps.Keys(f.Catalog))
	if len(names) == 0 {
		return catalogSpec{}, usageErrorf("--catalog %s holds no catalogs (a top-level \"catalog\" map of names to properties)", path)
	}
	switch {
	case name != "":
	case len(names) == 1:
		name = names[0]
	case f.Catalog[defaultCatalogName] != nil:
		name = defaultCatalogName
	default:
		return catalogSpec{}, usageErrorf("--catalog %s holds catalogs %s: name one with --catalog-name", path, strings.Join(names, ", "))
	}
	entry, ok := f.Catalog[name]
	if !ok {
		return catalogSpec{}, notFoundf("--catalog %s has no catalog %q (it holds %s)", path, name, strings.Join(names, ", "))
	}
	props := ice.Properties{}
	for k, v := range entry {
		props[k] = fmt.Sprint(v)
	}
	spec, err := catalogOfProps(name, props)
	spec.from = path + ", catalog " + name
	return spec, err
}

// open connects to the catalog. It only reads: a SQL catalog's tables are
// never created, a SQLite file is opened read-only.
func (s catalogSpec) open(ctx context.Context) (catalog.Catalog, error) {
	switch s.typ {
	case "sql":
		return s.openSQL()
	case "rest":
		opts := []rest.Option{rest.WithAdditionalProps(s.props)}
		if w := s.props["warehouse"]; w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		if c := s.props["credential"]; c != "" {
			opts = append(opts, rest.WithCredential(c))
		}
		if tok := s.props["token"]; tok != "" {
			opts = append(opts, rest.WithOAuthToken(tok))
		}
		c, err := rest.NewCatalog(ctx, s.name, s.props["uri"], opts...)
		if err != nil {
			return nil, fmt.Errorf("REST catalog %s: %w", s.from, err)
		}
		return c, nil
	default: // hadoop
		w := s.props["warehouse"]
		if local := strings.TrimPrefix(w, "file://"); !strings.Contains(local, "://") {
			if st, err := os.Stat(local); err != nil || !st.IsDir() {
				return nil, notFoundf("Hadoop catalog %s: warehouse folder %s does not exist", s.from, local)
			}
		}
		c, err := hadoop.NewCatalog(s.name, w, s.props)
		if err != nil {
			return nil, fmt.Errorf("Hadoop catalog %s: %w", s.from, err)
		}
		return c, nil
	}
}

func (s catalogSpec) openSQL() (catalog.Catalog, error) {
	uri := s.props["uri"]
	scheme, rest, _ := strings.Cut(uri, ":")
	var driver, dsn string
	var dialect sqlcat.SupportedDialect
	switch scheme = strings.ToLower(scheme); {
	case scheme == "sqlite":
		// sqlite:///abs/path.db (or SQLAlchemy's sqlite:////abs/path.db),
		// sqlite:relative/path.db.
		path := rest
		if strings.HasPrefix(path, "//") {
			path = filepath.Clean("/" + strings.TrimLeft(path, "/"))
		}
		if q := strings.IndexByte(path, '?'); q >= 0 {
			path = path[:q]
		}
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			return nil, notFoundf("SQL catalog %s: SQLite database %s does not exist", s.from, path)
		}
		driver, dialect, dsn = "sqlite", sqlcat.SQLite, "file:"+path+"?mode=ro"
	case scheme == "postgres" || strings.HasPrefix(scheme, "postgresql"):
		// SQLAlchemy's postgresql+psycopg2:// names its Python driver.
		driver, dialect, dsn = "pgx", sqlcat.Postgres, "postgres:"+rest
	default:
		return nil, usageErrorf("SQL catalog %s: uri %q is neither sqlite: nor postgres(ql):", s.from, redact(uri))
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("SQL catalog %s: %w", s.from, err)
	}
	props := maps.Clone(s.props)
	props["init_catalog_tables"] = "false"
	c, err := sqlcat.NewCatalog(s.name, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("SQL catalog %s: %w", s.from, err)
	}
	if ok, err := hasTable(db, "iceberg_tables"); err != nil || !ok {
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("SQL catalog %s: %w", s.from, err)
		}
		return nil, notFoundf("SQL catalog %s: the database holds no Iceberg catalog (no iceberg_tables table)", s.from)
	}
	return &sqlCatalog{Catalog: c, db: db}, nil
}

// sqlCatalog keeps the database to close and to say, of a table not
// found, which catalog names the database does hold.
type sqlCatalog struct {
	*sqlcat.Catalog
	db *sql.DB
}

func (c *sqlCatalog) Close() error { return c.db.Close() }

// catalogNames are the names the database keys tables by.
func (c *sqlCatalog) catalogNames() []string {
	rows, err := c.db.Query("SELECT DISTINCT catalog_name FROM iceberg_tables ORDER BY catalog_name")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			out = append(out, n)
		}
	}
	return out
}

func hasTable(db *sql.DB, name string) (bool, error) {
	// Selecting nothing from it fails exactly when it is not there, in
	// SQLite and PostgreSQL alike.
	rows, err := db.Query("SELECT 1 FROM " + name + " WHERE 1 = 0")
	if err != nil {
		if strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "does not exist") {
			return false, nil
		}
		return false, err
	}
	rows.Close()
	return true, nil
}

// parseIdentifier splits a table identifier, db.table or a.b.table (a
// nested namespace), at its dots.
func parseIdentifier(s string) (icetable.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || slices.Contains(parts, "") {
		return nil, usageErrorf("table %q is not namespace.table (namespaces nest with dots: a.b.table)", s)
	}
	return parts, nil
}

// explainMissing explains a table the catalog does not hold: which part of the
// identifier is missing, and what is there instead.
func explainMissing(ctx context.Context, cat catalog.Catalog, spec catalogSpec, ident icetable.Identifier, err error) error {
	if !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace) {
		return err
	}
	where := fmt.Sprintf("catalog %q (%s)", spec.name, spec.from)
	if sc, ok := cat.(*sqlCatalog); ok {
		if names := sc.catalogNames(); len(names) > 0 && !slices.Contains(names, spec.name) {
			return notFoundf("%s has no table %s: the database holds tables of catalogs %s, not of %q (name one with --catalog-name)", where, strings.Join(ident, "."), strings.Join(names, ", "), spec.name)
		}
	}
	ns := catalog.NamespaceFromIdent(ident)
	if ok, nerr := cat.CheckNamespaceExists(ctx, ns); nerr == nil && !ok {
		return notFoundf("%s has no namespace %s (table %s asked for)%s", where, strings.Join(ns, "."), strings.Join(ident, "."), listing(namespaces(ctx, cat)))
	}
	tables := []string{}
	for id, lerr := range cat.ListTables(ctx, ns) {
		if lerr != nil {
			tables = nil // a catalog that does not list says nothing of what it holds
			break
		}
		tables = append(tables, strings.Join(id, "."))
	}
	return notFoundf("%s has no table %s%s", where, strings.Join(ident, "."), listing(tables))
}

func namespaces(ctx context.Context, cat catalog.Catalog) []string {
	nss, err := cat.ListNamespaces(ctx, nil)
	if err != nil {
		return nil
	}
	out := []string{}
	for _, ns := range nss {
		out = append(out, strings.Join(ns, "."))
	}
	return out
}

// listing is ": it holds a, b, c" for a message, at most ten names; ""
// for nil, names that could not be listed.
func listing(names []string) string {
	if names == nil {
		return ""
	}
	if len(names) == 0 {
		return ": it holds none"
	}
	slices.Sort(names)
	more := ""
	if len(names) > 10 {
		more = fmt.Sprintf(" and %d more", len(names)-10)
		names = names[:10]
	}
	return ": it holds " + strings.Join(names, ", ") + more
}
