package apicheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// List parses the non-test Go files of the package in dir and returns its
// exported API, one sorted line per declaration, each starting with
// "pkg <name>, ". Parameter names are left out (a rename is not an API
// change); exported struct fields and interface methods get a line of their
// own; an exported method of an unexported type is not part of the API.
func List(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("apicheck: no Go files in %s", dir)
	}
	l := lister{fset: fset, prefix: "pkg " + files[0].Name.Name + ", "}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				l.fn(d)
			case *ast.GenDecl:
				l.gen(d)
			}
		}
	}
	slices.Sort(l.lines)
	return slices.Compact(l.lines), nil
}

type lister struct {
	fset   *token.FileSet
	prefix string
	lines  []string
}

func (l *lister) add(format string, args ...any) {
	l.lines = append(l.lines, l.prefix+fmt.Sprintf(format, args...))
}

// expr prints an expression (a type, a value) on one line.
func (l *lister) expr(e ast.Expr) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, l.fset, e); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func (l *lister) fn(d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	sig := l.signature(d.Type)
	if d.Recv == nil || len(d.Recv.List) == 0 {
		l.add("func %s%s%s", d.Name.Name, l.typeParams(d.Type.TypeParams), sig)
		return
	}
	recv := d.Recv.List[0].Type
	if !exportedType(recv) {
		return
	}
	l.add("method (%s) %s%s", l.expr(recv), d.Name.Name, sig)
}

// exportedType reports whether a receiver names an exported type.
func exportedType(e ast.Expr) bool {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.IsExported()
		default:
			return false
		}
	}
}

func (l *lister) gen(d *ast.GenDecl) {
	var lastType ast.Expr // a const spec without a type or value repeats the previous one's
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			l.typ(s)
		case *ast.ValueSpec:
			if d.Tok == token.CONST && s.Type == nil && len(s.Values) == 0 {
				s = &ast.ValueSpec{Names: s.Names, Type: lastType}
			} else if d.Tok == token.CONST {
				lastType = s.Type
			}
			l.value(d.Tok, s)
		}
	}
}

func (l *lister) value(tok token.Token, s *ast.ValueSpec) {
	for i, n := range s.Names {
		if !n.IsExported() {
			continue
		}
		switch {
		case s.Type != nil:
			l.add("%s %s %s", tok, n.Name, l.expr(s.Type))
		case tok == token.CONST && i < len(s.Values):
			if lit, ok := s.Values[i].(*ast.BasicLit); ok {
				l.add("const %s = %s", n.Name, lit.Value)
				continue
			}
			l.add("const %s", n.Name)
		default:
			l.add("%s %s", tok, n.Name)
		}
	}
}

func (l *lister) typ(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	name := s.Name.Name + l.typeParams(s.TypeParams)
	if s.Assign.IsValid() {
		l.add("type %s = %s", name, l.expr(s.Type))
		return
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		l.add("type %s struct", name)
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if exportedType(f.Type) {
					l.add("type %s struct, embedded %s", name, l.expr(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					l.add("type %s struct, %s %s", name, n.Name, l.expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		l.add("type %s interface", name)
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				l.add("type %s interface, %s", name, l.expr(m.Type))
				continue
			}
			if ft, ok := m.Type.(*ast.FuncType); ok && m.Names[0].IsExported() {
				l.add("type %s interface, %s%s", name, m.Names[0].Name, l.signature(ft))
			}
		}
	default:
		l.add("type %s %s", name, l.expr(s.Type))
	}
}

// typeParams prints a type parameter list, "" when there is none.
func (l *lister) typeParams(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	var parts []string
	for _, f := range fl.List {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = n.Name
		}
		parts = append(parts, strings.Join(names, ", ")+" "+l.expr(f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature prints a function's parameters and results without their names.
func (l *lister) signature(ft *ast.FuncType) string {
	s := "(" + strings.Join(l.types(ft.Params), ", ") + ")"
	res := l.types(ft.Results)
	switch {
	case len(res) == 1 && (ft.Results.List[0].Names == nil):
		s += " " + res[0]
	case len(res) > 0:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}

// types lists a field list's types, one per name.
func (l *lister) types(fl *ast.FieldList) []string {
	if fl == nil {
		return nil
	}
	var out []string
	for _, f := range fl.List {
		t := l.expr(f.Type)
		for range max(len(f.Names), 1) {
			out = append(out, t)
		}
	}
	return out
}
