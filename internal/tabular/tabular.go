// Package tabular writes query results (named columns, rows of SQL values) as an aligned text table,
// CSV or JSON, the three formats of `specsweep runs` and friends.
package tabular

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Formats lists the accepted format names, for flag help and errors.
var Formats = []string{"table", "csv", "json"}

// Write renders rows in format ("table", "csv" or "json").
func Write(w io.Writer, format string, columns []string, rows [][]any) error {
	switch format {
	case "table":
		return writeTable(w, columns, rows)
	case "csv":
		return writeCSV(w, columns, rows)
	case "json":
		return writeJSON(w, columns, rows)
	default:
		return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
}

func writeTable(w io.Writer, columns []string, rows [][]any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	cells := make([]string, len(columns))
	for _, r := range rows {
		for i := range cells {
			cells[i] = text(cellAt(r, i), true)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func writeCSV(w io.Writer, columns []string, rows [][]any) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(columns); err != nil {
		return err
	}
	cells := make([]string, len(columns))
	for _, r := range rows {
		for i := range cells {
			cells[i] = text(cellAt(r, i), false)
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeJSON writes an array of objects whose keys keep the column order (a map would sort them).
func writeJSON(w io.Writer, columns []string, rows [][]any) error {
	var buf bytes.Buffer
	buf.WriteString("[")
	for ri, r := range rows {
		if ri > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n  {")
		for i, c := range columns {
			if i > 0 {
				buf.WriteString(", ")
			}
			k, _ := json.Marshal(c)
			buf.Write(k)
			buf.WriteString(": ")
			v, err := json.Marshal(jsonValue(cellAt(r, i)))
			if err != nil {
				return fmt.Errorf("encode column %s: %w", c, err)
			}
			buf.Write(v)
		}
		buf.WriteString("}")
	}
	if len(rows) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	_, err := w.Write(buf.Bytes())
	return err
}

func cellAt(r []any, i int) any {
	if i < len(r) {
		return r[i]
	}
	return nil
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	}
	return v
}

// text renders one SQL value; pretty rounds floats for people (the CSV keeps full precision).
func text(v any, pretty bool) string {
	switch x := v.(type) {
	case nil:
		if pretty {
			return "-"
		}
		return ""
	case []byte:
		return string(x)
	case string:
		if pretty {
			return strings.NewReplacer("\n", "\\n", "\t", " ").Replace(x)
		}
		return x
	case float64:
		if pretty {
			return strconv.FormatFloat(x, 'f', prettyDigits(x), 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprint(x)
	}
}

func prettyDigits(x float64) int {
	a := math.Abs(x)
	switch {
	case a == math.Trunc(a) && a < 1e15:
		return 0
	case a >= 100:
		return 1
	case a >= 1:
		return 2
	default:
		return 3
	}
}
