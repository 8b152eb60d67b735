package layers

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/sluicedata/sluice"

// pkg is what `go list -json` says of a package, the fields the rules read.
type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

// list runs go list over the module and returns its packages by import
// path; with deps, the standard library and third-party dependencies too.
func list(t *testing.T, deps bool) map[string]pkg {
	t.Helper()
	args := []string{"list", "-json"}
	if deps {
		args = append(args, "-deps")
	}
	cmd := exec.Command("go", append(args, module+"/...")...)
	cmd.Dir = root(t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(&out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// The Python package's build folder holds throwaway tools.
		if strings.HasPrefix(p.ImportPath, module+"/python/") {
			continue
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// own is the package's imports of the project, as paths under the module.
func own(p pkg) []string {
	var out []string
	for _, i := range p.Imports {
		if i == module || strings.HasPrefix(i, module+"/") {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(i, module), "/"))
		}
	}
	return out
}

func name(p pkg) string { return strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/") }

func under(path string, rooms ...string) bool {
	for _, r := range rooms {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

// TestRooms: what each room may not import (docs/design.md, "What each room
// may not import").
func TestRooms(t *testing.T) {
	pkgs := list(t, false)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of the module", len(pkgs))
	}
	for _, p := range pkgs {
		n := name(p)
		imps := own(p)
		for _, i := range imps {
			switch {
			case under(n, "permutation") && !under(i, "permutation"):
				t.Errorf("%s imports %s: the order imports only the standard library", n, i)
			case under(n, "split") && !under(i, "split", "permutation"):
				t.Errorf("%s imports %s: split imports only the standard library and permutation", n, i)
			case under(n, "formats") && under(i, "stream", "permutation", "split"):
				t.Errorf("%s imports %s: a driver knows nothing of splits, orders or streams", n, i)
			case under(n, "prefetch") && under(i, "formats"):
				t.Errorf("%s imports %s: prefetch is generic", n, i)
			case under(n, "storage") && !under(i, "storage"):
				t.Errorf("%s imports %s: storage is the bottom layer", n, i)
			case under(i, "cmd", "bench") || (under(i, "examples") && !under(n, "examples")):
				t.Errorf("%s imports %s: nothing imports a program", n, i)
			case under(n, "examples") && under(i, "internal"):
				t.Errorf("%s imports %s: an example can be copied out, so it imports nothing internal", n, i)
			case under(n, "stream/typed") && under(i, "stream") && !under(i, "stream/typed"):
				t.Errorf("%s imports %s: typed reads any source through its interface", n, i)
			}
		}
		// The command, the bench and the C library (a package main, built
		// as libsluice) are programs: they link every driver a user reads.
		if len(imps) > 8 && !under(n, "cmd/sluice", "bench", "capi") {
			t.Errorf("%s imports %d of the project's packages, more than eight: %v", n, len(imps), imps)
		}
	}
}

// TestOrderIsPure: permutation and split depend on nothing outside the
// standard library, directly or not: no Arrow, no I/O library, no clock
// but the standard library's, which they do not call.
func TestOrderIsPure(t *testing.T) {
	pkgs := list(t, true)
	for _, room := range []string{"permutation", "split"} {
		p, ok := pkgs[module+"/"+room]
		if !ok {
			t.Fatalf("no package %s", room)
		}
		for _, d := range p.Deps {
			dp := pkgs[d]
			if !dp.Standard && d != module+"/permutation" {
				t.Errorf("%s depends on %s", room, d)
			}
		}
	}
}

// TestSizes: no function over 150 lines outside tests, and package stream's
// own code (the user's API) under 3,000 lines, the engine in a room of its
// own.
func TestSizes(t *testing.T) {
	pkgs := list(t, false)
	fs := token.NewFileSet()
	for _, p := range pkgs {
		lines := 0
		for _, f := range append(p.GoFiles, p.CgoFiles...) {
			path := filepath.Join(p.Dir, f)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines += bytes.Count(src, []byte("\n"))
			file, err := parser.ParseFile(fs, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ast.IsGenerated(file) {
				continue
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fs.Position(fn.End()).Line - fs.Position(fn.Pos()).Line + 1; n > 150 {
					t.Errorf("%s: %s is %d lines, over 150", fs.Position(fn.Pos()), fn.Name.Name, n)
				}
			}
		}
		if name(p) == "stream" && lines >= 3000 {
			t.Errorf("package stream holds %d lines of non-test code, 3,000 or more: the engine belongs in stream/internal/engine", lines)
		}
	}
}
