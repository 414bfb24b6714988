package sim

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const profileDir = "testdata/profiles"

// Every profile file of testdata/profiles loads; decoding keeps the values
// given and gives the fields left out their documented defaults.
func TestProfileFilesLoad(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(profileDir, "*.json"))
	if len(files) == 0 {
		t.Fatalf("profile files: %v", files)
	}
	for _, f := range files {
		p, err := LoadProfile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if p.Source != f || p.Name != strings.TrimSuffix(filepath.Base(f), ".json") {
			t.Errorf("%s: name %q source %q, want the file's base name and path", f, p.Name, p.Source)
		}
	}
	p, err := LoadProfile(filepath.Join(profileDir, "example-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.T0 != 6.2 || p.RefTP != 1 || p.Match == nil || len(p.Match) != 0 || !reflect.DeepEqual(p.DraftGB, map[string]float64{"EAGLE3": 0.5}) ||
		!reflect.DeepEqual(p.Accept, map[string][]float64{"EAGLE3": {0.8, 0.68, 0.58, 0.5, 0.44, 0.4}}) {
		t.Errorf("values given: t0 %v ref_tp %v match %#v draft_gb %v accept %v", p.T0, p.RefTP, p.Match, p.DraftGB, p.Accept)
	}
	// A minimal file: the required fields only.
	min := []byte(`{"name": "m", "context_len": 4096, "ref_tp": 1, "t0": 5, "per_token": 0.1,
		"accept": {"EAGLE": [0.7]}, "weights_gb": 10, "kv_bytes_per_token": 65536}`)
	q, err := parseProfile("min.json", min)
	if err != nil {
		t.Fatal(err)
	}
	want := profileDefaults()
	want.Name, want.ContextLen, want.RefTP, want.T0, want.PerToken = "m", 4096, 1, 5, 0.1
	want.Accept, want.WeightsGB, want.KVBytesPerToken = map[string][]float64{"EAGLE": {0.7}}, 10, 65536
	if !reflect.DeepEqual(*q, want) {
		t.Errorf("minimal file:\n got %+v\nwant %+v", *q, want)
	}
}

// Each bad file gives the error bad/want.txt holds for it, naming the file
// and the field.
func TestBadProfiles(t *testing.T) {
	f, err := os.Open(filepath.Join(profileDir, "bad", "want.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, msg, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("want.txt: bad line %q", line)
		}
		want[name] = msg
	}
	files, _ := filepath.Glob(filepath.Join(profileDir, "bad", "*.json"))
	if len(files) != len(want) {
		t.Errorf("%d bad files, %d lines in want.txt", len(files), len(want))
	}
	for _, path := range files {
		msg, ok := want[filepath.Base(path)]
		if !ok {
			t.Errorf("%s: no line in want.txt", path)
			continue
		}
		p, err := LoadProfile(path)
		if err == nil {
			t.Errorf("%s: loaded %+v, want an error", path, p)
			continue
		}
		if got, w := err.Error(), "profile "+path+": "+msg; got != w {
			t.Errorf("%s:\n got %s\nwant %s", path, got, w)
		}
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	if _, err := LoadProfile(missing); err == nil || err.Error() != "profile "+missing+": no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
}

func TestBuiltinProfilesValid(t *testing.T) {
	for _, n := range ProfileNames() {
		if err := Profiles[n].Validate(); err != nil {
			t.Errorf("built-in %s: %v", n, err)
		}
	}
	p := *Profiles[DefaultProfile]
	p.Accept = map[string][]float64{"EAGLE3": {0.5, 1.2}}
	if err := p.Validate(); err == nil || err.Error() != "profile qwen3.5-122b-a10b: accept.EAGLE3[1]: 1.2 is not a probability in [0, 1]" {
		t.Errorf("bad built-in: %v", err)
	}
}

func TestPickProfileFile(t *testing.T) {
	for _, v := range []string{"x.json", "dir/x", "/abs/x.json"} {
		if !IsProfilePath(v) {
			t.Errorf("%q is a file path", v)
		}
	}
	for _, v := range []string{"qwen3.6-27b", "", "json"} {
		if IsProfilePath(v) {
			t.Errorf("%q is a built-in name", v)
		}
	}
	path := filepath.Join(profileDir, "example-8b.json")
	p, err := PickProfile(path, "/models/Qwen3.5-122B-A10B")
	if err != nil || p.Name != "example-8b" || p.Source != path {
		t.Fatalf("PickProfile(%s): %+v, %v", path, p, err)
	}
	q, _ := PickProfile(path, "")
	if p == q {
		t.Errorf("two loads returned the same *Profile")
	}
	if _, ok := Profiles["example-8b"]; ok {
		t.Errorf("a loaded profile was added to the built-in ones")
	}
	if _, err := PickProfile("missing/x.json", ""); err == nil || !strings.HasPrefix(err.Error(), "profile missing/x.json: ") {
		t.Errorf("missing file: %v", err)
	}
}

// docs/sglangsim.md documents every field of a profile file and shows the
// example file as it is.
func TestProfileDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/sglangsim.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range profileFields() {
		if !strings.Contains(string(doc), "| `"+f+"` |") {
			t.Errorf("docs/sglangsim.md has no table row for profile field %q", f)
		}
	}
	ex, err := os.ReadFile(filepath.Join(profileDir, "example-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```json\n"+string(ex)+"```\n") {
		t.Errorf("docs/sglangsim.md does not show %s/example-8b.json as it is", profileDir)
	}
}

func loadTestProfile(t testing.TB, name string) *Profile {
	t.Helper()
	p, err := LoadProfile(filepath.Join(profileDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The fit docs/sglangsim.md describes recovers example-8b's numbers from
// what a user measures: decode speed (and accept length) of one stream at
// baseline with two prompt lengths and at EAGLE-3 num_steps 1..3, and the
// step time at 32 running requests, baseline and num_steps 1.
func TestExampleProfileFit(t *testing.T) {
	p := loadTestProfile(t, "example-8b")
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	const ctx = 1024 + 256 // mean context of a stream with a 1024-token prompt and 512 tokens out
	base := profileModel(t, p, "--tp", "1")
	steps := func(k int) *Model {
		argv := eagle3(k)
		argv[1] = "1"
		return profileModel(t, p, argv...)
	}
	// Baseline: one stream's step time is 1000 / (tok/s); at B running, 1000 * B / (tok/s).
	t1 := 1000 / base.SingleStreamTokS(ctx)
	t1long := 1000 / base.SingleStreamTokS(ctx+8000)
	t32 := ms(base.StepTime(32, 32*ctx))
	perKCtx := (t1long - t1) / 8
	perToken := (t32-t1)/31 - perKCtx*ctx/1000
	t0 := t1 - perToken - perKCtx*ctx/1000
	var a, s [4]float64 // accept length and step time (ms) at num_steps k, one stream
	for k := 1; k <= 3; k++ {
		r := Simulate(steps(k), 1, 64, 1024, 512, 1)
		a[k] = r.AcceptLen
		s[k] = 1000 * a[k] / r.PerStreamTokS
		t.Logf("num_steps %d: decode %.1f tok/s, accept length %.3f -> step %.3f ms", k, r.PerStreamTokS, a[k], s[k])
	}
	s32 := ms(steps(1).StepTime(32, 32*ctx))
	p1 := a[1] - 1
	p2 := (a[2] - a[1]) / p1
	p3 := (a[3] - a[2]) / (p1 * p2)
	draftPerTok := (s32-ms(steps(1).StepTime(1, ctx)))/31 - 2*perToken - perKCtx*ctx/1000
	draftStep := (s[3]-s[1])/2 - perToken - draftPerTok
	draftFixed := s[1] - t1 - perToken - draftStep - draftPerTok
	t.Logf("baseline: %.1f tok/s (step %.3f ms), prompt +8000: %.1f tok/s (%.3f ms), 32 running: %.0f tok/s (%.3f ms); num_steps 1 at 32 running: step %.3f ms",
		1000/t1, t1, 1000/t1long, t1long, 32000/t32, t32, s32)
	t.Logf("fit: t0 %.3f per_token %.4f per_kctx %.4f draft_fixed %.3f draft_step %.3f draft_per_tok %.4f accept %.3f %.3f %.3f",
		t0, perToken, perKCtx, draftFixed, draftStep, draftPerTok, p1, p2, p3)
	for _, f := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"t0", t0, p.T0, 0.01}, {"per_token", perToken, p.PerToken, 0.01}, {"per_kctx", perKCtx, p.PerKCtx, 0.01},
		{"draft_per_tok", draftPerTok, p.DraftPerTok, 0.05},
		{"draft_step", draftStep, p.DraftStep, 0.15}, {"draft_fixed", draftFixed, p.DraftFixed, 0.25},
		{"accept[0]", p1, p.Accept["EAGLE3"][0], 0.03}, {"accept[1]", p2, p.Accept["EAGLE3"][1], 0.05}, {"accept[2]", p3, p.Accept["EAGLE3"][2], 0.08},
	} {
		if math.Abs(f.got/f.want-1) > f.tol {
			t.Errorf("fitted %s = %.4f, the file's %.4f (more than %.0f%% off)", f.name, f.got, f.want, 100*f.tol)
		}
	}
}
