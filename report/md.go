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
	for _, s := range d.Summary {
		b.WriteString(mdEscape(s) + "\n")
	}
	b.WriteString("\n")
	mdTable(&b, d.Best)
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

var mdReplacer = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;")

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
