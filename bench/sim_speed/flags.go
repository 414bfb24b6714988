package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/specsweep/specsweep/sim"
)

// flagCoverage prints, per era, how many of the real launch flags of that
// era's server_args.py the simulator takes as argparse does: each flag once
// with a value of its type (accepted: not an argparse error) and once with a
// wrong one (refused: exit 2 with "error: argument FLAG"). It runs sim.Main
// in-process with SGLANGSIM_CHECK_ARGS=1, the binary's own code path.
func flagCoverage(w io.Writer) {
	fmt.Fprintln(w, "flag-table coverage (real flags of each era's server_args.py, one valid and one invalid value each):")
	fmt.Fprintf(w, "  %-8s %6s %10s %10s %10s %8s  %s\n", "era", "flags", "accepted", "started", "refused", "no-bad", "source")
	for _, name := range sim.EraNames() {
		era, err := sim.LookupEra(name)
		if err != nil {
			fmt.Fprintln(w, err)
			return
		}
		t, err := sim.LoadFlagTable(era)
		if err != nil {
			fmt.Fprintln(w, err)
			return
		}
		env := map[string]string{"SGLANGSIM_VERSION": name, "SGLANGSIM_CHECK_ARGS": "1"}
		run := func(args ...string) (int, string) {
			var o, e strings.Builder
			code := sim.Main(append([]string{"--model-path", "/models/Qwen3.5-122B-A10B"}, args...), func(k string) string { return env[k] }, &o, &e)
			return code, e.String()
		}
		var accepted, started, refused, noBad, total int
		var misses []string
		for _, f := range t.Flags {
			if f.Dest == "model_path" {
				continue
			}
			total++
			good, bad := sampleValues(f)
			if good != nil {
				code, _ := run(good...)
				if code != 2 {
					accepted++
				} else {
					misses = append(misses, strings.Join(good, " "))
				}
				if code == 0 {
					started++
				}
			} else {
				accepted++ // refused by the real one too (a removed flag)
				started++
			}
			if bad == nil {
				noBad++
				continue
			}
			code, stderr := run(bad...)
			if code == 2 && strings.Contains(stderr, ": error: argument "+f.Names[0]) || code == 2 && strings.Contains(stderr, "/"+f.Names[0]+": ") {
				refused++
			} else {
				misses = append(misses, strings.Join(bad, " "))
			}
		}
		fmt.Fprintf(w, "  %-8s %6d %10s %10s %10s %8d  %s@%.12s\n", name, total,
			fmt.Sprintf("%d/%d", accepted, total), fmt.Sprintf("%d/%d", started, total), fmt.Sprintf("%d/%d", refused, total-noBad),
			noBad, t.Source.Repo, t.Source.Commit)
		for _, m := range misses {
			fmt.Fprintf(w, "           miss: %s\n", m)
		}
	}
	fmt.Fprintln(w, "  accepted: argparse takes the valid value; started: the post-init rules pass too (SGLANGSIM_CHECK_ARGS=1 exits 0);")
	fmt.Fprintln(w, "  refused: the invalid value is an argparse error naming the flag; no-bad: string flags, where argparse has no invalid value.")
}

// sampleValues returns a command-line fragment with a value the flag takes
// and one with a value argparse refuses (nil: none exists).
func sampleValues(f sim.FlagSpec) (good, bad []string) {
	name := f.Names[0]
	switch f.Type {
	case "bool", "boolopt", "deprecated", "const":
		return []string{name}, []string{name + "=x"}
	case "deprecated_error":
		return nil, []string{name}
	}
	val, wrong := "v", ""
	switch f.Type {
	case "int":
		val, wrong = "4", "x"
	case "float":
		val, wrong = "0.5", "x"
	case "human_readable_int":
		val, wrong = "16k", "x"
	case "loads", "parse_cuda_graph_config_arg":
		val, wrong = "{}", "{"
	case "json_list_type":
		val, wrong = "[]", "["
	}
	if len(f.Choices) > 0 {
		val = fmt.Sprint(f.Choices[0])
		if _, isNum := f.Choices[0].(float64); isNum {
			wrong = "999999"
		} else {
			wrong = "no-such-choice"
		}
	}
	if f.Nargs == "?" {
		good = []string{name}
	} else if f.Nargs == "+" || f.Nargs == "*" {
		good = []string{name, val, val}
	} else {
		good = []string{name, val}
	}
	if wrong != "" {
		bad = []string{name, wrong}
	}
	return good, bad
}
