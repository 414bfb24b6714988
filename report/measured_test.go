package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// measuredSpec is the spec measuredDB stores with its sweep: sglangsim at time scale 0.05 on a
// remote host (gpu1) beside a local one, two draft models, a sampled workload.
const measuredSpec = `version: 1
name: measured
hosts:
  - {name: gpu1, driver: ssh, address: 10.231.0.7, gpus: 8}
  - {name: here, driver: local, gpus: 4}
server:
  command: [/opt/bin/sglangsim]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31000"]
  env: {SGLANGSIM_TIME_SCALE: "0.05"}
  port: 31000
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3-small]
  big: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3-big]
matrix: {method: [baseline, eagle3, big], num_steps: [1, 2, 3], topk: [1], tp: [4]}
workload: {concurrency: [1, 16], requests: 8, input_tokens: 256, output_tokens: 96, temperature: 0.6, repeats: 2}
`

// measuredTok is the output tok/s (at concurrency 1; x10 at 16) of measuredDB's points by method
// and num_steps: eagle3 at 3 steps, the largest swept, is the best at concurrency 1; at 16,
// eagle3 at 2 steps (measuredTok16) is.
var measuredTok = map[string]float64{"baseline 0": 100, "eagle3 1": 150, "eagle3 2": 180, "eagle3 3": 210,
	"big 1": 120, "big 2": 130, "big 3": 125}

var measuredTok16 = map[string]float64{"eagle3 3": 1700, "eagle3 2": 1900}

// measuredDB records through the store's API the sweep of measuredSpec, planned as the spec
// plans it: every point runs on gpu1 (8x H100 from nvidia-smi), reports sglangsim's server info
// and passes the output check (8 prompts).
func measuredDB(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	spec, err := sweep.Parse("measured.yaml", []byte(measuredSpec))
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Plan()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "measured.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var hosts []store.NewHost
	for _, h := range spec.Hosts {
		hosts = append(hosts, store.NewHost{Name: h.Name, Address: h.Address, Driver: h.Driver, Unit: h.Unit, GPUs: h.GPUs})
	}
	var pts []store.NewPoint
	for _, p := range plan.Points {
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps, TopK: p.TopK,
			NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv, Env: p.Env, Runs: 4})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: spec.Name, SpecHash: plan.SpecHash, SpecText: string(spec.Source)}, hosts, pts)
	if err != nil {
		t.Fatal(err)
	}
	prompts := make([]string, 8)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("prompt %d", i)
	}
	outputs, _ := json.Marshal(map[string]any{"prompts": prompts, "runs": [][]string{prompts}})
	prov := json.RawMessage(`{"hostname": "gpu1", "kernel": "6.8.0", "driver": "ssh", "engine_version": "main",
		"gpus": [` + strings.Repeat(`{"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "memory_mb": 81559},`, 7) +
		`{"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "memory_mb": 81559}]}`)
	one := 1.0
	for _, p := range plan.Points {
		att, err := db.ClaimPoint(ctx, id, p.ID, "gpu1")
		if err != nil {
			t.Fatal(err)
		}
		info := map[string]any{"model_path": "/models/Qwen3.5-122B-A10B", "tp_size": p.TP, "version": "main",
			"simulator": "sglangsim (profile qwen3.5-122b-a10b, SGLANGSIM_VERSION main)", "speculative_draft_model_path": nil}
		if !p.Baseline {
			info["speculative_draft_model_path"] = spec.Methods[p.Method].Args[3]
		}
		raw, _ := json.Marshal(info)
		if err := db.SetPointInfo(ctx, id, p.ID, att, store.PointInfo{EffectiveArgs: raw, Provenance: prov}); err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointOutputs(ctx, id, p.ID, att, outputs); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s %d", p.Method, deref(p.NumSteps))
		n := 0
		for _, c := range []int{1, 16} {
			tok := measuredTok[key] * float64(c)
			if v, ok := measuredTok16[key]; ok && c == 16 {
				tok = v
			}
			for rep := 1; rep <= 2; rep++ {
				n++
				m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok * (1 + 0.001*float64(rep)), TPOTMedianMs: 1000 / tok * float64(c), TTFTP99Ms: 40}
				var fin *store.PointFinish
				if n == 4 {
					fin = &store.PointFinish{State: store.PointDone}
				}
				if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: rep,
					Status: store.RunOK, Metrics: m}, fin); err != nil {
					t.Fatal(err)
				}
			}
		}
		chk := store.OutputCheck{Result: store.OutputCheckOK, Agreement: &one, Evidence: json.RawMessage(`{"agreement": 1, "diverged": false, "reference_agreement": 1, "threshold": 0.9}`)}
		if p.Baseline {
			chk.Result = store.OutputCheckReference
		}
		if err := db.SetOutputCheck(ctx, id, p.ID, chk); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// plainText undoes each format's escaping of the report's own words, so one expected sentence is
// looked for in all three.
func plainText(format, doc string) string {
	switch format {
	case "html":
		return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&").Replace(doc)
	case "md":
		return strings.NewReplacer(`\_`, "_", `\*`, "*", `\|`, "|", `\~`, "~", `\$`, "$", "&lt;", "<", "&gt;", ">", `\\`, `\`).Replace(doc)
	}
	return strings.NewReplacer(`\%`, "%", `\_`, "_", `\&`, "&", `\allowbreak{}`, "", `\{`, "{", `\}`, "}", `$\times$`, "×",
		"--", "–", `\textgreater{}`, ">", `\textless{}`, "<", "''", `"`).Replace(doc)
}

// TestOutputCheckPassingIsOneLine: when every checked point answers as the baseline does, every
// format says so in one line (how many points, how many prompts each) and has no output check
// table; the live view has no rows either.
func TestOutputCheckPassingIsOneLine(t *testing.T) {
	db := measuredDB(t)
	s, err := report.Load(context.Background(), db, "measured")
	if err != nil {
		t.Fatal(err)
	}
	want := "Output check: all 6 points produced the baseline's output (8 prompts each"
	for f, doc := range writeAll(t, db, "measured") {
		plain := plainText(f, doc)
		if strings.Count(plain, want) != 1 {
			t.Errorf("%s: %d times %q", f, strings.Count(plain, want), want)
		}
		for _, no := range []string{"reference self-agreement", "first divergence", "tab:outputcheck", `href="#check"`, "## Output check"} {
			if strings.Contains(plain, no) {
				t.Errorf("%s: the output check table is there (%q) though every point passed", f, no)
			}
		}
	}
	if l := report.LiveTables(s); len(l.Check.Rows) != 0 {
		t.Errorf("live: %d output check rows though every point passed", len(l.Check.Rows))
	}
}

// TestOutputCheckFailingFirst: when some point mismatches, the table is there and the
// mismatching points come first, before the reference and the points that agree.
func TestOutputCheckFailingFirst(t *testing.T) {
	db, _ := checkDB(t)
	s, err := report.Load(context.Background(), db, "checked")
	if err != nil {
		t.Fatal(err)
	}
	rows := report.LiveTables(s).Check.Rows
	var order []string
	for _, r := range rows {
		order = append(order, r[0])
	}
	if len(order) < 2 || order[0] != "e2" || order[1] != "f" {
		t.Errorf("output check rows %v: want the mismatching e2 and f first", order)
	}
}

// TestOutputCheckNoteAgreesWithSpec: the report describes the reference's two passes as
// docs/spec.md does (all at once in order, then last first in batches of half the size).
func TestOutputCheckNoteAgreesWithSpec(t *testing.T) {
	db, _ := checkDB(t)
	s, err := report.Load(context.Background(), db, "checked")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	const order = "all at once in order and then last first in batches of half the size"
	if !strings.Contains(strings.Join(strings.Fields(string(spec)), " "), "answers them twice, "+order) {
		t.Errorf("docs/spec.md does not say the baseline %q", order)
	}
	if note := report.LiveTables(s).Check.Note; !strings.Contains(note, order) {
		t.Errorf("the output check's note does not say %q: %s", order, note)
	}
}

// TestHeaderSaysWhatWasMeasured: below the title, before the summary and the first table, every
// format says what was measured: the model, each method's draft model, the engine, that the
// figures are sglangsim's at time scale 0.05 (20x faster than the modelled GPUs), the workload and
// the hosts with their GPUs.
func TestHeaderSaysWhatWasMeasured(t *testing.T) {
	db := measuredDB(t)
	for f, doc := range writeAll(t, db, "measured") {
		plain := plainText(f, doc)
		for _, want := range []string{
			"/models/Qwen3.5-122B-A10B",
			"eagle3: /models/eagle3-small", "big: /models/eagle3-big",
			"sglangsim (profile qwen3.5-122b-a10b, SGLANGSIM_VERSION main)",
			"SIMULATED figures, at time scale 0.05", "20× faster",
			"random prompts of 256 input tokens, 96 output tokens", "temperature 0.6",
			"8 requests per level at concurrency 1, 16", "2 repeats",
			"gpu1 (ssh, 10.231.0.7): 8 GPUs in the spec, 8× NVIDIA H100 80GB HBM3", "here (local): 4 GPUs in the spec",
		} {
			i := strings.Index(plain, want)
			if i < 0 {
				t.Errorf("%s: the header lacks %q", f, want)
				continue
			}
			if j := strings.Index(plain, "State queued: 7 points"); j < 0 || i > j {
				t.Errorf("%s: %q is not above the summary", f, want)
			}
		}
	}
}

// TestHeaderOfARealServer: a sweep whose server is not sglangsim says nothing of a simulation.
func TestHeaderOfARealServer(t *testing.T) {
	db, _ := searchDB(t, false)
	for f, doc := range writeAll(t, db, "grid") {
		for _, no := range []string{"sglangsim", "SIMULATED", "time scale"} {
			if strings.Contains(doc, no) {
				t.Errorf("%s: the report of a real server says %q", f, no)
			}
		}
	}
}

// TestRecordedHeader: the header of a sweep run on sglangsim (the recorded rep-a: time scale
// 0.05 in the spec's server env) says so, with the model and draft the server reported and the
// workload of the spec; its output check, passed by every point that answered, is one line that
// names the points that failed before answering.
func TestRecordedHeader(t *testing.T) {
	st, _ := recorded(t)
	files := writeReport(t, st, report.Options{Format: "md"}, "rep-a")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	plain := plainText("md", string(b))
	for _, want := range []string{"/models/Qwen3.5-122B-A10B", "/models/eagle3", "sglangsim (profile", "SIMULATED", "time scale 0.05",
		"20× faster", "random prompts of 64 input tokens, 48 output tokens", "12 requests per level at concurrency 1, 4, 16",
		"here (local): 4 GPUs in the spec", "Output check: all 3 points produced the baseline's output (8 prompts each, greedy): lossless.",
		"Not checked: 3 point(s) that failed before answering (oom s=1 k=1 n=2 tp=4, oom s=2 k=1 n=3 tp=4, oom s=4 k=1 n=5 tp=4)."} {
		if !strings.Contains(plain, want) {
			t.Errorf("rep-a's report lacks %q", want)
		}
	}
}

// TestEdgeWinnerFlagged: eagle3 at 3 steps, the largest swept, is the best at concurrency 1: the
// best table's row and the summary say so with what to sweep next, in every format; at 16 the
// best (2 steps) is inside the range and is not flagged.
func TestEdgeWinnerFlagged(t *testing.T) {
	db := measuredDB(t)
	s, err := report.Load(context.Background(), db, "measured")
	if err != nil {
		t.Fatal(err)
	}
	const flag = "num_steps 3 is the largest swept (1, 2, 3): sweep 3..6 to see whether more steps help"
	for f, doc := range writeAll(t, db, "measured") {
		plain := plainText(f, doc)
		if !strings.Contains(plain, "At tp=4 c=1 the best, eagle3 s=3 k=1 n=4, is at the edge of the swept range: "+flag) {
			t.Errorf("%s: the summary does not flag the best at the edge", f)
		}
	}
	best := report.LiveTables(s).Best
	col := -1
	for i, h := range best.Head {
		if h == "edge of the swept range" {
			col = i
		}
	}
	if col < 0 || len(best.Rows) != 2 {
		t.Fatalf("best table head %q, %d rows: want an edge column", best.Head, len(best.Rows))
	}
	if got := best.Rows[0][col]; got != "num_steps 3 largest swept: sweep 3..6" {
		t.Errorf("c=1: edge %q", got)
	}
	if got := best.Rows[1][col]; got != "-" {
		t.Errorf("c=16 (best 2 steps, inside the range): edge %q", got)
	}
}
