package sweep_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // CRON_TZ zones validate the same on machines without zoneinfo

	"github.com/specsweep/specsweep/sweep"
)

// TestGoodFiles: every testdata/*.good.yaml parses, validates and plans.
func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d good files, want at least 4", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := sweep.Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			p := s.Plan()
			if len(p.Points) == 0 {
				t.Fatal("plan has no points")
			}
			if p.Runs != len(p.Points)*s.Workload.Loads()*len(s.Workload.Sources())*s.Workload.Repeats {
				t.Errorf("runs = %d", p.Runs)
			}
			if p.Estimate <= 0 {
				t.Errorf("estimate = %v", p.Estimate)
			}
		})
	}
}

// TestSharedExamples: the design's examples stay in sync with the copies in
// testdata (the copies keep this package's tests self-contained).
func TestSharedExamples(t *testing.T) {
	for _, name := range []string{"eagle3-steps", "two-hosts-methods"} {
		shared, err := os.ReadFile(filepath.Join("..", "..", "shared", "examples", name+".yaml"))
		if err != nil {
			t.Skipf("shared examples not present: %v", err)
		}
		copy, err := os.ReadFile(filepath.Join("testdata", name+".good.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shared, copy) {
			t.Errorf("testdata/%s.good.yaml differs from the shared example", name)
		}
	}
}

// TestBadFiles: each testdata/*.bad.yaml starts with "# want: LINE:COL: text"
// lines; the errors must be exactly those (each want a prefix of one error).
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) < 15 {
		t.Fatalf("found %d bad files, want at least 15", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("no # want: lines")
			}
			_, err = sweep.Parse(f, data)
			var list sweep.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse error = %v (%T), want an ErrorList", err, err)
			}
			var got []string
			for _, e := range list {
				if e.File != f {
					t.Errorf("error file = %q, want %q", e.File, f)
				}
				s := e.Error()
				if !strings.HasPrefix(s, f+":") {
					t.Errorf("error %q does not start with the file name", s)
				}
				got = append(got, strings.TrimPrefix(s, f+":"))
			}
			used := make([]bool, len(got))
		wantLoop:
			for _, w := range wants {
				for i, g := range got {
					if !used[i] && strings.HasPrefix(g, w) {
						used[i] = true
						continue wantLoop
					}
				}
				t.Errorf("missing error %q", w)
			}
			for i, g := range got {
				if !used[i] {
					t.Errorf("unexpected error %q", g)
				}
			}
		})
	}
}

// TestGPUWait: server.gpu_wait is read, and left out of the stored spec when not given (a spec's
// hash stays what it was before the key existed).
func TestGPUWait(t *testing.T) {
	parse := func(f string) *sweep.Spec {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sweep.Parse(f, b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := parse("testdata/pack.good.yaml")
	if s.Server.GPUWait != 30*time.Second {
		t.Errorf("gpu_wait = %v, want 30s", s.Server.GPUWait)
	}
	b, err := json.Marshal(parse("testdata/minimal.good.yaml").Server)
	if err != nil || strings.Contains(string(b), "gpu_wait") {
		t.Errorf("a spec without gpu_wait stores %s (%v)", b, err)
	}
}

// TestServerStop: server.stop is kill unless the spec says drain, and kill (given or not) is left
// out of the stored spec (a spec's hash stays what it was before the key existed).
func TestServerStop(t *testing.T) {
	base, err := os.ReadFile("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line   string
		kill   bool
		stored bool
	}{{"", true, false}, {"  stop: kill\n", true, false}, {"  stop: drain\n", false, true}} {
		text := strings.Replace(string(base), "server:\n", "server:\n"+c.line, 1)
		s, err := sweep.Parse("minimal.yaml", []byte(text))
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		b, err := json.Marshal(s.Server)
		if err != nil {
			t.Fatal(err)
		}
		if s.Server.KillAtStop() != c.kill || strings.Contains(string(b), `"stop"`) != c.stored {
			t.Errorf("%q: KillAtStop %v, stored %s; want %v, stored %v", c.line, s.Server.KillAtStop(), b, c.kill, c.stored)
		}
	}
}
