package report

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Formats are the report formats.
var Formats = []string{"html", "md", "tex"}

// Options shape a report.
type Options struct {
	// Format is "html", "md" or "tex".
	Format string
	// Dir is the output directory (created if needed).
	Dir string
	// Compare, when set, adds a comparison of this sweep against the report's sweep.
	Compare *Sweep
	// Fragment (tex only) writes a fragment to \input into a paper instead of a whole document.
	Fragment bool
	// Generator names the program that wrote the report (e.g. "specsweep v1.2").
	Generator string
	// Now is the report's date (default time.Now).
	Now time.Time
}

// Table is one table of a report, in plain text cells (each renderer escapes them). A cell may
// hold several lines separated by "\n". Its JSON (a Live's) leaves out what only LaTeX uses.
type Table struct {
	Title string     `json:"title"`
	Note  string     `json:"note"`
	Head  []string   `json:"head"`
	Rows  [][]string `json:"rows"`
	// Num marks right-aligned (numeric) columns; Code marks columns shown in a monospace font.
	Num  []bool `json:"num"`
	Code []bool `json:"code"`
	// Wide tables are scaled to the text width in LaTeX.
	Wide bool `json:"-"`
	// Para gives a column a paragraph width in LaTeX ("9cm": long text wraps); "" for none.
	Para []string `json:"-"`
}

// doc is everything a renderer shows, computed once.
type doc struct {
	Title      string
	Measured   [][2]string // what was measured (the header), key and value
	Summary    []string    // sentences
	Check      Table       // the output check; no rows unless some point mismatches
	Diverge    []divergence
	Best       Table
	Sources    []Table // each prompt source's answer and the acceptance matrices; none with one source
	Charts     []*Chart
	Pareto     Table
	Results    Table
	Pruned     Table // no rows unless a search pruned points
	Phases     Table // no rows unless the workload has phases
	Adaptive   Table // adaptive servers against fixed configurations, per phase (verify.go)
	Failures   Table
	Provenance Table
	ProvFacts  [][2]string // key, value
	Compare    []Table
	Generated  string
}

// Write renders the report of s into opt.Dir and returns the files written (the main file first).
func Write(s *Sweep, opt Options) ([]string, error) {
	d, err := prepare(s, &opt)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	switch opt.Format {
	case "html":
		b, err := renderHTML(d)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(opt.Dir, "report.html")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return nil, err
		}
		return []string{f}, nil
	case "md":
		return writeMD(d, opt)
	case "tex":
		return writeTeX(d, opt)
	default:
		return nil, fmt.Errorf("report: unknown format %q (want one of %s)", opt.Format, strings.Join(Formats, ", "))
	}
}

// prepare checks opt (setting its default date) and computes everything a renderer shows: the
// charts and the document. Write and HTML share it, so both render the same report.
func prepare(s *Sweep, opt *Options) (*doc, error) {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	if opt.Fragment && opt.Format != "tex" {
		return nil, fmt.Errorf("report: --fragment applies to the tex format only")
	}
	charts, err := Charts(s)
	if err != nil {
		return nil, err
	}
	if opt.Compare != nil {
		cc, err := CompareCharts(Compare(s, opt.Compare))
		if err != nil {
			return nil, err
		}
		charts = append(charts, cc...)
	}
	return build(s, *opt, charts), nil
}

func writeCharts(d *doc, dir, format string) ([]string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, c := range d.Charts {
		b, err := c.Render(format)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(dir, chartPath(c, format))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func chartPath(c *Chart, format string) string { return "charts/" + c.Name + "." + format }

const dash = "–"

func fmtTok(s Stat) string { return fmtStat(s, 1, dash) }

func fmtX(s Stat) string {
	if !s.OK() {
		return "-"
	}
	m := fmt.Sprintf("%.2f×", s.Median)
	if s.N > 1 {
		m += fmt.Sprintf(" [%.2f%s%.2f]", s.Min, dash, s.Max)
	}
	return m
}

func optInt(v int, baseline bool) string {
	if baseline {
		return "-"
	}
	return fmt.Sprint(v)
}

// ranAs is a requested speculative parameter, followed by what the server reports it ran when that
// differs.
func ranAs(req int, eff *int, baseline bool) string {
	s := optInt(req, baseline)
	if eff != nil && !baseline && *eff != req {
		s += fmt.Sprintf(" (ran %d)", *eff)
	}
	return s
}

func fmtDate(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func build(s *Sweep, opt Options, charts []*Chart) *doc {
	l := liveTables(s)
	d := &doc{Title: fmt.Sprintf("Sweep %s (#%d)", s.Name, s.ID), Charts: charts,
		Summary: l.Summary, Check: l.Check, Best: l.Best, Results: l.Results, Pruned: l.Pruned, Failures: l.Failures}
	if len(l.Sources.Rows) > 0 {
		d.Sources = append([]Table{l.Sources}, l.Accept...)
	}
	d.Measured = measured(s)
	d.Diverge = divergences(s)
	d.Pareto = paretoTable(s)
	d.Phases = phasesTable(s)
	d.Adaptive = adaptiveTable(s)
	d.Provenance, d.ProvFacts = provenance(s, opt)
	if opt.Compare != nil {
		d.Compare = compareTables(Compare(s, opt.Compare))
	}
	d.Generated = fmt.Sprintf("Generated %s", fmtDate(opt.Now))
	if opt.Generator != "" {
		d.Generated += " by " + opt.Generator
	}
	return d
}

// Live is what a live view of a sweep shows: the sentences the report prints at its top and the
// report's tables of the sweep's points, as the report builds them (build takes them from the same
// liveTables), so a dashboard and the report never disagree on a figure. Every table has its head
// and title even without rows; Rows is [] (never null in JSON), Num and Code hold one entry per
// column of Head, and Wide and Para (LaTeX's) are left out.
type Live struct {
	SweepID int64  `json:"sweep_id"`
	Sweep   string `json:"sweep"` // the sweep's name
	State   string `json:"state"` // the sweep's state
	// Summary holds the report's summary sentences, in its order: the state and counts, the
	// search's (a searched sweep), the output check's and the packed points' (when there are any),
	// one per best at the edge of the swept range (with what to sweep next), the prompt sources',
	// the recommendation's (the one configuration for equal time at each level, how to deploy
	// it, the next sweep when it is at the edge), and how the figures are aggregated.
	Summary []string `json:"summary"`
	// Check is the output check's table: no rows unless some point's check failed (a mismatch);
	// when every checked point passed, one sentence of Summary says so.
	Check Table `json:"check"`
	// Best is "Best configuration per concurrency level".
	Best Table `json:"best"`
	// Sources is "Best configuration per prompt source" (no rows unless the sweep measured on
	// several prompt sources or a named set), and Accept the acceptance matrices (none then).
	Sources Table   `json:"sources"`
	Accept  []Table `json:"accept"`
	// Results is "All results": one row per point that was not pruned, run or not.
	Results Table `json:"results"`
	// Pruned is "Pruned by the search" (no rows unless a search pruned points).
	Pruned Table `json:"pruned"`
	// Failures lists the failed points with their evidence.
	Failures Table `json:"failures"`
	// Recommendation is the one configuration for equal time at each measured level (what
	// `specsweep recommend SWEEP` prints; its none says why there is none yet). Summary says it
	// in sentences.
	Recommendation RecommendationJSON `json:"recommendation"`
}

// LiveTables computes the report's summary and tables of s (see Live), without charts or I/O
// (Load reads the sweep). A sweep that has recorded nothing yet
// gives tables without rows (All results lists its points, with "-" for every level), and a nil
// s is taken as an empty sweep.
func LiveTables(s *Sweep) Live {
	if s == nil {
		s = &Sweep{}
	}
	l := liveTables(s)
	for _, t := range []*Table{&l.Check, &l.Best, &l.Sources, &l.Results, &l.Pruned, &l.Failures} {
		*t = t.forJSON()
	}
	for i := range l.Accept {
		l.Accept[i] = l.Accept[i].forJSON()
	}
	if l.Accept == nil {
		l.Accept = []Table{}
	}
	if l.Summary == nil {
		l.Summary = []string{}
	}
	return l
}

// liveTables is the one place the summary and the points' tables are built, for the report
// (build) and for LiveTables.
func liveTables(s *Sweep) Live {
	words, rec := liveRecommendation(s)
	return Live{SweepID: s.ID, Sweep: s.Name, State: s.State, Summary: summaryWith(s, words),
		Check: checkTable(s), Best: bestTable(s), Sources: sourcesTable(s), Accept: acceptTables(s),
		Results: resultsTable(s), Pruned: prunedTable(s), Failures: failuresTable(s), Recommendation: rec}
}

// forJSON is t with its slices non-nil and Num and Code one entry per column, so a client reads
// "rows": [] and num[i] without checking for null (the renderers read them with at, alike), and
// without what only LaTeX uses (Wide, Para: not sent), so a Live reads back from its JSON equal.
func (t Table) forJSON() Table {
	t.Wide, t.Para = false, nil
	pad := func(v []bool) []bool {
		out := make([]bool, max(len(t.Head), len(v)))
		copy(out, v)
		return out
	}
	t.Num, t.Code = pad(t.Num), pad(t.Code)
	if t.Head == nil {
		t.Head = []string{}
	}
	if t.Rows == nil {
		t.Rows = [][]string{}
	}
	return t
}

// summary is the report's sentences at its top.
func summary(s *Sweep) []string {
	words, _ := liveRecommendation(s)
	return summaryWith(s, words)
}

// summaryWith is the summary with recommend, the recommendation's sentences (liveTables computes
// the recommendation once for them and for Live).
func summaryWith(s *Sweep, recommend []string) []string {
	done, failed, pruned, waiting := 0, 0, 0, 0
	for _, p := range s.Points {
		switch p.State {
		case "done":
			done++
		case "failed":
			failed++
		case "pruned":
			pruned++
		case "waiting":
			waiting++
		}
	}
	levels := make([]string, len(s.Levels))
	for i, c := range s.Levels {
		levels[i] = fmt.Sprint(c)
	}
	counts := fmt.Sprintf("%d points, %d done, %d failed", len(s.Points), done, failed)
	if waiting > 0 {
		counts += fmt.Sprintf(", %d waiting for the search", waiting)
	}
	if pruned > 0 {
		counts += fmt.Sprintf(", %d pruned by the search", pruned)
	}
	var out []string
	out = append(out,
		fmt.Sprintf("State %s: %s; concurrency levels %s; %d repeat(s) per level.",
			s.State, counts, strings.Join(levels, ", "), max(1, s.Repeats)))
	if s.Searched() {
		out = append(out,
			"A search decided while the sweep ran which of the planned points run; the ones it did not run are listed with its reason under \"Pruned by the search\", and a search-path chart per method, tp and tree shape shows where it went.")
	}
	if c := checkSummary(s); c != "" {
		out = append(out, c)
	}
	if c := packedSummary(s); c != "" {
		out = append(out, c)
	}
	out = append(out, edgeSummary(s, BestPerLevel(s))...)
	out = append(out, sourcesSummary(s)...)
	out = append(out, recommend...)
	return append(out,
		fmt.Sprintf("Figures are medians over the repeats of each level%s; speedup is output tok/s over the first baseline point at the same tp, concurrency and repeat.",
			map[bool]string{true: " with [min" + dash + "max] ranges", false: ""}[s.Repeats > 1]))
}

func bestTable(s *Sweep) Table {
	t := Table{Title: "Best configuration per concurrency level",
		Head: []string{"tp", "concurrency", "best", "output tok/s", "speedup", "runner-up", "runner-up tok/s", "margin", "noise", "plateau"},
		Num:  []bool{true, true, false, true, true, false, true, true, false, false}, Wide: true}
	bests := BestPerLevel(s)
	edges := make([][]edge, len(bests))
	anyEdge := false
	for i, b := range bests {
		edges[i] = edgesOf(s, b)
		anyEdge = anyEdge || len(edges[i]) > 0
	}
	if anyEdge {
		t.Head = append(t.Head, "edge of the swept range")
		t.Num = append(t.Num, false)
	}
	for i, b := range bests {
		row := []string{fmt.Sprint(b.TP), fmt.Sprint(b.Concurrency), b.Best.Point.Label(), fmtTok(b.Best.TokS), fmtX(b.Best.Speedup), "-", "-", "-", string(b.Noise), "-"}
		if b.Plateau != nil {
			row[9] = fmt.Sprintf("s=%d", b.Plateau.Point.NumSteps)
			if b.Plateau != b.Best {
				row[9] += fmt.Sprintf(" (%.1f%%)", 100*(b.Plateau.TokS.Median/b.Best.TokS.Median-1))
			} else {
				row[9] += " (best)"
			}
		}
		if b.RunnerUp != nil {
			row[5], row[6], row[7] = b.RunnerUp.Point.Label(), fmtTok(b.RunnerUp.TokS), fmt.Sprintf("+%.1f%%", b.MarginPct)
		}
		if anyEdge {
			var cell []string
			for _, e := range edges[i] {
				cell = append(cell, e.short())
			}
			if len(cell) == 0 {
				cell = []string{"-"}
			}
			row = append(row, strings.Join(cell, "\n"))
		}
		t.Rows = append(t.Rows, row)
	}
	if s.Repeats > 1 {
		t.Note = "noise: \"within noise\" when the best's slowest repeat is not faster than the runner-up's fastest (the ranges overlap), \"clear\" otherwise. " +
			"plateau: the fewest num_steps (same method and tree shape) whose repeats reach the best's range; more steps than that gain nothing measurable."
	} else {
		t.Note = "One repeat per level: the run-to-run noise is not measured (set workload.repeats to 2 or more to flag margins inside it). " +
			"plateau: the fewest num_steps (same method and tree shape) within 2% of the best."
	}
	if anyEdge {
		t.Note += " edge of the swept range: the best's num_steps, topk or draft tokens is the largest (or smallest) value the sweep planned for its method and tp, and at least two values were measured at that level: the optimum may lie outside the range; sweep the range suggested next."
	}
	t.Note += mismatchNote(s, "They are left out of the ranking: a point that does not answer as the baseline does is never the best, runner-up or plateau.")
	return t
}

// mismatchNote is a table note's sentence on the measured points whose output check failed; ""
// when there are none.
func mismatchNote(s *Sweep, what string) string {
	var labels []string
	for _, p := range s.Mismatches() {
		if len(p.Cells) > 0 {
			labels = append(labels, fmt.Sprintf("%s tp=%d", p.Label(), p.TP))
		}
	}
	if len(labels) == 0 {
		return ""
	}
	return fmt.Sprintf(" Output check: %d measured point(s) mismatch (%s). %s", len(labels), strings.Join(labels, ", "), what)
}

func paretoTable(s *Sweep) Table {
	t := Table{Title: "Pareto front: per-user vs per-GPU throughput",
		Note: "Configurations no other one beats on both per-user speed (1000 / median TPOT) and per-GPU output tok/s, from the most interactive to the highest throughput.",
		Head: []string{"configuration", "tp", "concurrency", "per-user tok/s", "per-GPU tok/s", "output tok/s"},
		Num:  []bool{false, true, true, true, true, true}}
	front := Front(Pareto(s))
	sort.SliceStable(front, func(i, j int) bool { return front[i].PerUser > front[j].PerUser })
	for _, f := range front {
		t.Rows = append(t.Rows, []string{f.Cell.Point.Label(), fmt.Sprint(f.Cell.Point.TP), fmt.Sprint(f.Cell.Concurrency),
			fmt.Sprintf("%.1f", f.PerUser), fmt.Sprintf("%.1f", f.PerGPU), fmtTok(f.Cell.TokS)})
	}
	t.Note += mismatchNote(s, "They are left out of the front and do not push other configurations off it.")
	return t
}

func resultsTable(s *Sweep) Table {
	t := Table{Title: "All results", Note: "Median output tok/s at each concurrency level, with the speedup over the baseline in parentheses; accept length is the median over levels. " +
		"\"4 (ran 5)\": the server reports it ran another value than the one requested (SGLang forces or chooses some).",
		Head: []string{"method", "steps", "topk", "draft", "tp"}, Num: []bool{false, true, true, true, true}, Wide: true}
	for _, c := range s.Levels {
		t.Head = append(t.Head, fmt.Sprintf("c=%d tok/s", c))
		t.Num = append(t.Num, true)
	}
	t.Head = append(t.Head, "accept", "state")
	t.Num = append(t.Num, true, false)
	checked := s.Checked()
	if checked {
		t.Head = append(t.Head, "output check")
		t.Num = append(t.Num, false)
		t.Note += " output check: the result and agreement of the lossless check against the reference of its tp (see \"Output check\"); MISMATCH: the point does not answer as the baseline does."
	}
	packed := len(s.PackedPoints()) > 0
	if packed {
		t.Head = append(t.Head, "packed")
		t.Num = append(t.Num, false)
		t.Note += " packed: the point ran on a packed host (pack: true) on its own GPUs, beside that many other points at some moment of its run (their load may have touched its figures); - : not packed."
	}
	if s.Precision != nil {
		t.Note += " ±: the half-width of the level's confidence interval of output tok/s (" + s.Precision.Words(s.MaxRequests) +
			"); * marks a level that ran to the cap before reaching the target."
	}
	if len(s.Pruned()) > 0 {
		t.Note += " Points the search pruned ran nothing: they are listed under \"Pruned by the search\"."
	}
	for _, p := range s.Points {
		if p.State == "pruned" {
			continue
		}
		row := []string{p.Method, ranAs(p.NumSteps, p.Effective[0], p.Baseline), ranAs(p.TopK, p.Effective[1], p.Baseline),
			ranAs(p.NumDraftTokens, p.Effective[2], p.Baseline), fmt.Sprint(p.TP)}
		for _, c := range s.Levels {
			cell := p.Cells[c]
			if cell == nil {
				row = append(row, "-")
				continue
			}
			v := fmt.Sprintf("%.1f", cell.TokS.Median)
			if s.Precision != nil {
				v += " " + IntervalWords(cell)
			}
			if cell.Speedup.OK() {
				v += fmt.Sprintf(" (%.2f×)", cell.Speedup.Median)
			}
			row = append(row, v)
		}
		if acc := p.Accept(); acc.OK() {
			row = append(row, fmt.Sprintf("%.2f", acc.Median))
		} else {
			row = append(row, "-")
		}
		row = append(row, p.State)
		if checked {
			c := checkWord(p.OutputCheck)
			if p.OutputCheck == "" {
				c = "-"
			} else if p.OutputAgreement != nil {
				c += " " + fmtAgreement(p.OutputAgreement)
			}
			row = append(row, c)
		}
		if packed {
			m := p.BesideMark()
			if m == "" {
				m = "-"
			}
			row = append(row, m)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// packedSummary is the summary's sentence on the points that ran packed; "" when none did.
func packedSummary(s *Sweep) string {
	pp := s.PackedPoints()
	if len(pp) == 0 {
		return ""
	}
	beside := 0
	for _, p := range pp {
		if p.Beside > 0 {
			beside++
		}
	}
	return fmt.Sprintf("%d of %d point(s) ran packed (several points at once on disjoint GPUs of one host), %d of them beside other points; the packed column of All results says beside how many.",
		len(pp), len(s.Points), beside)
}

// prunedTable lists the points the search decided need not run, with its reason.
func prunedTable(s *Sweep) Table {
	t := Table{Title: "Pruned by the search", Head: []string{"point", "configuration", "tp", "reason"},
		Note: "The search (spec search:) decided while the sweep ran that these planned points need not run; each reason says why (what the measured points predicted for it, the climb stopping, the budget).",
		Code: []bool{true}, Num: []bool{false, false, true}, Para: []string{"", "", "", "9cm"}, Wide: true}
	for _, p := range s.Pruned() {
		why := p.Reason
		if why == "" {
			why = "-"
		}
		t.Rows = append(t.Rows, []string{p.ID, p.Label(), fmt.Sprint(p.TP), why})
	}
	return t
}

func failuresTable(s *Sweep) Table {
	t := Table{Title: "Failures", Head: []string{"point", "configuration", "tp", "class", "cause", "evidence"},
		Code: []bool{true, false, false, false, false, true}, Num: []bool{false, false, true, false, false, false}, Wide: true}
	for _, p := range s.Failures() {
		cause, ev := p.Evidence()
		t.Rows = append(t.Rows, []string{p.ID, p.Label(), fmt.Sprint(p.TP), p.FailureClass, cause, strings.Join(ev, "\n")})
	}
	return t
}

func provenance(s *Sweep, opt Options) (Table, [][2]string) {
	t := Table{Title: "Hosts", Head: []string{"host", "driver", "address", "GPUs (spec)", "hostname", "kernel", "GPU model", "GPU driver", "engine version"},
		Num: []bool{false, false, false, true, false, false, false, false, false}, Wide: true}
	engines := map[string]bool{}
	for _, h := range s.Hosts {
		hostname, kernel, gpu, gdrv, eng := "-", "-", "-", "-", "-"
		// The provenance of the host's latest point that recorded one.
		if g := hostGPUs(s, h.Name); g.found {
			hostname, kernel, eng = strOr(g.hostname), strOr(g.kernel), strOr(g.engine)
			if g.models != "" {
				gpu, gdrv = g.models, g.drivers
			} else if g.driver == "local" {
				gpu = "(local driver: none probed)"
			}
		}
		if eng != "-" {
			engines[eng] = true
		}
		addr := h.Address
		if addr == "" {
			addr = "-"
		}
		t.Rows = append(t.Rows, []string{h.Name, h.Driver, addr, fmt.Sprint(h.GPUs), hostname, kernel, gpu, gdrv, eng})
	}
	var ev []string
	for e := range engines {
		ev = append(ev, e)
	}
	sort.Strings(ev)
	if len(ev) == 0 {
		ev = []string{"-"}
	}
	facts := [][2]string{
		{"sweep", fmt.Sprintf("%s (id %d), state %s", s.Name, s.ID, s.State)},
		{"spec hash", s.SpecHash},
		{"engine version", strings.Join(ev, ", ")},
		{"created", fmtDate(s.Created)},
		{"started", fmtDate(s.Started)},
		{"finished", fmtDate(s.Finished)},
		{"report", fmtDate(opt.Now) + map[bool]string{true: " by " + opt.Generator, false: ""}[opt.Generator != ""]},
	}
	if opt.Compare != nil {
		c := opt.Compare
		facts = append(facts, [2]string{"compared with", fmt.Sprintf("%s (id %d), spec hash %s, finished %s", c.Name, c.ID, c.SpecHash, fmtDate(c.Finished))})
	}
	return t, facts
}

func strOr(v any) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return "-"
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func compareTables(c *Comparison) []Table {
	a := fmt.Sprintf("%s #%d", c.A.Name, c.A.ID)
	b := fmt.Sprintf("%s #%d", c.B.Name, c.B.ID)
	best := Table{Title: "Comparison: best configuration of each sweep",
		Note: fmt.Sprintf("A = %s, B = %s; ratio = B's best median output tok/s over A's.", a, b),
		Head: []string{"tp", "concurrency", "A best", "A tok/s", "B best", "B tok/s", "ratio B/A"},
		Num:  []bool{true, true, false, true, false, true, true}, Wide: true}
	if c.A.Checked() || c.B.Checked() {
		best.Note += " A point whose output check failed is never a sweep's best."
	}
	for _, p := range c.Bests {
		best.Rows = append(best.Rows, []string{fmt.Sprint(p.TP), fmt.Sprint(p.Concurrency), p.A.Best.Point.Label(), fmtTok(p.A.Best.TokS),
			p.B.Best.Point.Label(), fmtTok(p.B.Best.TokS), fmt.Sprintf("%.3f", p.Ratio())})
	}
	m := Table{Title: "Comparison: matching points",
		Note: "Points of the same configuration (method, num_steps, topk, draft tokens, tp) measured at the same level in both sweeps; ratio = B / A of the median output tok/s.",
		Head: []string{"configuration", "tp", "concurrency", "A tok/s", "B tok/s", "ratio B/A"},
		Num:  []bool{false, true, true, true, true, true}}
	for _, p := range c.Matched {
		label := p.Config.Label()
		if a, b := p.A.Point.Mismatch(), p.B.Point.Mismatch(); a || b {
			label += map[[2]bool]string{{true, false}: " (output MISMATCH in A)", {false, true}: " (output MISMATCH in B)",
				{true, true}: " (output MISMATCH in A and B)"}[[2]bool{a, b}]
		}
		m.Rows = append(m.Rows, []string{label, fmt.Sprint(p.Config.TP), fmt.Sprint(p.Concurrency), fmtTok(p.A.TokS), fmtTok(p.B.TokS), fmt.Sprintf("%.3f", p.Ratio())})
	}
	return []Table{best, m}
}
