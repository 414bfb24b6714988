package cli

import (
	"slices"
	"strings"
)

// One output convention (docs/cli.md, "Output"): every command with machine output takes --format,
// table first (the default where a person reads it). The commands that had --json keep it, as a
// synonym of --format json that --help does not list.

// formatUsage is the text of a --format flag accepting formats (the first the default); with
// jsonAlias, it says that --json means --format json.
func formatUsage(formats []string, jsonAlias bool) string {
	u := "output `FORMAT`: " + strings.Join(formats, ", ")
	if jsonAlias {
		u += " (--json: --format json)"
	}
	return u
}

// outputFormat checks --format against formats (the first the default, also for "": an options
// struct filled without the flags' defaults) and applies the --json synonym.
func outputFormat(format string, asJSON bool, formats ...string) (string, error) {
	if format == "" {
		format = formats[0]
	}
	if asJSON {
		if format != formats[0] && format != "json" {
			return "", usagef("--json means --format json, and --format %s says otherwise", format)
		}
		return "json", nil
	}
	if !slices.Contains(formats, format) {
		return "", usagef("unknown --format %q (want %s)%s", format, strings.Join(formats, ", "), didYouMean(format, formats, ""))
	}
	return format, nil
}
