package hostctl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// wallClockRead says whether the time package's function name reads or waits on the wall clock.
func wallClockRead(name string) bool {
	switch name {
	case "Now", "Since", "Until", "After", "AfterFunc", "Sleep", "Tick", "NewTimer", "NewTicker":
		return true
	}
	return false
}

// wallClockUses lists where f uses a wallClockRead (called or not), and a dot import of time.
func wallClockUses(fset *token.FileSet, f *ast.File) []string {
	name := ""
	var out []string
	for _, imp := range f.Imports {
		if imp.Path.Value != `"time"` {
			continue
		}
		name = "time"
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "." {
			out = append(out, fmt.Sprintf("%s: time imported with a dot", fset.Position(imp.Pos())))
		}
	}
	if name == "" || name == "_" || name == "." {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && wallClockRead(sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: time.%s", fset.Position(sel.Pos()), sel.Sel.Name))
		}
		return true
	})
	return out
}

// TestClockIsInjected: no file of hostctl but clock.go (the real clock) reads or waits on the wall
// clock itself: every wait and timestamp goes through the injected Clock, so a test's fake clock
// times them all. A bound of network I/O is a context timeout or ioDeadline.
func TestClockIsInjected(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) < 10 {
		t.Fatalf("hostctl's files: %v %v", files, err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "clock.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, use := range wallClockUses(fset, f) {
			t.Errorf("%s: read the injected Clock (clock.go) instead, or a context timeout for network I/O", use)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
	// The check itself finds a call, a function value and an aliased import.
	src := "package p\nimport tm \"time\"\nfunc f() { tm.Sleep(1); g := tm.Now; _ = g; _ = tm.Duration(1) }\n"
	f, err := parser.ParseFile(fset, "sample.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(wallClockUses(fset, f), "; "); got != "sample.go:3:12: time.Sleep; sample.go:3:30: time.Now" {
		t.Errorf("the check on a sample: %q", got)
	}
}
