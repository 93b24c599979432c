package apicheck_test

import (
	"flag"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/apicheck"
)

var update = flag.Bool("update", false, "rewrite api/*.txt from the code")

// public are the packages whose exported API is recorded in api/<name>.txt.
var public = []string{"datadriver", "presence", "lockhandoff", "messaging", "transactions", "sampling"}

// TestAPIIsRecorded fails when a public package's exported API differs from
// api/<package>.txt: a new, changed or removed exported name must change
// that file in the same commit (go test ./internal/apicheck -update).
func TestAPIIsRecorded(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range public {
		t.Run(pkg, func(t *testing.T) {
			got, err := apicheck.List(filepath.Join(root, pkg))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(root, "api", pkg+".txt")
			if *update {
				if err := os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (record it: go test ./internal/apicheck -update)", err)
			}
			want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			var added, removed []string
			for _, l := range got {
				if !slices.Contains(want, l) {
					added = append(added, l)
				}
			}
			for _, l := range want {
				if !slices.Contains(got, l) {
					removed = append(removed, l)
				}
			}
			if len(added)+len(removed) > 0 {
				var diff strings.Builder
				for _, l := range added {
					diff.WriteString("\n+ " + l)
				}
				for _, l := range removed {
					diff.WriteString("\n- " + l)
				}
				t.Errorf("the exported API of %s is not what api/%s.txt records:%s\n"+
					"if the change is meant, record it: go test ./internal/apicheck -update", pkg, pkg, diff.String())
			}
		})
	}
}

// TestNoInternalTypeInTheSurface fails when a public package's exported API
// names a type of an internal package (in a signature, a field or an
// alias): a user could hold such a value but never name or build it.
func TestNoInternalTypeInTheSurface(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range public {
		t.Run(pkg, func(t *testing.T) {
			dir := filepath.Join(root, pkg)
			internal, err := internalImports(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := apicheck.List(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range got {
				for _, name := range internal {
					if strings.Contains(l, " "+name+".") || strings.Contains(l, "("+name+".") ||
						strings.Contains(l, "*"+name+".") || strings.Contains(l, "]"+name+".") ||
						strings.Contains(l, ","+name+".") {
						t.Errorf("%s names a type of internal package %s", l, name)
					}
				}
			}
		})
	}
}

// internalImports lists the names under which dir's non-test files import
// a package of this module's internal tree.
func internalImports(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, imp := range af.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names, nil
}
