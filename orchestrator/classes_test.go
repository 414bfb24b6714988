package orchestrator

import (
	"context"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
)

// hostctlClasses reads every constant of type Class declared in hostctl's sources, so that a class
// added there fails this test until the mapping knows it.
func hostctlClasses(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	// The package's non-test files for this build (go/build applies build constraints, which
	// parser.ParseDir, deprecated, did not).
	pkg, err := build.ImportDir("../hostctl", 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, name := range append(pkg.GoFiles, pkg.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Class" {
					for _, n := range vs.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no Class constants found in hostctl")
	}
	return names
}

func TestEveryFailureClassIsMappedBothWays(t *testing.T) {
	// hostctl -> store: every hostctl class has a store class, and keeps its name.
	consts := hostctlClasses(t)
	if len(consts) != len(failureClasses) {
		t.Errorf("hostctl declares %d classes, the mapping has %d", len(consts), len(failureClasses))
	}
	for c, s := range failureClasses {
		if !s.Valid() {
			t.Errorf("%s maps to %q, which the store refuses", c, s)
		}
		if string(c) != string(s) {
			t.Errorf("%s maps to %q: the stored name differs from hostctl's", c, s)
		}
	}
	// store -> hostctl: every store class but interrupted and output_mismatch (the orchestrator's
	// own) comes from one hostctl class.
	from := map[store.FailureClass]int{}
	for _, s := range failureClasses {
		from[s]++
	}
	for _, s := range store.FailureClasses {
		want := 1
		if s == store.FailInterrupted || s == store.FailOutputMismatch {
			want = 0
		}
		if from[s] != want {
			t.Errorf("store class %s is the image of %d hostctl classes, want %d", s, from[s], want)
		}
	}
}

func TestUnknownHostctlClassFailsThePointNotTheSweep(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "1" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{readyErr: &hostctl.Failure{Class: "brand_new", Detail: "something new"}}
		}
		if argAfter(l.Argv, "--speculative-num-steps") == "2" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{crashAt: 1, crash: &hostctl.Failure{Class: "brand_new_too", Detail: "during load"}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.State != store.SweepDone || out.Failed != 2 {
		t.Fatalf("outcome %+v", out)
	}
	rows := h.query("SELECT num_steps, failure_class, failure_detail FROM point_summary WHERE state = 'failed' ORDER BY num_steps")
	want := "[[1 crash_during_start brand_new: something new] [2 crash_during_load brand_new_too: during load]]"
	if fmt.Sprint(rows) != want {
		t.Errorf("failed points %v, want %s", rows, want)
	}
}
