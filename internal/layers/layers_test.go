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

// library says whether a package is library code: what a user's program
// links. The programs (the command, the bench, the examples) and the test
// kit are not; the C library, linked into Python, is.
func library(n string) bool {
	return !under(n, "cmd", "bench", "examples", "internal/testkit")
}

// TestTestKitApart: the test kit stands above the library, never under it.
// Library code imports nothing of internal/testkit, whose value harness
// imports stream; and no internal package the library links imports stream,
// directly or through its imports, so no arrow runs back up from the floor.
func TestTestKitApart(t *testing.T) {
	pkgs := list(t, true)
	floor := map[string]bool{}
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/") || !library(name(p)) {
			continue
		}
		// Direct imports suffice: library code imports no program, so a
		// path to the test kit starts with a library package importing it.
		for _, i := range own(p) {
			if under(i, "internal/testkit") {
				t.Errorf("%s imports %s: library code never imports the test kit", name(p), i)
			}
		}
		for _, d := range append([]string{p.ImportPath}, p.Deps...) {
			if under(strings.TrimPrefix(d, module+"/"), "internal") {
				floor[d] = true
			}
		}
	}
	if len(floor) == 0 {
		t.Fatal("the library links no package under internal/: go list found none")
	}
	for d := range floor {
		var up []string
		for _, dd := range pkgs[d].Deps {
			if i := strings.TrimPrefix(dd, module+"/"); i != dd && under(i, "stream") {
				up = append(up, i)
			}
		}
		if len(up) > 0 {
			t.Errorf("%s imports %s, directly or through its imports: the internal plumbing the library links stands below stream", name(pkgs[d]), strings.Join(up, ", "))
		}
	}
}

// manyParams are functions allowed over eight parameters, by file and name
// ("func literal in F" for a function literal in F). None is: the Parquet
// driver's read path became a row-group reader value and a mix lane's
// constructor takes its span as one value (issue 48). A name listed here that
// no longer takes more than eight fails the test, so that the list only
// shrinks.
var manyParams = map[string]bool{}

// TestParams: no function outside tests takes more than eight parameters
// (each name counts, a variadic one once): past eight a call is read by
// counting commas, and the values belong in a struct that names them.
func TestParams(t *testing.T) {
	pkgs := list(t, false)
	dir := root(t)
	fs := token.NewFileSet()
	seen := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range append(p.GoFiles, p.CgoFiles...) {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(fs, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ast.IsGenerated(file) {
				continue
			}
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				check := func(n ast.Node, ft *ast.FuncType, what string) {
					if count := params(ft); count > 8 {
						key := filepath.ToSlash(rel) + ": " + what
						seen[key] = true
						if !manyParams[key] {
							t.Errorf("%s:%d: %s takes %d parameters, over 8", filepath.ToSlash(rel), fs.Position(n.Pos()).Line, what, count)
						}
					}
				}
				check(fn, fn.Type, fn.Name.Name)
				ast.Inspect(fn, func(n ast.Node) bool {
					if lit, ok := n.(*ast.FuncLit); ok {
						check(lit, lit.Type, "func literal in "+fn.Name.Name)
					}
					return true
				})
			}
		}
	}
	for key := range manyParams {
		if !seen[key] {
			t.Errorf("%s takes 8 parameters or fewer now (or is gone): remove it from manyParams", key)
		}
	}
}

// params counts a function's parameters: each name, or each type where the
// parameters are not named.
func params(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}
