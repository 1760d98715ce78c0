package provisioner_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvtestTestsRunInParallel keeps this package's run time in bounds:
// each test that takes an API server (newHarness, newHarnessWith,
// testenv.Pooled or testenv.Start) spends most of its time waiting on it, and one after
// another they took eight minutes. Each calls t.Parallel() first, or opens
// with a "// Not parallel: why" comment when it measures something the
// whole process shares (its heap, its metrics).
func TestEnvtestTestsRunInParallel(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || !startsAPIServer(fn.Body) {
				continue
			}
			checked++
			if callsParallelFirst(fn.Body) {
				continue
			}
			if saysWhyNotParallel(f, fn.Body) {
				// make test-go runs these in a process of their own, found
				// by the comment on the line after the opening one.
				if c := firstComment(f, fn.Body); fset.Position(c.Pos()).Line != fset.Position(fn.Body.Lbrace).Line+1 {
					t.Errorf("%s: %s: put \"// Not parallel: why\" on the line right after \"func %s(t *testing.T) {\" (make test-go looks for it there)", fset.Position(fn.Pos()), fn.Name.Name, fn.Name.Name)
				}
				continue
			}
			t.Errorf("%s: %s starts an API server but does not call t.Parallel() first (or open with a \"// Not parallel: why\" comment)", fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
	if checked == 0 {
		t.Fatal("found no test that starts an API server: the check looks for the wrong calls")
	}
}

// startsAPIServer reports whether body calls newHarness, newHarnessWith,
// testenv.Pooled or testenv.Start.
func startsAPIServer(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch fun := call.Fun.(type) {
		case *ast.Ident:
			found = found || fun.Name == "newHarness" || fun.Name == "newHarnessWith"
		case *ast.SelectorExpr:
			if pkg, ok := fun.X.(*ast.Ident); ok && pkg.Name == "testenv" && (fun.Sel.Name == "Start" || fun.Sel.Name == "Pooled") {
				found = true
			}
		}
		return !found
	})
	return found
}

func callsParallelFirst(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	expr, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := expr.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel"
}

// saysWhyNotParallel reports whether the first comment in body, before its
// first statement, is "// Not parallel: ...".
func saysWhyNotParallel(f *ast.File, body *ast.BlockStmt) bool {
	c := firstComment(f, body)
	return c != nil && strings.HasPrefix(c.Text, "// Not parallel: ")
}

// firstComment is the first comment in body before its first statement, or nil.
func firstComment(f *ast.File, body *ast.BlockStmt) *ast.Comment {
	for _, cg := range f.Comments {
		if cg.Pos() < body.Lbrace || (len(body.List) > 0 && cg.Pos() > body.List[0].Pos()) {
			continue
		}
		return cg.List[0]
	}
	return nil
}
