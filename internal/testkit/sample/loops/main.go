// Command loops lists the tests whose loops -short samples: the Test and
// Fuzz functions of the module that reach testing.Short, directly or
// through the functions they call (internal/testkit/sample's among them).
// CI's second pass runs those, and only those, without the race detector
// at full count (docs/testing.md, "How CI spends its time"); the rest ran
// in full in the first pass already.
//
// It prints one line per package: the package's directory (./dir), a tab,
// and a -run pattern naming its tests. Run from the module's root:
//
//	go run ./internal/testkit/sample/loops [-exclude dir]...
//
// Calls are followed by name without type information, so where it cannot
// tell which function a call reaches (a method call) it takes every one of
// that name: a test may be listed that did not need to be, never left out.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

type excludes []string

func (e *excludes) String() string     { return strings.Join(*e, ",") }
func (e *excludes) Set(v string) error { *e = append(*e, filepath.Clean(v)); return nil }

func main() {
	var ex excludes
	flag.Var(&ex, "exclude", "a package directory to leave out (repeatable)")
	flag.Parse()
	if err := run(".", ex, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loops:", err)
		os.Exit(1)
	}
}

// fn is a function or method of the module, by where it is and its name.
type fn struct {
	dir  string // relative to the module's root
	name string // "F", or "T.M" for a method
}

// body is what a function's body names: functions of its own directory,
// functions of other packages (by import path), and methods by name.
type body struct {
	local   []string
	foreign [][2]string // import path, name
	methods []string
	short   bool // names testing.Short itself
	test    bool // a Test or Fuzz function of a _test.go file
}

func run(root string, exclude []string, w io.Writer) error {
	module, err := modulePath(root)
	if err != nil {
		return err
	}
	funcs := map[fn]*body{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		return parseFile(path, filepath.ToSlash(rel), module, funcs)
	})
	if err != nil {
		return err
	}
	marked := reach(funcs, module)
	byDir := map[string][]string{}
	for f, b := range funcs {
		if b.test && marked[f] && !slices.Contains(exclude, filepath.Clean(f.dir)) {
			byDir[f.dir] = append(byDir[f.dir], f.name)
		}
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		names := byDir[d]
		slices.Sort(names)
		fmt.Fprintf(w, "./%s\t^(%s)$\n", d, strings.Join(names, "|"))
	}
	return nil
}

// reach marks every function that names testing.Short or calls one that
// is marked, until nothing changes.
func reach(funcs map[fn]*body, module string) map[fn]bool {
	marked := map[fn]bool{}
	methods := map[string]bool{} // method names of which some is marked
	for f, b := range funcs {
		if b.short {
			marked[f] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for f := range funcs {
			if strings.Contains(f.name, ".") && marked[f] {
				methods[f.name[strings.Index(f.name, ".")+1:]] = true
			}
		}
		for f, b := range funcs {
			if marked[f] {
				continue
			}
			hit := slices.ContainsFunc(b.local, func(n string) bool { return marked[fn{f.dir, n}] }) ||
				slices.ContainsFunc(b.methods, func(n string) bool { return methods[n] }) ||
				slices.ContainsFunc(b.foreign, func(p [2]string) bool {
					dir, ok := strings.CutPrefix(p[0], module)
					if !ok {
						return false
					}
					dir = strings.TrimPrefix(dir, "/")
					if dir == "" {
						dir = "."
					}
					return marked[fn{dir, p[1]}]
				})
			if hit {
				marked[f] = true
				changed = true
			}
		}
	}
	return marked
}

func parseFile(path, dir, module string, funcs map[fn]*body) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	imports := map[string]string{} // name in this file -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		} else if v := strings.TrimPrefix(name, "v"); len(v) > 0 && v[0] >= '0' && v[0] <= '9' && strings.Contains(p, "/") {
			// A major-version suffix (.../msgpack/v5) is not the name.
			q := p[:strings.LastIndex(p, "/")]
			name = q[strings.LastIndex(q, "/")+1:]
		}
		imports[name] = p
	}
	isTest := strings.HasSuffix(path, "_test.go")
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		b := &body{test: isTest && fd.Recv == nil && isTestFunc(fd)}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok {
					if p, ok := imports[id.Name]; ok {
						if p == "testing" && x.Sel.Name == "Short" {
							b.short = true
						}
						b.foreign = append(b.foreign, [2]string{p, x.Sel.Name})
						return false
					}
				}
				b.methods = append(b.methods, x.Sel.Name)
			case *ast.Ident:
				b.local = append(b.local, x.Name)
			}
			return true
		})
		k := fn{dir, name}
		if old, ok := funcs[k]; ok {
			// The same name in a package and its _test package: either may
			// be the one called, so a call reaches both.
			old.local = append(old.local, b.local...)
			old.foreign = append(old.foreign, b.foreign...)
			old.methods = append(old.methods, b.methods...)
			old.short = old.short || b.short
			old.test = old.test || b.test
			continue
		}
		funcs[k] = b
	}
	return nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// isTestFunc is whether fd is a test the go command runs: TestX or FuzzX
// taking one *testing.T or *testing.F.
func isTestFunc(fd *ast.FuncDecl) bool {
	for _, prefix := range []string{"Test", "Fuzz"} {
		rest, ok := strings.CutPrefix(fd.Name.Name, prefix)
		if !ok || (rest != "" && rest[0] >= 'a' && rest[0] <= 'z') || fd.Name.Name == "TestMain" {
			continue
		}
		if fd.Type.Params != nil && len(fd.Type.Params.List) == 1 {
			return true
		}
	}
	return false
}

func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("run it from the module's root: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}
