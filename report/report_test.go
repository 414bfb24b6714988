package report_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/workload"
)

// Two real sweeps on sglangsim, recorded once, by the first test that wants them (recorded):
// sweepA (baseline, EAGLE-3 steps 1, 2 and 4, a method that runs out of memory; 2 repeats) and
// sweepB (baseline and EAGLE-3 steps 2 and 3 with another profile; 1 repeat), in one database.
var (
	recordDir  string // TestMain's scratch directory: the binaries and the database
	recordOnce sync.Once
	dbFile     string
	setupErr   error
)

const specA = `version: 1
name: rep-a
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%[1]s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "%[2]d", --enable-metrics]
  env: {SGLANGSIM_TIME_SCALE: "0.05", SGLANGSIM_LOAD_SECONDS: "10", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1"}
  port: %[2]d
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
  oom: {args: [--speculative-algorithm, EAGLE3], env: {SGLANGSIM_FAIL: oom}}
matrix: {method: [baseline, eagle3, oom], num_steps: [1, 2, 4], topk: [1], tp: [4]}
workload: {concurrency: [1, 4, 16], requests: 12, warmup_requests: 1, input_tokens: 64, output_tokens: 48, repeats: 2}
`

const specB = `version: 1
name: rep-b
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%[1]s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "%[2]d", --enable-metrics]
  env: {SGLANGSIM_TIME_SCALE: "0.05", SGLANGSIM_LOAD_SECONDS: "10", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1"}
  port: %[2]d
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix: {method: [baseline, eagle3], num_steps: [2, 3], topk: [1], tp: [4]}
workload: {concurrency: [1, 4, 16], requests: 12, warmup_requests: 1, input_tokens: 64, output_tokens: 96}
`

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "report-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	recordDir = dir
	// The recorded sweeps' servers and every test's run on a free port: the default ports are held.
	done := testhost.GuardDefaultPorts()
	code := done(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// recordSweeps builds specsweep and sglangsim and runs both sweeps for real into one database. It
// runs in the test t (the first to call recorded), for testhost.FreePort's sake.
func recordSweeps(t *testing.T, dir string) error {
	for _, b := range []string{"specsweep", "sglangsim"} {
		if err := testhost.BuildCommand(b, filepath.Join(dir, b)); err != nil {
			return err
		}
	}
	dbFile = filepath.Join(dir, "sweeps.db")
	for i, spec := range []string{specA, specB} {
		f := filepath.Join(dir, fmt.Sprintf("spec%d.yaml", i))
		// A port free now (testhost.FreePort: below the ephemeral range, so no outgoing connection
		// takes it meanwhile): another test process may hold any fixed one on this loopback.
		port := testhost.FreePort(t)
		if err := os.WriteFile(f, []byte(fmt.Sprintf(spec, filepath.Join(dir, "sglangsim"), port)), 0o644); err != nil {
			return err
		}
		cmd := exec.Command(filepath.Join(dir, "specsweep"), "run", "--db", dbFile, f)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("specsweep run %s: %v\n%s", f, err, out)
		}
	}
	return nil
}

func recorded(t *testing.T) (*store.DB, *sql.DB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a recorded sweep (runs sglangsim)")
	}
	recordOnce.Do(func() {
		// recordSweeps may end this test (testhost.FreePort's t.Fatal): the later tests fail on this.
		setupErr = errors.New("the recording stopped in an earlier test")
		setupErr = recordSweeps(t, recordDir)
	})
	if setupErr != nil {
		t.Fatalf("recording the sweeps: %v", setupErr)
	}
	st, err := store.OpenReadOnly(context.Background(), dbFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := sql.Open("sqlite3", "file:"+dbFile+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return st, raw
}

func load(t *testing.T, st *store.DB, ref string) *report.Sweep {
	t.Helper()
	s, err := report.Load(context.Background(), st, ref)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// level is what the test computes itself from the database for one point at one level.
type level struct {
	label             string
	tp, c             int
	med, lo, hi       float64
	speedup           float64
	n                 int
	perUser, perGPU   float64
	baseline, hasSpUp bool
}

// levelsFromDB computes median output tok/s (and its range), median speedup and per-user/per-GPU
// throughput per point and level with plain SQL and Go, independently of the report package. A
// level with a failed repeat does not count (docs/report.md): the SQL leaves it out.
func levelsFromDB(t *testing.T, db *sql.DB, sweep string) map[string]*level {
	t.Helper()
	rows, err := db.Query(`SELECT point_id, method, num_steps, topk, num_draft_tokens, tp, concurrency, output_tok_s, speedup, tpot_p50_ms
		FROM run_summary r WHERE sweep = ? AND status = 'ok' AND NOT EXISTS (SELECT 1 FROM run_summary f
			WHERE f.sweep_id = r.sweep_id AND f.point_id = r.point_id AND f.concurrency = r.concurrency
			AND f.status = 'failed')`, sweep)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type vals struct{ tok, sp, tpot []float64 }
	acc := map[string]*vals{}
	out := map[string]*level{}
	for rows.Next() {
		var id, method string
		var steps, topk, draft sql.NullInt64
		var tp, c int
		var tok float64
		var sp, tpot sql.NullFloat64
		if err := rows.Scan(&id, &method, &steps, &topk, &draft, &tp, &c, &tok, &sp, &tpot); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%s@%d", id, c)
		if out[k] == nil {
			label := method
			if steps.Valid {
				label = fmt.Sprintf("%s s=%d k=%d n=%d", method, steps.Int64, topk.Int64, draft.Int64)
			}
			out[k] = &level{label: label, tp: tp, c: c, baseline: !steps.Valid}
			acc[k] = &vals{}
		}
		acc[k].tok = append(acc[k].tok, tok)
		if sp.Valid {
			acc[k].sp = append(acc[k].sp, sp.Float64)
		}
		if tpot.Valid {
			acc[k].tpot = append(acc[k].tpot, tpot.Float64)
		}
	}
	med := func(v []float64) float64 {
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	for k, l := range out {
		a := acc[k]
		l.med, l.n = med(a.tok), len(a.tok)
		l.lo, l.hi = slices.Min(a.tok), slices.Max(a.tok)
		if len(a.sp) > 0 {
			l.speedup, l.hasSpUp = med(a.sp), true
		}
		if len(a.tpot) > 0 {
			l.perUser = 1000 / med(a.tpot)
		}
		l.perGPU = l.med / float64(l.tp)
	}
	return out
}

// bestFromDB: per tp and level, the best and runner-up by median tok/s.
func bestFromDB(levels map[string]*level) map[[2]int][2]*level {
	best := map[[2]int][2]*level{}
	for _, l := range levels {
		k := [2]int{l.tp, l.c}
		b := best[k]
		switch {
		case b[0] == nil || l.med > b[0].med:
			b[1], b[0] = b[0], l
		case b[1] == nil || l.med > b[1].med:
			b[1] = l
		}
		best[k] = b
	}
	return best
}

func TestBestPerLevelMatchesTheDatabase(t *testing.T) {
	st, raw := recorded(t)
	s := load(t, st, "rep-a")
	if s.Repeats != 2 || !slices.Equal(s.Levels, []int{1, 4, 16}) {
		t.Fatalf("repeats %d, levels %v", s.Repeats, s.Levels)
	}
	want := bestFromDB(levelsFromDB(t, raw, "rep-a"))
	got := report.BestPerLevel(s)
	if len(got) != len(want) {
		t.Fatalf("%d best rows, want %d", len(got), len(want))
	}
	for _, b := range got {
		w := want[[2]int{b.TP, b.Concurrency}]
		if b.Best.Point.Label() != w[0].label || !near(b.Best.TokS.Median, w[0].med) || b.Best.TokS.N != 2 {
			t.Errorf("tp %d c %d: best %s %.3f (n %d), want %s %.3f", b.TP, b.Concurrency, b.Best.Point.Label(), b.Best.TokS.Median, b.Best.TokS.N, w[0].label, w[0].med)
		}
		if !near(b.Best.TokS.Min, w[0].lo) || !near(b.Best.TokS.Max, w[0].hi) || !near(b.Speedup(), w[0].speedup) {
			t.Errorf("c %d: range %.3f..%.3f speedup %.4f, want %.3f..%.3f %.4f", b.Concurrency, b.Best.TokS.Min, b.Best.TokS.Max, b.Speedup(), w[0].lo, w[0].hi, w[0].speedup)
		}
		if b.RunnerUp == nil || b.RunnerUp.Point.Label() != w[1].label {
			t.Fatalf("c %d: runner-up %v, want %s", b.Concurrency, b.RunnerUp, w[1].label)
		}
		if m := 100 * (w[0].med/w[1].med - 1); !near(b.MarginPct, m) {
			t.Errorf("c %d: margin %.3f%%, want %.3f%%", b.Concurrency, b.MarginPct, m)
		}
		noise := report.NoiseClear
		if w[0].lo <= w[1].hi {
			noise = report.NoiseWithin
		}
		if b.Noise != noise {
			t.Errorf("c %d: noise %q, want %q", b.Concurrency, b.Noise, noise)
		}
		if b.Baseline == nil || !b.Baseline.Point.Baseline {
			t.Errorf("c %d: no baseline", b.Concurrency)
		}
	}
	// One repeat: the noise is not measured.
	for _, b := range report.BestPerLevel(load(t, st, "rep-b")) {
		if b.Noise != report.NoiseUnknown {
			t.Errorf("rep-b c %d: noise %q with one repeat", b.Concurrency, b.Noise)
		}
	}
}

func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-9*max(1, b, -b)
}

func writeReport(t *testing.T, st *store.DB, opt report.Options, ref string) []string {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	files, err := report.Write(load(t, st, ref), opt)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkTables finds the best table's figures, and every point's median at every level, as the
// renderer formats them (one decimal), in the document.
func checkTables(t *testing.T, doc string, levels map[string]*level, sep string) {
	t.Helper()
	for k, b := range bestFromDB(levels) {
		row := []string{fmt.Sprint(k[0]), fmt.Sprint(k[1]), b[0].label, fmt.Sprintf("%.1f [%.1f%s%.1f]", b[0].med, b[0].lo, sep, b[0].hi)}
		if !strings.Contains(doc, strings.Join(row, cellSep(doc))) {
			t.Errorf("best row %q not in the document", row)
		}
		if !strings.Contains(doc, fmt.Sprintf("+%.1f", 100*(b[0].med/b[1].med-1))) {
			t.Errorf("margin of c=%d not in the document", k[1])
		}
	}
	for _, l := range levels {
		v := fmt.Sprintf("%.1f", l.med)
		if l.hasSpUp {
			v += fmt.Sprintf(" (%.2f", l.speedup)
		}
		if !strings.Contains(doc, v) {
			t.Errorf("%s c=%d: %q not in the results table", l.label, l.c, v)
		}
	}
}

func cellSep(doc string) string {
	switch {
	case strings.Contains(doc, "<td"):
		return "" // checked per cell by the HTML test
	case strings.Contains(doc, `\toprule`):
		return " & "
	default:
		return " | "
	}
}

func parseXML(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	n := 0
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		n++
	}
	if n < 10 {
		t.Errorf("%s: only %d XML tokens", name, n)
	}
}

func TestHTMLReport(t *testing.T) {
	st, raw := recorded(t)
	files := writeReport(t, st, report.Options{Format: "html", Generator: "test"}, "rep-a")
	if len(files) != 1 || filepath.Base(files[0]) != "report.html" {
		t.Fatalf("files %v, want report.html alone", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	// Self-contained: nothing is fetched.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`).FindAllString(doc, -1); len(m) > 0 {
		t.Errorf("external references: %q", m)
	}
	for _, m := range regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(doc, -1) {
		if !strings.HasPrefix(m[1], "#") {
			t.Errorf("a link out of the document: %q", m[0])
		}
	}
	for _, bad := range []string{"<script", "<link", "@import", "url("} {
		if strings.Contains(strings.ToLower(doc), bad) {
			t.Errorf("HTML holds %q", bad)
		}
	}
	// Every inline SVG is well-formed XML; one per chart.
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(doc, -1)
	charts, err := report.Charts(load(t, st, "rep-a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(svgs) != len(charts) || len(charts) < 5 {
		t.Errorf("%d inline SVGs for %d charts (want >= 5: throughput, speedup, accept, pareto, ttft)", len(svgs), len(charts))
	}
	for i, s := range svgs {
		parseXML(t, fmt.Sprintf("svg %d", i), []byte(s))
	}
	// Tables: strip the markup and check the figures against the database.
	text := regexp.MustCompile(`</td><td[^>]*>`).ReplaceAllString(doc, " | ")
	text = regexp.MustCompile(`</?span[^>]*>`).ReplaceAllString(text, "")
	levels := levelsFromDB(t, raw, "rep-a")
	for k, bl := range bestFromDB(levels) {
		row := fmt.Sprintf("%d | %d | %s | %.1f [%.1f–%.1f]", k[0], k[1], bl[0].label, bl[0].med, bl[0].lo, bl[0].hi)
		if !strings.Contains(text, row) {
			t.Errorf("best row %q not in the HTML", row)
		}
	}
	checkTables(t, strings.ReplaceAll(text, " | ", ""), levels, "–")
	// Failures with their evidence lines, provenance.
	// The engine version the server reported (sglangsim reports its release profile).
	var engine string
	if err := raw.QueryRow(`SELECT json_extract(provenance, '$.engine_version') FROM point_summary
		WHERE sweep = 'rep-a' AND json_extract(provenance, '$.engine_version') <> '' LIMIT 1`).Scan(&engine); err != nil || engine == "" {
		t.Fatalf("no engine version recorded: %v", err)
	}
	for _, want := range []string{"<h2>Failures</h2>", "oom", "CUDA out of memory", "<br>", "spec hash", "engine version", engine, "Pareto front"} {
		if !strings.Contains(doc, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	var hash string
	if err := raw.QueryRow(`SELECT spec_hash FROM sweeps WHERE name = 'rep-a'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, hash) {
		t.Errorf("HTML lacks the spec hash %s", hash)
	}
	if n := strings.Count(doc, "CUDA out of memory"); n < 3 {
		t.Errorf("%d evidence lines of the 3 oom points", n)
	}
}

func TestMarkdownReport(t *testing.T) {
	st, raw := recorded(t)
	dir := t.TempDir()
	files := writeReport(t, st, report.Options{Format: "md", Dir: dir}, "rep-a")
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	imgs := regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`).FindAllStringSubmatch(doc, -1)
	if len(imgs) < 5 || len(imgs) != len(files)-1 {
		t.Fatalf("%d images, %d chart files", len(imgs), len(files)-1)
	}
	for _, m := range imgs {
		svg, err := os.ReadFile(filepath.Join(dir, m[1]))
		if err != nil {
			t.Fatalf("image %s: %v", m[1], err)
		}
		parseXML(t, m[1], svg)
		for _, want := range []string{"tok/s", "num_steps", "concurrency", "ms"} {
			_ = want // axis labels are checked on the whole set below
		}
	}
	all := ""
	for _, f := range files[1:] {
		b, _ := os.ReadFile(f)
		all += string(b)
	}
	for _, label := range []string{"output throughput (tok/s)", "speedup (× baseline output tok/s)", "mean accept length",
		"per-GPU throughput (output tok/s / tp)", "time to first token, p99 (ms)", "concurrency (concurrent requests)"} {
		if !strings.Contains(all, label) {
			t.Errorf("no chart has the axis label %q", label)
		}
	}
	levels := levelsFromDB(t, raw, "rep-a")
	checkTables(t, strings.ReplaceAll(doc, `\_`, "_"), levels, "–")
	if !strings.Contains(doc, "| oom s=1 k=1 n=2 |") || !strings.Contains(doc, "CUDA out of memory") {
		t.Errorf("markdown lacks the failures with evidence")
	}
}

func TestTeXReport(t *testing.T) {
	st, raw := recorded(t)
	dir := t.TempDir()
	files := writeReport(t, st, report.Options{Format: "tex", Dir: dir}, "rep-a")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{`\documentclass`, `\usepackage{booktabs}`, `\begin{document}`, `\toprule`, `\midrule`, `\bottomrule`, `\end{document}`} {
		if !strings.Contains(doc, want) {
			t.Errorf("tex lacks %s", want)
		}
	}
	incs := regexp.MustCompile(`\\includegraphics\[[^\]]*\]\{\\specsweepdir (charts/[^}]+\.pdf)\}`).FindAllStringSubmatch(doc, -1)
	if len(incs) < 5 || len(incs) != len(files)-1 {
		t.Fatalf("%d graphics, %d chart files", len(incs), len(files)-1)
	}
	for _, m := range incs {
		pdf, err := os.ReadFile(filepath.Join(dir, m[1]))
		if err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
			t.Errorf("%s: not a PDF (%v)", m[1], err)
		}
	}
	levels := levelsFromDB(t, raw, "rep-a")
	plain := regexp.MustCompile(`\{\\scriptsize (\[[^\]]*\])\}`).ReplaceAllString(doc, "$1")
	checkTables(t, strings.ReplaceAll(plain, `\_`, "_"), levels, "--")

	frag := writeReport(t, st, report.Options{Format: "tex", Dir: dir, Fragment: true}, "rep-a")
	fb, err := os.ReadFile(frag[0])
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(frag[0]) != "report-fragment.tex" || strings.Contains(string(fb), `\documentclass`) || strings.Contains(string(fb), `\begin{document}`) {
		t.Errorf("%s is not a fragment", frag[0])
	}
	// The paper that \input's the fragment from another directory.
	paper := filepath.Join(t.TempDir(), "paper.tex")
	if err := os.WriteFile(paper, []byte(`\documentclass{article}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\usepackage{longtable}
\newcommand{\specsweepdir}{`+dir+`/}
\begin{document}
\section{Results}
\input{`+frag[0]+`}
\end{document}
`), 0o644); err != nil {
		t.Fatal(err)
	}

	pdflatex, err := exec.LookPath("pdflatex")
	if err != nil {
		t.Skip("pdflatex is not installed: the LaTeX structure is checked, compiling is skipped (apt-get install texlive-latex-base texlive-latex-recommended texlive-latex-extra)")
	}
	for _, f := range []string{files[0], paper} {
		cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", filepath.Base(f))
		cmd.Dir = filepath.Dir(f)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pdflatex %s: %v\n%s", f, err, tail(out, 40))
		}
		pdf := strings.TrimSuffix(f, ".tex") + ".pdf"
		if st, err := os.Stat(pdf); err != nil || st.Size() < 10000 {
			t.Errorf("%s: %v", pdf, err)
		}
		if bytes.Contains(out, []byte("LaTeX Warning: File")) || bytes.Contains(out, []byte("not found")) {
			t.Errorf("pdflatex %s: a file was not found:\n%s", f, tail(out, 40))
		}
	}
}

func tail(b []byte, n int) string {
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestCompare(t *testing.T) {
	st, raw := recorded(t)
	a, b := load(t, st, "rep-a"), load(t, st, "rep-b")
	cmp := report.Compare(a, b)
	la, lb := levelsFromDB(t, raw, "rep-a"), levelsFromDB(t, raw, "rep-b")
	// Matching configurations: the baseline and eagle3 steps 2, at each of the 3 levels.
	byLabel := func(ls map[string]*level) map[string]*level {
		m := map[string]*level{}
		for _, l := range ls {
			m[fmt.Sprintf("%s@%d", l.label, l.c)] = l
		}
		return m
	}
	ma, mb := byLabel(la), byLabel(lb)
	var want []string
	for k := range ma {
		if mb[k] != nil {
			want = append(want, k)
		}
	}
	if len(want) != 6 || len(cmp.Matched) != 6 {
		t.Fatalf("matched %d pairs, the database has %d (%v)", len(cmp.Matched), len(want), want)
	}
	for _, p := range cmp.Matched {
		k := fmt.Sprintf("%s@%d", p.Config.Label(), p.Concurrency)
		if r := mb[k].med / ma[k].med; !near(p.Ratio(), r) {
			t.Errorf("%s: ratio %.4f, want %.4f", k, p.Ratio(), r)
		}
	}
	if len(cmp.Bests) != 3 {
		t.Fatalf("%d best pairs, want 3", len(cmp.Bests))
	}
	ba, bb := bestFromDB(la), bestFromDB(lb)
	for _, p := range cmp.Bests {
		k := [2]int{p.TP, p.Concurrency}
		if r := bb[k][0].med / ba[k][0].med; !near(p.Ratio(), r) {
			t.Errorf("best at c=%d: ratio %.4f, want %.4f", p.Concurrency, p.Ratio(), r)
		}
	}
	// The rendered comparison, in every format.
	for _, f := range report.Formats {
		dir := t.TempDir()
		files, err := report.Write(a, report.Options{Format: f, Dir: dir, Compare: b})
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := os.ReadFile(files[0])
		for _, p := range cmp.Matched {
			if !bytes.Contains(doc, []byte(fmt.Sprintf("%.3f", p.Ratio()))) {
				t.Errorf("%s: ratio %.3f of %s c=%d missing", f, p.Ratio(), p.Config.Label(), p.Concurrency)
			}
		}
		if !bytes.Contains(doc, []byte("rep-b")) {
			t.Errorf("%s: the compared sweep is not named", f)
		}
		if !bytes.Contains(doc, []byte("compare-best-tp4")) {
			t.Errorf("%s: no comparison chart", f)
		}
	}
}

func TestExportJSONL(t *testing.T) {
	st, raw := recorded(t)
	s, err := st.FindSweep(context.Background(), "rep-a")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := report.ExportJSONL(context.Background(), st, s.ID, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var want int
	if err := raw.QueryRow(`SELECT count(*) FROM run_summary WHERE sweep = 'rep-a' AND status = 'ok'`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if n != want || want != 4*3*2 {
		t.Fatalf("%d lines, the database has %d ok runs (want 24)", n, want)
	}
	fields := report.ExportFields()
	if !slices.Equal(fields[:len(workload.BenchServingFields)], workload.BenchServingFields) {
		t.Errorf("export fields %v do not start with bench_serving's %v", fields, workload.BenchServingFields)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		// Key order as documented.
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.Token()
		for i := 0; d.More(); i++ {
			k, _ := d.Token()
			if k != fields[i] {
				t.Fatalf("line %d: key %d is %v, want %s", lines, i, k, fields[i])
			}
			var skip any
			d.Decode(&skip)
		}
		var tok float64
		var completed int
		if err := raw.QueryRow(`SELECT output_tok_s, completed FROM run_summary WHERE point_id = ? AND concurrency = ? AND repeat = ? AND status = 'ok'`,
			m["point_id"], m["max_concurrency"], m["repeat"]).Scan(&tok, &completed); err != nil {
			t.Fatal(err)
		}
		if m["output_throughput"] != tok || m["completed"] != float64(completed) {
			t.Errorf("line %d: output_throughput %v completed %v, database %v %d", lines, m["output_throughput"], m["completed"], tok, completed)
		}
		if m["method"] == "baseline" && (m["num_steps"] != nil || m["accept_length"] != nil) {
			t.Errorf("line %d: baseline with num_steps or accept length: %v", lines, m)
		}
	}
}

// TestNoiseAndPareto: the verdicts on hand-made figures.
func TestNoiseAndPareto(t *testing.T) {
	mk := func(steps int, c int, vals ...float64) *report.Point {
		p := &report.Point{ID: fmt.Sprint(steps), Config: report.Config{Method: "m", NumSteps: steps, TopK: 1, NumDraftTokens: steps + 1, TP: 2}, Cells: map[int]*report.Cell{}}
		sort.Float64s(vals)
		p.Cells[c] = &report.Cell{Point: p, Concurrency: c,
			TokS:    report.Stat{N: len(vals), Median: vals[len(vals)/2], Min: vals[0], Max: vals[len(vals)-1]},
			TPOTP50: report.Stat{N: 1, Median: 1000 / (vals[0] / float64(c))}}
		return p
	}
	s := &report.Sweep{TPs: []int{2}, Levels: []int{1}, Points: []*report.Point{mk(1, 1, 100, 110, 105), mk(2, 1, 104, 120, 108)}}
	b := report.BestPerLevel(s)
	if len(b) != 1 || b[0].Best.Point.NumSteps != 2 || b[0].Noise != report.NoiseWithin {
		t.Errorf("overlapping repeats: %+v", b)
	}
	if b[0].Plateau.Point.NumSteps != 1 {
		t.Errorf("steps 1 overlaps the best's range: plateau from steps %d", b[0].Plateau.Point.NumSteps)
	}
	s.Points[1] = mk(2, 1, 111, 120, 115)
	if b := report.BestPerLevel(s); b[0].Noise != report.NoiseClear || !near(b[0].MarginPct, 100*(115.0/105-1)) || b[0].Plateau != b[0].Best {
		t.Errorf("separated repeats: %+v", b[0])
	}
	// Pareto: the point slower for users and per GPU is off the front.
	s = &report.Sweep{TPs: []int{2}, Levels: []int{1, 8}}
	p1, p2, p3 := mk(1, 1, 100), mk(2, 8, 400), mk(3, 8, 300)
	s.Points = []*report.Point{p1, p2, p3}
	front := report.Front(report.Pareto(s))
	if len(front) != 2 || front[0].Cell.Point != p1 || front[1].Cell.Point != p2 {
		t.Errorf("front %+v", front)
	}
}
