package report

import (
	"fmt"
	"html"
	"regexp"
	"strings"
)

const css = `
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",Arial,sans-serif;margin:0 auto;max-width:1260px;padding:20px 22px;color:#1d232b;line-height:1.45}
h1{font-size:1.7em;margin:0 0 .2em}h2{font-size:1.3em;margin:1.6em 0 .4em;border-bottom:1px solid #d8dde3;padding-bottom:.2em}
h3{font-size:1.05em;margin:1.2em 0 .3em}
p.lead{color:#4a5560;margin:.2em 0}
table{border-collapse:collapse;margin:.5em 0 .3em;font-size:.84em}
.scroll{overflow-x:auto}
.rng{font-size:.8em;color:#6a737d}
th,td{padding:4px 8px;border-bottom:1px solid #e3e7ec;vertical-align:top;text-align:left}
th{background:#f3f5f8;border-bottom:2px solid #c9d0d8;font-weight:600;white-space:nowrap}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums;white-space:nowrap}
td.c{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.92em;white-space:pre-wrap;word-break:break-all;max-width:560px}
tr:nth-child(even) td{background:#fafbfc}
.note{color:#5a6570;font-size:.85em;margin:.1em 0 1em}
.noise-within{color:#a15c00;font-weight:600}.noise-clear{color:#1b7f3b}
.charts{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;flex:1 1 560px;max-width:610px;border:1px solid #e3e7ec;border-radius:6px;padding:10px 10px 6px;background:#fff}
figure svg.chart{width:100%;height:auto;display:block}
figcaption{font-size:.83em;color:#4a5560;margin-top:4px}
figcaption b{color:#1d232b}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:.9em}dt{font-weight:600}dd{margin:0;font-family:ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
dl.measured{margin:.3em 0 .6em}dl.measured dd{font-family:inherit;word-break:normal}dl.measured dd.sim{color:#a15c00;font-weight:600}
footer{margin-top:2em;color:#8a949e;font-size:.8em}
nav{font-size:.88em;margin:.6em 0 0}nav a{color:#2458a6;text-decoration:none}
.bad{color:#b00020;font-weight:700}p.lead.bad{font-weight:600}
table.sbs{table-layout:fixed;width:100%;max-width:1200px}table.sbs td{width:50%;white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.92em}
mark{background:#ffd9a8;color:#5a1d00;font-weight:700}em.end{color:#8a949e}
p.prompt{margin:.3em 0}
`

// HTML renders the HTML report of s in memory: exactly the bytes Write writes to report.html
// (one self-contained document, the charts inline as SVG), for a server to send without a file.
// opt.Dir is not used; opt.Format must be "" or "html".
func HTML(s *Sweep, opt Options) ([]byte, error) {
	if opt.Format != "" && opt.Format != "html" {
		return nil, fmt.Errorf("report: HTML renders the html format, not %q", opt.Format)
	}
	opt.Format = "html"
	d, err := prepare(s, &opt)
	if err != nil {
		return nil, err
	}
	return renderHTML(d)
}

// renderHTML is the one HTML renderer, of HTML and of Write's report.html.
func renderHTML(d *doc) ([]byte, error) {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style></head><body>\n", e(d.Title), css)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", e(d.Title))
	if len(d.Measured) > 0 {
		b.WriteString("<dl class=\"measured\">\n")
		for _, f := range d.Measured {
			class := ""
			if f[0] == "simulated" {
				class = ` class="sim"`
			}
			fmt.Fprintf(&b, "<dt>%s</dt><dd%s>%s</dd>\n", e(f[0]), class, e(f[1]))
		}
		b.WriteString("</dl>\n")
	}
	for _, s := range d.Summary {
		class := "lead"
		if strings.HasPrefix(s, "Output check FAILED") {
			class = "lead bad"
		}
		fmt.Fprintf(&b, "<p class=\"%s\">%s</p>\n", class, e(s))
	}
	// A table of contents: in-page links only.
	b.WriteString("<nav>")
	var nav []string
	if len(d.Check.Rows) > 0 {
		title := "Output check"
		if len(d.Diverge) > 0 {
			title += fmt.Sprintf(" (%d MISMATCH)", len(d.Diverge))
		}
		nav = append(nav, "check", title)
	}
	nav = append(nav, "best", "Best configuration", "charts", "Charts", "pareto", "Pareto front")
	if len(d.Compare) > 0 {
		nav = append(nav, "compare", "Comparison")
	}
	nav = append(nav, "results", "All results")
	if len(d.Pruned.Rows) > 0 {
		nav = append(nav, "pruned", fmt.Sprintf("Pruned by the search (%d)", len(d.Pruned.Rows)))
	}
	nav = append(nav, "failures", fmt.Sprintf("Failures (%d)", len(d.Failures.Rows)), "provenance", "Provenance")
	for i := 0; i < len(nav); i += 2 {
		if i > 0 {
			b.WriteString(" · ")
		}
		fmt.Fprintf(&b, "<a href=\"#%s\">%s</a>", nav[i], e(nav[i+1]))
	}
	b.WriteString("</nav>\n")
	if len(d.Check.Rows) > 0 {
		b.WriteString("<div id=\"check\"></div>\n")
		htmlTable(&b, d.Check, 2)
		htmlDivergences(&b, d.Diverge)
	}
	b.WriteString("<div id=\"best\"></div>\n")
	htmlTable(&b, d.Best, 2)
	for _, t := range d.Sources {
		htmlTable(&b, t, 2)
	}
	if len(d.Charts) > 0 {
		b.WriteString("<h2 id=\"charts\">Charts</h2>\n<div class=\"charts\">\n")
		for _, c := range d.Charts {
			svg, err := c.Render("svg")
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "<figure id=\"%s\">\n%s\n<figcaption><b>%s.</b> %s</figcaption></figure>\n",
				e(c.Name), svgForHTML(svg), e(c.Title), e(c.Answers))
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("<div id=\"pareto\"></div>\n")
	htmlTable(&b, d.Pareto, 2)
	if len(d.Compare) > 0 {
		b.WriteString("<div id=\"compare\"></div>\n")
	}
	for _, t := range d.Compare {
		htmlTable(&b, t, 2)
	}
	b.WriteString("<div id=\"results\"></div>\n")
	htmlTable(&b, d.Results, 2)
	if len(d.Phases.Rows) > 0 {
		htmlTable(&b, d.Phases, 2)
	}
	if len(d.Adaptive.Rows) > 0 {
		b.WriteString("<div id=\"adaptive\"></div>\n")
		htmlTable(&b, d.Adaptive, 2)
	}
	if len(d.Pruned.Rows) > 0 {
		b.WriteString("<div id=\"pruned\"></div>\n")
		htmlTable(&b, d.Pruned, 2)
	}
	b.WriteString("<div id=\"failures\"></div>\n")
	if len(d.Failures.Rows) > 0 {
		htmlTable(&b, d.Failures, 2)
	} else {
		b.WriteString("<h2>Failures</h2>\n<p>No point failed.</p>\n")
	}
	b.WriteString("<h2 id=\"provenance\">Provenance</h2>\n<dl>\n")
	for _, f := range d.ProvFacts {
		fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>\n", e(f[0]), e(f[1]))
	}
	b.WriteString("</dl>\n")
	htmlTable(&b, d.Provenance, 3)
	fmt.Fprintf(&b, "<footer>%s</footer>\n</body></html>\n", e(d.Generated))
	return []byte(b.String()), nil
}

func htmlTable(b *strings.Builder, t Table, level int) {
	e := html.EscapeString
	fmt.Fprintf(b, "<h%d>%s</h%d>\n", level, e(t.Title), level)
	if len(t.Rows) == 0 {
		b.WriteString("<p class=\"note\">Nothing to show.</p>\n")
		return
	}
	b.WriteString("<div class=\"scroll\"><table>\n<thead><tr>")
	for _, h := range t.Head {
		fmt.Fprintf(b, "<th>%s</th>", e(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for i, c := range r {
			class := ""
			switch {
			case at(t.Code, i):
				class = ` class="c"`
			case at(t.Num, i):
				class = ` class="n"`
			case strings.HasPrefix(c, checkMismatch):
				class = ` class="bad"`
			case c == string(NoiseWithin):
				class = ` class="noise-within"`
			case c == string(NoiseClear) && t.Head[i] == "noise":
				class = ` class="noise-clear"`
			}
			v := strings.ReplaceAll(e(c), "\n", "<br>")
			if at(t.Num, i) {
				v = rangeRE.ReplaceAllString(v, `<span class="rng">$1</span>`)
			}
			fmt.Fprintf(b, "<td%s>%s</td>", class, v)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table></div>\n")
	if t.Note != "" {
		fmt.Fprintf(b, "<p class=\"note\">%s</p>\n", e(t.Note))
	}
}

// htmlDivergences shows each mismatching point's divergent answer beside the reference's, the
// prompt above, each marked from the divergent word on.
func htmlDivergences(b *strings.Builder, ds []divergence) {
	e := html.EscapeString
	side := func(head, tail string) string {
		if tail == "" {
			return e(head) + `<em class="end">` + e(" "+endOfAnswer) + "</em>"
		}
		return e(head) + "<mark>" + e(tail) + "</mark>"
	}
	for _, d := range ds {
		fmt.Fprintf(b, "<h3 class=\"bad\">%s</h3>\n", e(d.Title))
		if d.Missing != "" {
			fmt.Fprintf(b, "<p>%s</p>\n", e(d.Missing))
			continue
		}
		if d.Prompt != "" {
			fmt.Fprintf(b, "<p class=\"prompt\"><b>%s</b></p>\n", e(d.Prompt))
		}
		fmt.Fprintf(b, "<table class=\"sbs\">\n<thead><tr><th>%s</th><th>%s</th></tr></thead>\n<tbody><tr><td>%s</td><td>%s</td></tr></tbody></table>\n",
			e(d.RefLabel), e(d.GotLabel), side(d.RefHead, d.RefTail), side(d.GotHead, d.GotTail))
	}
	if len(ds) > 0 {
		b.WriteString("<p class=\"note\">Highlighted: each answer from the first word where the two differ on.</p>\n")
	}
}

// rangeRE finds the [min–max] range after a median, shown smaller.
var rangeRE = regexp.MustCompile(`( \[[^\]]*\])$`)

func at(v []bool, i int) bool { return i < len(v) && v[i] }
