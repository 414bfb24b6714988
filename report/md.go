package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func writeMD(d *doc, opt Options) ([]string, error) {
	charts, err := writeCharts(d, opt.Dir, "svg")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", mdEscape(d.Title))
	for _, f := range d.Measured {
		v := mdEscape(f[1])
		if f[0] == "simulated" {
			v = "**" + v + "**"
		}
		fmt.Fprintf(&b, "- **%s**: %s\n", mdEscape(f[0]), v)
	}
	if len(d.Measured) > 0 {
		b.WriteString("\n")
	}
	for _, s := range d.Summary {
		b.WriteString(mdEscape(s) + "\n")
	}
	b.WriteString("\n")
	if len(d.Check.Rows) > 0 {
		mdTable(&b, d.Check)
		mdDivergences(&b, d.Diverge)
	}
	mdTable(&b, d.Best)
	for _, t := range d.Sources {
		mdTable(&b, t)
	}
	if len(d.Charts) > 0 {
		b.WriteString("## Charts\n\n")
		for _, c := range d.Charts {
			fmt.Fprintf(&b, "### %s\n\n![%s](%s)\n\n%s\n\n", mdEscape(c.Title), mdEscape(c.Title), chartPath(c, "svg"), mdEscape(c.Answers))
		}
	}
	mdTable(&b, d.Pareto)
	for _, t := range d.Compare {
		mdTable(&b, t)
	}
	mdTable(&b, d.Results)
	if len(d.Phases.Rows) > 0 {
		mdTable(&b, d.Phases)
	}
	if len(d.Adaptive.Rows) > 0 {
		mdTable(&b, d.Adaptive)
	}
	if len(d.Pruned.Rows) > 0 {
		mdTable(&b, d.Pruned)
	}
	if len(d.Failures.Rows) > 0 {
		mdTable(&b, d.Failures)
	} else {
		b.WriteString("## Failures\n\nNo point failed.\n\n")
	}
	b.WriteString("## Provenance\n\n")
	for _, f := range d.ProvFacts {
		fmt.Fprintf(&b, "- **%s**: %s\n", mdEscape(f[0]), mdEscape(f[1]))
	}
	b.WriteString("\n")
	mdTable(&b, d.Provenance)
	fmt.Fprintf(&b, "---\n%s\n", mdEscape(d.Generated))
	f := filepath.Join(opt.Dir, "report.md")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return append([]string{f}, charts...), nil
}

// mdDivergences shows each mismatching point's divergent answer beside the reference's in a
// two-column table, the prompt above, each in bold from the divergent word on.
func mdDivergences(b *strings.Builder, ds []divergence) {
	cell := func(s string) string { return strings.ReplaceAll(mdEscape(s), "\n", "<br>") }
	side := func(head, tail string) string {
		if tail == "" {
			return cell(head) + " *" + cell(endOfAnswer) + "*"
		}
		// The bold run starts at a word and ends at one (the tail is trimmed), as Markdown needs.
		return cell(head) + "**" + cell(tail) + "**"
	}
	for _, d := range ds {
		fmt.Fprintf(b, "### %s\n\n", mdEscape(d.Title))
		if d.Missing != "" {
			fmt.Fprintf(b, "%s\n\n", mdEscape(d.Missing))
			continue
		}
		if d.Prompt != "" {
			fmt.Fprintf(b, "%s\n\n", mdEscape(d.Prompt))
		}
		fmt.Fprintf(b, "| %s | %s |\n|---|---|\n| %s | %s |\n\n", cell(d.RefLabel), cell(d.GotLabel),
			side(d.RefHead, d.RefTail), side(d.GotHead, d.GotTail))
	}
	if len(ds) > 0 {
		b.WriteString("In bold: each answer from the first word where the two differ on.\n\n")
	}
}

// "~" and "$" too: GitHub strikes through ~text~ and typesets $math$.
var mdReplacer = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;", "~", `\~`, "$", `\$`)

// mdEscape makes text literal in Markdown; "](" is broken up so no data can form a link.
func mdEscape(s string) string { return strings.ReplaceAll(mdReplacer.Replace(s), "](", `]\(`) }

func mdTable(b *strings.Builder, t Table) {
	fmt.Fprintf(b, "## %s\n\n", mdEscape(t.Title))
	if len(t.Rows) == 0 {
		b.WriteString("Nothing to show.\n\n")
		return
	}
	b.WriteString("|")
	for _, h := range t.Head {
		b.WriteString(" " + mdEscape(h) + " |")
	}
	b.WriteString("\n|")
	for i := range t.Head {
		if at(t.Num, i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("|")
		for _, c := range r {
			b.WriteString(" " + strings.ReplaceAll(mdEscape(c), "\n", "<br>") + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if t.Note != "" {
		b.WriteString(mdEscape(t.Note) + "\n\n")
	}
}
