package sweep

import (
	"fmt"
	"strings"
	"testing"
)

// TestMethodListsPlanTheirOwnPoints: a method's own lists replace the matrix's for its points only,
// and its files are part of its points' ids.
func TestMethodListsPlanTheirOwnPoints(t *testing.T) {
	s, err := Load("testdata/method-lists.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pl := s.Plan()
	var got []string
	for _, p := range pl.Points {
		got = append(got, fmt.Sprintf("%s files=%d", p.Label(), len(p.Files)))
	}
	want := []string{
		"baseline tp=1 files=0",
		"recommended s=4 k=1 n=5 tp=1 files=0",
		"adaptive-default s=3 k=1 n=4 tp=1 files=0",
		"adaptive-fitted s=7 k=1 n=8 tp=1 files=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fitted := pl.Points[3]
	if fitted.Files[0].Path != "/var/lib/specsweep/adaptive.json" || !strings.Contains(fitted.Files[0].Content, `"candidate_steps": [5, 7]`) {
		t.Fatalf("files = %+v", fitted.Files)
	}
	if fitted.ID != PointIDOf(fitted.Argv, fitted.Env, fitted.TP, fitted.Files) || fitted.ID == PointID(fitted.Argv, fitted.Env, fitted.TP) {
		t.Fatalf("the fitted point's id %s does not include its files", fitted.ID)
	}
	other := []File{{Path: fitted.Files[0].Path, Content: `{"1": {"candidate_steps": [7]}}`}}
	if PointIDOf(fitted.Argv, fitted.Env, fitted.TP, other) == fitted.ID {
		t.Fatal("another schedule in the same file gave the same point id")
	}
	if base := pl.Points[0]; base.ID != PointID(base.Argv, base.Env, base.TP) {
		t.Fatal("a point without files changed id")
	}
}

// TestMethodListsBounds: the files of one method and a method's own cross product are bounded.
func TestMethodListsBounds(t *testing.T) {
	spec := func(method string) string {
		return "version: 1\nname: t\nhosts: [{name: h, address: h.example, gpus: 1}]\n" +
			"server: {command: [/opt/sglang/bin/python]}\nmethods:\n  m: " + method + "\n" +
			"matrix: {method: [m]}\nworkload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}\n"
	}
	var files []string
	for i := range 17 {
		files = append(files, fmt.Sprintf("/etc/f%d: x", i))
	}
	steps := make([]string, 400)
	for i := range steps {
		steps[i] = fmt.Sprint(i%64 + 1)
	}
	for _, c := range []struct{ method, want string }{
		{"{args: [], files: {" + strings.Join(files, ", ") + "}}", "methods.m.files: 17 files, above the limit 16"},
		{"{args: [--speculative-algorithm, EAGLE], num_steps: [" + strings.Join(steps, ",") + "], topk: [" + strings.Join(steps, ",") + "]}",
			"methods.m: its lists expand to 160000 combinations, more than the limit of 100000"},
		{"{args: [--speculative-algorithm, EAGLE], num_steps: [1], topk: [1]}\nsearch: {strategy: grid}",
			"a method with its own num_steps, topk or num_draft_tokens cannot be searched"},
	} {
		_, err := Parse("s.yaml", []byte(spec(c.method)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("method %.60s...: error %v, want %q", c.method, err, c.want)
		}
	}
}
