package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The packages a --fragment needs in the including paper's preamble.
const texPackages = `\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\usepackage{longtable}`

func writeTeX(d *doc, opt Options) ([]string, error) {
	charts, err := writeCharts(d, opt.Dir, "pdf")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if opt.Fragment {
		b.WriteString("% specsweep report fragment: \\input{} it into a paper whose preamble has\n")
		for _, l := range strings.Split(texPackages, "\n") {
			b.WriteString("%   " + l + "\n")
		}
		b.WriteString("% Chart paths are relative to \\specsweepdir: \\newcommand{\\specsweepdir}{path/to/report/} before the \\input.\n")
		b.WriteString("\\providecommand{\\specsweepdir}{}\n")
		fmt.Fprintf(&b, "\\section*{%s}\n", texEscape(d.Title))
	} else {
		b.WriteString("\\documentclass[10pt,a4paper]{article}\n\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n")
		b.WriteString("\\usepackage[margin=2cm]{geometry}\n" + texPackages + "\n")
		b.WriteString("\\providecommand{\\specsweepdir}{}\n")
		fmt.Fprintf(&b, "\\title{%s}\n\\author{specsweep}\n\\date{%s}\n\\begin{document}\n\\maketitle\n\n", texEscape(d.Title), texEscape(fmtDate(opt.Now)))
	}
	if len(d.Measured) > 0 {
		b.WriteString("\\begin{description}\n")
		for _, f := range d.Measured {
			v := texBreakable(f[1])
			if f[0] == "simulated" {
				v = "\\textbf{" + v + "}"
			}
			fmt.Fprintf(&b, "\\item[%s] %s\n", texEscape(f[0]), v)
		}
		b.WriteString("\\end{description}\n\n")
	}
	for _, s := range d.Summary {
		b.WriteString(texEscape(s) + "\n")
	}
	b.WriteString("\n")
	sec := "\\subsection"
	if !opt.Fragment {
		sec = "\\section"
	}
	if len(d.Check.Rows) > 0 {
		fmt.Fprintf(&b, "%s*{Output check}\n", sec)
		texTable(&b, d.Check, "outputcheck")
		texDivergences(&b, d.Diverge)
	}
	texTable(&b, d.Best, "best")
	for i, t := range d.Sources {
		texTable(&b, t, fmt.Sprintf("sources-%d", i))
	}
	for _, c := range d.Charts {
		fmt.Fprintf(&b, "\\begin{figure}[!htbp]\n\\centering\n\\includegraphics[width=0.85\\linewidth]{\\specsweepdir %s}\n\\caption{%s. %s}\n\\label{fig:%s}\n\\end{figure}\n\n",
			chartPath(c, "pdf"), texEscape(c.Title), texEscape(c.Answers), c.Name)
	}
	texTable(&b, d.Pareto, "pareto")
	for i, t := range d.Compare {
		texTable(&b, t, fmt.Sprintf("compare%d", i))
	}
	texTable(&b, d.Results, "results")
	if len(d.Phases.Rows) > 0 {
		texTable(&b, d.Phases, "phases")
	}
	if len(d.Adaptive.Rows) > 0 {
		texTable(&b, d.Adaptive, "adaptive")
	}
	if len(d.Pruned.Rows) > 0 {
		texTable(&b, d.Pruned, "pruned")
	}
	if len(d.Failures.Rows) > 0 {
		texTable(&b, d.Failures, "failures")
	}
	fmt.Fprintf(&b, "%s*{Provenance}\n\\begin{tabular}{>{\\bfseries}l l}\n\\toprule\n", sec)
	for _, f := range d.ProvFacts {
		fmt.Fprintf(&b, "%s & %s \\\\\n", texEscape(f[0]), texCode(f[1]))
	}
	b.WriteString("\\bottomrule\n\\end{tabular}\n\n")
	texTable(&b, d.Provenance, "hosts")
	if !opt.Fragment {
		b.WriteString("\\end{document}\n")
	}
	name := "report.tex"
	if opt.Fragment {
		name = "report-fragment.tex"
	}
	f := filepath.Join(opt.Dir, name)
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return append([]string{f}, charts...), nil
}

// texDivergences shows each mismatching point's divergent answer beside the reference's in a
// two-column tabular, the prompt above, each in bold from the divergent word on.
func texDivergences(b *strings.Builder, ds []divergence) {
	side := func(head, tail string) string {
		if tail == "" {
			return texLines(head) + ` \emph{` + texEscape(endOfAnswer) + `}`
		}
		if head == "" {
			return `{\bfseries ` + texLines(tail) + `}`
		}
		return texLines(head) + `{\bfseries ` + texLines(tail) + `}`
	}
	for _, d := range ds {
		fmt.Fprintf(b, "\\paragraph*{%s}\n", texEscape(d.Title))
		if d.Missing != "" {
			fmt.Fprintf(b, "%s\n\n", texEscape(d.Missing))
			continue
		}
		if d.Prompt != "" {
			fmt.Fprintf(b, "\\emph{%s}\n\n", texEscape(d.Prompt))
		}
		b.WriteString("\\noindent{\\footnotesize\\setlength{\\tabcolsep}{4pt}\n")
		b.WriteString("\\begin{tabular}{@{}>{\\raggedright\\arraybackslash}p{0.47\\linewidth}>{\\raggedright\\arraybackslash}p{0.47\\linewidth}@{}}\n\\toprule\n")
		fmt.Fprintf(b, "\\textbf{%s} & \\textbf{%s} \\\\\n\\midrule\n", texEscape(d.RefLabel), texEscape(d.GotLabel))
		// {} first: \midrule would take an answer's leading "[" for its optional width.
		fmt.Fprintf(b, "{}%s & {}%s \\\\\n\\bottomrule\n\\end{tabular}}\n\n", side(d.RefHead, d.RefTail), side(d.GotHead, d.GotTail))
	}
	if len(ds) > 0 {
		b.WriteString("In bold: each answer from the first word where the two differ on.\n\n")
	}
}

// texLines is texEscape of a text of several lines, the line breaks kept as \newline: blank lines
// collapse, and none comes first, where LaTeX has no line to end. A text that ends with a line
// break (the part before a divergent word) keeps it.
func texLines(s string) string {
	var b strings.Builder
	brk := false
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			brk = true
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		if brk && b.Len() > 0 {
			b.WriteString(`\newline `)
		}
		brk = false
		b.WriteString(texEscape(l))
	}
	if brk && b.Len() > 0 {
		b.WriteString(`\newline `)
	}
	return b.String()
}

// longRows is the most rows of a table float; longer tables become a longtable.
const longRows = 35

func texTable(b *strings.Builder, t Table, label string) {
	if len(t.Rows) == 0 {
		return
	}
	long := len(t.Rows) > longRows
	causeW, evW := "4cm", "9cm"
	if long {
		causeW, evW = "3cm", "7cm"
	}
	var spec strings.Builder
	for i := range t.Head {
		switch {
		case t.Title == "Failures" && i == 4:
			spec.WriteString(">{\\raggedright\\arraybackslash}p{" + causeW + "}")
		case t.Title == "Failures" && i == 5:
			spec.WriteString(">{\\raggedright\\arraybackslash\\footnotesize}p{" + evW + "}")
		case i < len(t.Para) && t.Para[i] != "":
			spec.WriteString(">{\\raggedright\\arraybackslash}p{" + t.Para[i] + "}")
		case at(t.Num, i):
			spec.WriteString("r")
		default:
			spec.WriteString("l")
		}
	}
	heads := make([]string, len(t.Head))
	for i, h := range t.Head {
		heads[i] = texEscape(h)
	}
	head := strings.Join(heads, " & ") + " \\\\\n"
	if long {
		// A longtable breaks across pages, its head repeated; a float cannot be taller than a page.
		b.WriteString("{\\footnotesize\\setlength{\\tabcolsep}{3pt}\n")
		fmt.Fprintf(b, "\\begin{longtable}{%s}\n\\caption{%s}\\label{tab:%s}\\\\\n\\toprule\n%s\\midrule\n\\endfirsthead\n", spec.String(), texEscape(t.Title), label, head)
		fmt.Fprintf(b, "\\multicolumn{%d}{l}{\\emph{%s (continued)}}\\\\\n\\toprule\n%s\\midrule\n\\endhead\n\\bottomrule\n\\endfoot\n", len(t.Head), texEscape(t.Title), head)
	} else {
		b.WriteString("\\begin{table}[!htbp]\n\\centering\n\\small\n\\setlength{\\tabcolsep}{4pt}\n")
		fmt.Fprintf(b, "\\caption{%s}\n\\label{tab:%s}\n", texEscape(t.Title), label)
		if t.Wide {
			// Shrink to the text width only when wider.
			b.WriteString("\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n")
		}
		fmt.Fprintf(b, "\\begin{tabular}{%s}\n\\toprule\n%s\\midrule\n", spec.String(), head)
	}
	for _, r := range t.Rows {
		cells := make([]string, len(r))
		for i, c := range r {
			lines := strings.Split(c, "\n")
			for j, l := range lines {
				switch {
				case at(t.Code, i):
					lines[j] = texCode(l)
				case at(t.Num, i):
					// The [min–max] range after a median, smaller.
					if k := strings.LastIndex(l, " ["); k > 0 && strings.HasSuffix(l, "]") {
						lines[j] = texEscape(l[:k]) + ` {\scriptsize ` + texEscape(l[k+1:]) + `}`
					} else {
						lines[j] = texEscape(l)
					}
				default:
					lines[j] = texEscape(l)
				}
			}
			cells[i] = strings.Join(lines, "\\newline ")
		}
		b.WriteString(strings.Join(cells, " & ") + " \\\\\n")
	}
	if long {
		b.WriteString("\\end{longtable}\n")
		if t.Note != "" {
			fmt.Fprintf(b, "%s\n", texEscape(t.Note))
		}
		b.WriteString("}\n\n")
		return
	}
	b.WriteString("\\bottomrule\n\\end{tabular}")
	if t.Wide {
		b.WriteString("}")
	}
	b.WriteString("\n")
	if t.Note != "" {
		fmt.Fprintf(b, "\\par\\smallskip\\footnotesize %s\n", texEscape(t.Note))
	}
	b.WriteString("\\end{table}\n\n")
}

// texEscape makes plain text safe in LaTeX: the special characters escaped, the few non-ASCII
// characters the report writes mapped, any other non-ASCII character replaced by "?".
func texEscape(s string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range s {
		if r == '-' && prev == '-' {
			b.WriteString("{}") // "--" is an en dash to LaTeX: an SGLang flag keeps its two hyphens
		}
		prev = r
		switch r {
		case '\\':
			b.WriteString(`\textbackslash{}`)
		case '{', '}', '$', '&', '%', '#', '_':
			b.WriteString(`\` + string(r))
		case '^':
			b.WriteString(`\textasciicircum{}`)
		case '~':
			b.WriteString(`\textasciitilde{}`)
		case '<':
			b.WriteString(`\textless{}`)
		case '>':
			b.WriteString(`\textgreater{}`)
		case '|':
			b.WriteString(`\textbar{}`)
		case '"':
			b.WriteString("''")
		case '–':
			b.WriteString("--")
		case '×':
			b.WriteString(`$\times$`)
		case '→':
			b.WriteString(`$\rightarrow$`)
		case '…':
			b.WriteString(`\ldots{}`)
		case '\t':
			b.WriteString(" ")
		default:
			if r < 0x20 {
				continue
			}
			if r > 0x7e {
				b.WriteString("?")
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// texBreakable is texEscape with a line break allowed after each "/" (a long path wraps).
func texBreakable(s string) string { return strings.ReplaceAll(texEscape(s), "/", `/\allowbreak{}`) }

// texCode is texEscape in a monospace font, breakable after punctuation.
func texCode(s string) string {
	e := texEscape(s)
	for _, p := range []string{"/", ",", "=", ":", "."} {
		e = strings.ReplaceAll(e, p, p+`\allowbreak{}`)
	}
	return `\texttt{` + e + `}`
}
