// Package catalogs opens the Apache Iceberg catalogs that a user names by a
// spec: a URI (sqlite:///catalog.db, postgres://..., http(s)://... for REST,
// hadoop:///warehouse) or the path of a YAML or JSON file of catalog entries
// as pyiceberg's .pyiceberg.yaml writes them. It is what the command's
// --catalog flag and the Python package's catalog option read, so that both
// name catalogs alike. Each kind is tested in cmd/sluice (docs/formats.md,
// Catalogs); Hive and Glue, which need a metastore or AWS, are not offered.
//
// It is a package of its own because it links the SQL drivers (SQLite,
// PostgreSQL) and the REST client: a program that reads tables by their
// metadata files alone need not.
package catalogs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
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

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
)

// ErrSpec is wrapped by errors in what the user gave: a spec that names no
// catalog, a catalog of a type not offered, a malformed table identifier.
// Errors of a catalog, database, file, namespace or table that is not
// there wrap formats.ErrNotFound instead.
var ErrSpec = errors.New("catalogs: not a catalog spec")

// specError is an error whose text is its own and which wraps kind
// (ErrSpec or formats.ErrNotFound) for callers to test.
type specError struct {
	msg  string
	kind error
}

func (e *specError) Error() string { return e.msg }
func (e *specError) Unwrap() error { return e.kind }

func usageErrorf(format string, args ...any) error {
	return &specError{fmt.Sprintf(format, args...), ErrSpec}
}

func notFoundf(format string, args ...any) error {
	return &specError{fmt.Sprintf(format, args...), formats.ErrNotFound}
}

// Terms are the names the caller's interface gives the spec and the
// catalog name, which messages use to say what to change: the command's
// "--catalog" and "--catalog-name", the Python package's "catalog" and
// "catalog_name".
type Terms struct {
	Spec, Name string
}

// Spec is one catalog: its type and iceberg-go's properties for it (uri,
// warehouse, credentials).
type Spec struct {
	// Name is the catalog's name: a SQL catalog keys its tables by it.
	Name string
	// Type is sql, rest or hadoop.
	Type  string
	Props ice.Properties
	// From is what the user gave, without secrets, for messages: a URI
	// without its password, or a configuration file and the entry.
	From  string
	terms Terms
}

// defaultCatalogName is the name a catalog given by URI goes by, as
// pyiceberg's load_catalog names one.
const defaultCatalogName = "default"

// Parse reads a spec: a URI (sqlite:, postgres:, http(s):, hadoop:) or
// the path of a YAML or JSON file of catalog entries, of which name picks
// one (default: the file's only entry, or its "default"). A catalog named
// by URI goes by name, default "default", as pyiceberg's load_catalog
// names one. terms name the two in messages.
func Parse(arg, name string, terms Terms) (Spec, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return catalogFromFile(arg, name, terms)
	}
	if ext := filepath.Ext(arg); ext == ".yaml" || ext == ".yml" || ext == ".json" {
		return Spec{}, notFoundf("%s %s: no such configuration file", terms.Spec, arg)
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
	spec, err := catalogOfProps(name, props, terms)
	spec.From = from
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
func catalogOfProps(name string, props ice.Properties, terms Terms) (Spec, error) {
	spec := Spec{Name: name, Type: strings.ToLower(props["type"]), Props: props, terms: terms}
	uri := props["uri"]
	scheme, _, _ := strings.Cut(uri, ":")
	scheme = strings.ToLower(scheme)
	if spec.Type == "" {
		switch {
		case scheme == "sqlite" || scheme == "postgres" || strings.HasPrefix(scheme, "postgresql"):
			spec.Type = "sql"
		case scheme == "http" || scheme == "https":
			spec.Type = "rest"
		case scheme == "hadoop":
			spec.Type = "hadoop"
		default:
			return spec, usageErrorf("%s %q: not a catalog URI (sqlite:///catalog.db, postgres://..., http(s)://... for REST, hadoop:///warehouse) nor a configuration file", terms.Spec, redact(uri))
		}
	}
	switch spec.Type {
	case "sql", "rest":
		if uri == "" {
			return spec, usageErrorf("catalog %q of type %s has no uri", name, spec.Type)
		}
	case "hadoop":
		if scheme == "hadoop" {
			props["warehouse"] = strings.TrimPrefix(strings.TrimPrefix(uri, "hadoop:"), "//")
		}
		if props["warehouse"] == "" {
			return spec, usageErrorf("Hadoop catalog %q has no warehouse folder", name)
		}
	case "hive", "glue":
		return spec, usageErrorf("catalog %q is of type %s, which sluice does not open (untested here: a %s needs a running service); read the table by its metadata file", name, spec.Type, map[string]string{"hive": "Hive metastore", "glue": "Glue catalog on AWS"}[spec.Type])
	default:
		return spec, usageErrorf("catalog %q is of type %q: sluice opens sql, rest and hadoop catalogs", name, spec.Type)
	}
	return spec, nil
}

// catalogFile is pyiceberg's .pyiceberg.yaml: catalogs by name, each a map
// of properties (type, uri, warehouse, ...).
type catalogFile struct {
	Catalog map[string]map[string]any `yaml:"catalog"`
}

func catalogFromFile(path, name string, terms Terms) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, err
	}
	var f catalogFile
	if err := yaml.Unmarshal(b, &f); err != nil { // YAML reads JSON too
		return Spec{}, usageErrorf("%s %s: not a catalog configuration: %v", terms.Spec, path, err)
	}
	names := slices.Sorted(maps.Keys(f.Catalog))
	if len(names) == 0 {
		return Spec{}, usageErrorf("%s %s holds no catalogs (a top-level \"catalog\" map of names to properties)", terms.Spec, path)
	}
	switch {
	case name != "":
	case len(names) == 1:
		name = names[0]
	case f.Catalog[defaultCatalogName] != nil:
		name = defaultCatalogName
	default:
		return Spec{}, usageErrorf("%s %s holds catalogs %s: name one with %s", terms.Spec, path, strings.Join(names, ", "), terms.Name)
	}
	entry, ok := f.Catalog[name]
	if !ok {
		return Spec{}, notFoundf("%s %s has no catalog %q (it holds %s)", terms.Spec, path, name, strings.Join(names, ", "))
	}
	props := ice.Properties{}
	for k, v := range entry {
		props[k] = fmt.Sprint(v)
	}
	spec, err := catalogOfProps(name, props, terms)
	spec.From = path + ", catalog " + name
	return spec, err
}

// Open connects to the catalog. It only reads: a SQL catalog's tables are
// never created, a SQLite file is opened read-only. The caller closes a
// catalog that is an io.Closer (a SQL catalog's database).
func (s Spec) Open(ctx context.Context) (catalog.Catalog, error) {
	switch s.Type {
	case "sql":
		return s.openSQL()
	case "rest":
		opts := []rest.Option{rest.WithAdditionalProps(s.Props)}
		if w := s.Props["warehouse"]; w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		if c := s.Props["credential"]; c != "" {
			opts = append(opts, rest.WithCredential(c))
		}
		if tok := s.Props["token"]; tok != "" {
			opts = append(opts, rest.WithOAuthToken(tok))
		}
		c, err := rest.NewCatalog(ctx, s.Name, s.Props["uri"], opts...)
		if err != nil {
			return nil, fmt.Errorf("REST catalog %s: %w", s.From, err)
		}
		return c, nil
	default: // hadoop
		w := s.Props["warehouse"]
		if local := strings.TrimPrefix(w, "file://"); !strings.Contains(local, "://") {
			if st, err := os.Stat(local); err != nil || !st.IsDir() {
				return nil, notFoundf("Hadoop catalog %s: warehouse folder %s does not exist", s.From, local)
			}
		}
		c, err := hadoop.NewCatalog(s.Name, w, s.Props)
		if err != nil {
			return nil, fmt.Errorf("Hadoop catalog %s: %w", s.From, err)
		}
		return c, nil
	}
}

func (s Spec) openSQL() (catalog.Catalog, error) {
	uri := s.Props["uri"]
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
			return nil, notFoundf("SQL catalog %s: SQLite database %s does not exist", s.From, path)
		}
		driver, dialect, dsn = "sqlite", sqlcat.SQLite, "file:"+path+"?mode=ro"
	case scheme == "postgres" || strings.HasPrefix(scheme, "postgresql"):
		// SQLAlchemy's postgresql+psycopg2:// names its Python driver.
		driver, dialect, dsn = "pgx", sqlcat.Postgres, "postgres:"+rest
	default:
		return nil, usageErrorf("SQL catalog %s: uri %q is neither sqlite: nor postgres(ql):", s.From, redact(uri))
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("SQL catalog %s: %w", s.From, err)
	}
	props := maps.Clone(s.Props)
	props["init_catalog_tables"] = "false"
	c, err := sqlcat.NewCatalog(s.Name, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("SQL catalog %s: %w", s.From, err)
	}
	if ok, err := hasTable(db, "iceberg_tables"); err != nil || !ok {
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("SQL catalog %s: %w", s.From, err)
		}
		return nil, notFoundf("SQL catalog %s: the database holds no Iceberg catalog (no iceberg_tables table)", s.From)
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

// ParseIdentifier splits a table identifier, db.table or a.b.table (a
// nested namespace), at its dots.
func ParseIdentifier(s string) (icetable.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || slices.Contains(parts, "") {
		return nil, usageErrorf("table %q is not namespace.table (namespaces nest with dots: a.b.table)", s)
	}
	return parts, nil
}

// OpenTable opens the table ident (db.table, a.b.table) names in the
// catalog. The catalog is closed once it has named the table's metadata:
// sluice reads the rest. A table or namespace the catalog does not hold is
// an error wrapping formats.ErrNotFound that says what it holds instead.
func (s Spec) OpenTable(ctx context.Context, ident string, o iceberg.Options) (*iceberg.Table, error) {
	id, err := ParseIdentifier(ident)
	if err != nil {
		return nil, err
	}
	cat, err := s.Open(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := cat.(io.Closer); ok {
		defer c.Close()
	}
	tbl, err := iceberg.OpenCatalog(ctx, cat, id, o)
	if err != nil {
		return nil, explainMissing(ctx, cat, s, id, err)
	}
	return tbl, nil
}

// explainMissing explains a table the catalog does not hold: which part of the
// identifier is missing, and what is there instead.
func explainMissing(ctx context.Context, cat catalog.Catalog, spec Spec, ident icetable.Identifier, err error) error {
	if !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace) {
		return err
	}
	where := fmt.Sprintf("catalog %q (%s)", spec.Name, spec.From)
	if sc, ok := cat.(*sqlCatalog); ok {
		if names := sc.catalogNames(); len(names) > 0 && !slices.Contains(names, spec.Name) {
			return notFoundf("%s has no table %s: the database holds tables of catalogs %s, not of %q (name one with %s)", where, strings.Join(ident, "."), strings.Join(names, ", "), spec.Name, spec.terms.Name)
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
