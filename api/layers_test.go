package api

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// layers are the module's packages from the bottom (0) up (docs/development.md, "Layout"): an import
// goes to a lower layer only. The check lives beside the API because the API's move out of the
// orchestrator made the rule; it reads the whole module.
var layers = []struct {
	name string
	dirs []string // a directory, or a prefix ending in "/" for all below it
}{
	{"small utilities", []string{"internal/argparse", "internal/defaults", "internal/textdist", "internal/refusals", "internal/tabular", "migrations"}},
	// The spec is below the drivers: hostctl.Open turns a spec's host into a driver.
	{"the spec and the store", []string{"store", "sweep"}},
	{"parts", []string{"hostctl", "workload", "sim", "internal/testhost"}},
	{"domain", []string{"orchestrator", "report"}},
	{"servers", []string{"api", "web"}},
	{"commands", []string{"internal/cli"}},
	{"mains, end-to-end tests and benchmarks", []string{"cmd/", "bench/", "internal/e2e"}},
}

func layerOf(dir string) (int, bool) {
	for i, l := range layers {
		for _, d := range l.dirs {
			if dir == d || (strings.HasSuffix(d, "/") && strings.HasPrefix(dir, d)) {
				return i, true
			}
		}
	}
	return 0, false
}

// TestImportsPointDown: no package imports one of its own layer or above (its tests: none above), and
// only the API imports Prometheus (the orchestrator knows nothing of HTTP serving or metrics).
func TestImportsPointDown(t *testing.T) {
	const module = "github.com/specsweep/specsweep/"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// directory -> imported path -> imported by a non-test file
	imports := map[string]map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if imports[rel] == nil {
			imports[rel] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			imports[rel][p] = imports[rel][p] || !strings.HasSuffix(path, "_test.go")
			// The metrics are written by api/metrics.go; Prometheus's packages only check them, in tests.
			if strings.HasPrefix(p, "github.com/prometheus/") && !strings.HasSuffix(path, "_test.go") {
				t.Errorf("%s imports %s: Prometheus's packages are for tests (api/metrics.go writes the metrics)", filepath.ToSlash(path[len(root)+1:]), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the module's imports: %v", err)
	}
	if len(imports) < 10 {
		t.Fatalf("read only %d packages under %s", len(imports), root)
	}
	for dir, ims := range imports {
		from, ok := layerOf(dir)
		if !ok {
			t.Errorf("package %s is in no layer: add it to layers in api/layers_test.go and to docs/development.md", dir)
			continue
		}
		for p, build := range ims {
			if !strings.HasPrefix(p, module) || p == module+dir {
				continue
			}
			// A test may also use a part of its own layer (hostctl's tests boot internal/testhost).
			to, ok := layerOf(strings.TrimPrefix(p, module))
			if ok && (to > from || build && to == from) {
				t.Errorf("%s (%s) imports %s (%s): imports point down", dir, layers[from].name, p, layers[to].name)
			}
		}
	}
}
