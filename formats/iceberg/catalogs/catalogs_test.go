package catalogs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/formats/iceberg/catalogs"
)

// Reading tables through each kind of catalog is tested where the command
// reads them (cmd/sluice, TestCatalog*); here, what callers other than the
// command rely on: the kind of each error and the caller's own words in it.

var python = catalogs.Terms{Spec: "option catalog", Name: "option catalog_name"}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(two, []byte("catalog:\n  a:\n    uri: sqlite:///a.db\n  b:\n    type: rest\n    uri: http://localhost:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arg, name string
		kind      error
		says      []string
	}{
		{"mysql://u:s3cret@x/db", "", catalogs.ErrSpec, []string{"option catalog", "u:xxxxx@x", "not a catalog URI"}},
		{filepath.Join(dir, "missing.yaml"), "", formats.ErrNotFound, []string{"option catalog", "no such configuration file"}},
		{two, "", catalogs.ErrSpec, []string{"holds catalogs a, b", "name one with option catalog_name"}},
		{two, "c", formats.ErrNotFound, []string{`no catalog "c"`, "a, b"}},
	} {
		_, err := catalogs.Parse(c.arg, c.name, python)
		if !errors.Is(err, c.kind) {
			t.Errorf("Parse(%q, %q): %v, want an error wrapping %v", c.arg, c.name, err, c.kind)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Parse(%q, %q): %q does not say %q", c.arg, c.name, err, s)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): the message shows the password: %v", c.arg, err)
		}
	}
	s, err := catalogs.Parse(two, "b", python)
	if err != nil || s.Name != "b" || s.Type != "rest" || s.Props["uri"] != "http://localhost:1" || s.From != two+", catalog b" {
		t.Errorf("Parse(%s, b) = %+v, %v", two, s, err)
	}
	s, err = catalogs.Parse("sqlite:///x.db?warehouse=file:///w&token=t0k", "", python)
	if err != nil || s.Name != "default" || s.Type != "sql" || s.Props["warehouse"] != "file:///w" || s.Props["token"] != "t0k" || strings.Contains(s.From, "t0k") {
		t.Errorf("Parse of a URI with parameters = %+v, %v", s, err)
	}
}

func TestOpenTableErrors(t *testing.T) {
	ctx := context.Background()
	s, err := catalogs.Parse("sqlite:///"+filepath.Join(t.TempDir(), "nope.db"), "", python)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenTable(ctx, "ns.events", iceberg.Options{}); !errors.Is(err, formats.ErrNotFound) || !strings.Contains(err.Error(), "nope.db does not exist") {
		t.Errorf("a missing SQLite database: %v", err)
	}
	if _, err := s.OpenTable(ctx, "events", iceberg.Options{}); !errors.Is(err, catalogs.ErrSpec) || !strings.Contains(err.Error(), "namespace.table") {
		t.Errorf("an identifier without a namespace: %v", err)
	}
}
