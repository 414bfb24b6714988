package sweep

import (
	"fmt"
	"strings"
)

// sbatchVersion is the Slurm release whose sbatch option table is transcribed below.
const sbatchVersion = "22.05"

// argKind is getopt_long's has_arg.
type argKind int

const (
	argNone argKind = iota
	argRequired
	argOptional
)

// sbatchOption is one entry of sbatch's getopt_long table.
type sbatchOption struct {
	long  string
	short byte    // 0: none
	arg   argKind // no_argument, required_argument, optional_argument
	// val is the option's getopt value when two names share it (glibc takes an abbreviation that
	// matches only such names as unambiguous); "" means the option's own.
	val string
	// early marks the options sbatch reads in its first pass, from its command line only: in a
	// batch script they are ignored (slurm_process_option returns early for them).
	early bool
}

// sbatchOptions is sbatch's option table in Slurm 22.05: the entries of common_options[] in
// src/common/slurm_opt.c (tag slurm-22-05-8-1) that have a set_func or a set_func_sbatch, in
// that order (slurm_option_table_create builds getopt_long's table from them; its optstring starts
// with "+", so option parsing stops at the first argument that is not an option). Options that
// SPANK plugins add on some clusters are not in it.
func sbatchOptions() []sbatchOption {
	return []sbatchOption{
		{long: "account", short: 'A', arg: argRequired},
		{long: "acctg-freq", arg: argRequired},
		{long: "array", short: 'a', arg: argRequired},
		{long: "batch", arg: argRequired},
		{long: "begin", short: 'b', arg: argRequired},
		{long: "bb", arg: argRequired},
		{long: "bbf", arg: argRequired},
		{long: "cluster-constraint", arg: argRequired},
		{long: "chdir", short: 'D', arg: argRequired},
		{long: "cluster", arg: argRequired},
		{long: "clusters", short: 'M', arg: argRequired},
		{long: "comment", arg: argRequired},
		{long: "container", arg: argRequired},
		{long: "context", arg: argRequired},
		{long: "contiguous", arg: argNone},
		{long: "constraint", short: 'C', arg: argRequired},
		{long: "core-spec", short: 'S', arg: argRequired},
		{long: "cores-per-socket", arg: argRequired},
		{long: "cpu-freq", arg: argRequired},
		{long: "cpus-per-gpu", arg: argRequired},
		{long: "cpus-per-task", short: 'c', arg: argRequired},
		{long: "deadline", arg: argRequired},
		{long: "delay-boot", arg: argRequired},
		{long: "dependency", short: 'd', arg: argRequired},
		{long: "distribution", short: 'm', arg: argRequired},
		{long: "error", short: 'e', arg: argRequired},
		{long: "exclude", short: 'x', arg: argRequired},
		{long: "exclusive", arg: argOptional},
		{long: "export", arg: argRequired},
		{long: "export-file", arg: argRequired},
		{long: "extra-node-info", short: 'B', arg: argRequired},
		{long: "get-user-env", arg: argOptional},
		{long: "gid", arg: argRequired},
		{long: "gpu-bind", arg: argRequired},
		{long: "gpu-freq", arg: argRequired},
		{long: "gpus", short: 'G', arg: argRequired},
		{long: "gpus-per-node", arg: argRequired},
		{long: "gpus-per-socket", arg: argRequired},
		{long: "gpus-per-task", arg: argRequired},
		{long: "gres", arg: argRequired},
		{long: "gres-flags", arg: argRequired},
		{long: "help", short: 'h', arg: argNone, early: true},
		{long: "hint", arg: argRequired},
		{long: "hold", short: 'H', arg: argNone},
		{long: "ignore-pbs", arg: argNone},
		{long: "input", short: 'i', arg: argRequired},
		{long: "job-name", short: 'J', arg: argRequired},
		{long: "kill-on-invalid-dep", arg: argRequired},
		{long: "licenses", short: 'L', arg: argRequired},
		{long: "mail-type", arg: argRequired},
		{long: "mail-user", arg: argRequired},
		{long: "mcs-label", arg: argRequired},
		{long: "mem", arg: argRequired},
		{long: "mem-bind", arg: argRequired},
		{long: "mem-per-cpu", arg: argRequired},
		{long: "mem-per-gpu", arg: argRequired},
		{long: "mincpus", arg: argRequired},
		{long: "network", arg: argRequired},
		{long: "nice", arg: argOptional},
		{long: "no-kill", short: 'k', arg: argOptional},
		{long: "no-requeue", arg: argNone},
		{long: "nodefile", short: 'F', arg: argRequired},
		{long: "nodelist", short: 'w', arg: argRequired},
		{long: "nodes", short: 'N', arg: argRequired},
		{long: "ntasks", short: 'n', arg: argRequired},
		{long: "ntasks-per-core", arg: argRequired},
		{long: "ntasks-per-gpu", arg: argRequired},
		{long: "ntasks-per-node", arg: argRequired, val: "LONG_OPT_NTASKSPERNODE"},
		{long: "ntasks-per-socket", arg: argRequired},
		{long: "ntasks-per-tres", arg: argRequired},
		{long: "open-mode", arg: argRequired},
		{long: "output", short: 'o', arg: argRequired},
		{long: "overcommit", short: 'O', arg: argNone},
		{long: "oversubscribe", short: 's', arg: argNone},
		{long: "parsable", arg: argNone},
		{long: "partition", short: 'p', arg: argRequired},
		{long: "power", arg: argRequired},
		{long: "prefer", arg: argRequired},
		{long: "priority", arg: argRequired},
		{long: "profile", arg: argRequired},
		{long: "propagate", arg: argOptional},
		{long: "qos", short: 'q', arg: argRequired},
		{long: "quiet", short: 'Q', arg: argNone, early: true},
		{long: "reboot", arg: argNone},
		{long: "requeue", arg: argNone},
		{long: "reservation", arg: argRequired},
		{long: "signal", arg: argRequired},
		{long: "sockets-per-node", arg: argRequired},
		{long: "spread-job", arg: argNone},
		{long: "switches", arg: argRequired},
		{long: "tasks-per-node", arg: argRequired, val: "LONG_OPT_NTASKSPERNODE"},
		{long: "test-only", arg: argNone},
		{long: "thread-spec", arg: argRequired},
		{long: "threads-per-core", arg: argRequired},
		{long: "time", short: 't', arg: argRequired},
		{long: "time-min", arg: argRequired},
		{long: "tmp", arg: argRequired},
		{long: "uid", arg: argRequired},
		{long: "use-min-nodes", arg: argNone},
		{long: "verbose", short: 'v', arg: argNone, early: true},
		{long: "version", short: 'V', arg: argNone, early: true},
		{long: "usage", arg: argNone, early: true},
		{long: "wait", short: 'W', arg: argNone},
		{long: "wait-all-nodes", arg: argRequired},
		{long: "wckey", arg: argRequired},
		{long: "wrap", arg: argRequired, early: true},
	}
}

// sbatchRefused says, per option, why a spec may not pass it in sbatch_args (docs/slurm.md has the
// same table). An option is refused when specsweep sets it for each job (hostctl's job script and
// its sbatch command line), when it changes the GPUs, the user, the environment, the working
// directory, the input or output, or the program of the job, or when it keeps specsweep from
// following the job it submitted.
func sbatchRefused() map[string]string {
	const (
		own    = "is set by specsweep for each job"
		gpus   = "changes the GPUs a job gets, which specsweep sets to the point's tp with --gres"
		who    = "changes who runs the job"
		follow = "sends the job where specsweep cannot follow it (it runs squeue and scontrol for the login node's own cluster)"
	)
	return map[string]string{
		"job-name":           own + " (specsweep finds its jobs by name)",
		"comment":            own + " (specsweep finds its jobs by comment)",
		"nodes":              own + " (the nodes a point spans: 1, or tp/gpus with slurm.max_nodes)",
		"ntasks":             own + " (one task per node: a server rank)",
		"gres":               own + " (gpu:tp, or gpu:gpus on each node of a point that spans nodes)",
		"output":             own + " (specsweep reads the server's log from it)",
		"no-requeue":         own,
		"requeue":            "would let Slurm run a point twice (specsweep sets --no-requeue)",
		"partition":          own + ": use hosts[].slurm.partition",
		"account":            own + ": use hosts[].slurm.account",
		"time":               own + ": use hosts[].slurm.time_limit",
		"parsable":           own + " (on sbatch's command line)",
		"gpus":               gpus,
		"gpus-per-node":      gpus,
		"gpus-per-socket":    gpus,
		"gpus-per-task":      gpus,
		"ntasks-per-gpu":     gpus,
		"ntasks-per-tres":    gpus,
		"uid":                who,
		"gid":                who,
		"get-user-env":       who + ": it loads the login environment of --uid's user",
		"context":            who + " (its SELinux context)",
		"error":              "changes where the job's output goes (specsweep reads stdout and stderr from --output)",
		"input":              "changes the job's standard input",
		"open-mode":          "changes how the job's output file is written (specsweep reads it from the start)",
		"chdir":              "changes the job's working directory, against which the server's relative paths resolve",
		"export":             "changes the job's environment (the spec's env is written into the job script)",
		"export-file":        "changes the job's environment (the spec's env is written into the job script)",
		"array":              "runs the point several times at once",
		"container":          "runs the job in an OCI container instead of the server command",
		"clusters":           follow,
		"cluster":            follow,
		"cluster-constraint": follow,
		"wait":               "makes sbatch wait for the job to end, so the submission times out",
		"test-only":          "submits no job",
		"hold":               "keeps the job pending until someone releases it",
	}
}

// sbatchItem is one option of sbatch_args, resolved: an entry of the table and its value.
type sbatchItem struct {
	opt      sbatchOption
	value    string
	hasValue bool
	typed    string // the option as written (--outp, -o)
}

// canonical is the item as one #SBATCH argument: --long or --long=value. A value holding
// characters get_argument would read as a separator, a quote, an escape or a comment is written
// in double quotes, with " and \ escaped (outside quotes a backslash does not protect a space:
// get_argument tests for whitespace before it looks at the escape).
func (it sbatchItem) canonical() string {
	if !it.hasValue {
		return "--" + it.opt.long
	}
	plain := true
	for i := 0; i < len(it.value); i++ {
		if c := it.value[i]; isCSpace(c) || c == '"' || c == '\'' || c == '\\' || c == '#' {
			plain = false
		}
	}
	if plain {
		return "--" + it.opt.long + "=" + it.value
	}
	var b strings.Builder
	b.WriteString("--" + it.opt.long + "=\"")
	for i := 0; i < len(it.value); i++ {
		if c := it.value[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(it.value[i])
	}
	b.WriteByte('"')
	return b.String()
}

// isCSpace is C's isspace in the C locale, which get_argument splits on.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// sbatchTokens splits one sbatch_args item into the arguments sbatch reads from the #SBATCH line
// hostctl writes for it ("#SBATCH " + item), as get_argument in src/sbatch/opt.c (22.05) does:
// whitespace separates, single or double quotes group, a backslash escapes the next character,
// an unquoted # starts a comment. Where get_argument returns no argument (a comment, an empty
// quoted string, a "hetjob" or "packjob" separator word, which it blanks) sbatch reads no more of
// the line; rest is what it would ignore then (a comment excluded).
func sbatchTokens(item string) (tokens []string, rest string, err error) {
	i := 0
	for {
		for i < len(item) && isCSpace(item[i]) {
			i++
		}
		word := func(w string) bool {
			n := len(w)
			return len(item)-i >= n && strings.EqualFold(item[i:i+n], w) && (len(item)-i == n || isCSpace(item[i+n]))
		}
		if word("packjob") || word("hetjob") {
			return tokens, strings.TrimSpace(item[i:]), nil
		}
		if i < len(item) && item[i] == ':' {
			return nil, "", fmt.Errorf("an argument starting with \":\" stops sbatch (\"Unexpected `:`\")")
		}
		if i >= len(item) {
			return tokens, "", nil
		}
		var b strings.Builder
		got, quoted, escape := false, false, false
		var q byte
		for ; i < len(item) && (quoted || !isCSpace(item[i])); i++ {
			c := item[i]
			switch {
			case escape:
				escape = false
			case c == '\\':
				escape = true
				continue
			case quoted:
				if c == q {
					quoted = false
					continue
				}
			case c == '"' || c == '\'':
				quoted, q = true, c
				continue
			case c == '#':
				// The rest of the line is a comment.
				if got {
					tokens = append(tokens, b.String())
				}
				return tokens, "", nil
			}
			b.WriteByte(c)
			got = true
		}
		if quoted {
			return nil, "", fmt.Errorf("unmatched %c quote (sbatch refuses the script)", q)
		}
		if !got {
			return tokens, strings.TrimSpace(item[i:]), nil
		}
		tokens = append(tokens, b.String())
	}
}

// parseSbatchItem reads one sbatch_args item as sbatch reads its #SBATCH line: its arguments
// (sbatchTokens), then glibc getopt_long over them against sbatchOptions (long options by exact
// name or unique abbreviation, "=value" or the next argument; clustered short options, the last
// of which may take the rest as its value; optional arguments only attached). Every argument must
// be read inside the item: a value taken from the next item's line would be another option's.
//
// It returns the options read and the text of the item sbatch would not read (after a separator
// word or an empty argument); ended says the item ends with "--", after which sbatch reads no
// option; err says why sbatch would refuse the script.
func parseSbatchItem(item string) (_ []sbatchItem, ignored string, ended bool, _ error) {
	tokens, rest, err := sbatchTokens(item)
	if err != nil {
		return nil, "", false, err
	}
	opts := sbatchOptions()
	var out []sbatchItem
	for i := 0; i < len(tokens); i++ {
		t := tokens[i]
		next := func(o sbatchOption, typed string) (string, error) {
			if i+1 >= len(tokens) {
				return "", fmt.Errorf("%s needs a value: write --%s=VALUE in one item", typed, o.long)
			}
			i++
			return tokens[i], nil
		}
		switch {
		case t == "--" && i+1 < len(tokens):
			return nil, "", false, fmt.Errorf("\"--\" ends sbatch's options: what follows is an invalid directive")
		case t == "--":
			// getopt_long stops there; what the next lines hold would be invalid directives.
			return out, rest, true, nil
		case (len(t) < 2 || t[0] != '-') && t == item:
			return nil, "", false, fmt.Errorf("not an option (sbatch would stop at it: \"Invalid directive\"): write --name=value as one item")
		case len(t) < 2 || t[0] != '-':
			return nil, "", false, fmt.Errorf("%q is not an option (sbatch stops at it: \"Invalid directive\"): write --name=value as one item", clip(t))
		case t[1] == '-':
			name, value, hasValue := strings.Cut(t[2:], "=")
			o, err := lookupLong(opts, name)
			if err != nil {
				return nil, "", false, err
			}
			it := sbatchItem{opt: o, typed: "--" + name}
			switch {
			case hasValue && o.arg == argNone:
				return nil, "", false, fmt.Errorf("--%s takes no value (sbatch: \"doesn't allow an argument\")", o.long)
			case hasValue:
				it.value, it.hasValue = value, true
			case o.arg == argRequired:
				if it.value, err = next(o, "--"+name); err != nil {
					return nil, "", false, err
				}
				it.hasValue = true
			}
			out = append(out, it)
		default:
			for j := 1; j < len(t); j++ {
				o, ok := lookupShort(opts, t[j])
				if !ok {
					return nil, "", false, fmt.Errorf("-%s is not an option of sbatch %s", clip(string(t[j])), sbatchVersion)
				}
				it := sbatchItem{opt: o, typed: "-" + string(t[j])}
				if o.arg != argNone {
					if j+1 < len(t) {
						it.value, it.hasValue = t[j+1:], true
					} else if o.arg == argRequired {
						if it.value, err = next(o, it.typed); err != nil {
							return nil, "", false, err
						}
						it.hasValue = true
					}
					out = append(out, it)
					break
				}
				out = append(out, it)
			}
		}
	}
	return out, rest, false, nil
}

// lookupLong resolves a long option name as glibc's getopt_long does: an exact name wins, else a
// unique prefix; a prefix shared by options that differ is ambiguous (names sharing one getopt
// value, such as --tasks-per-node and --ntasks-per-node, do not differ).
func lookupLong(opts []sbatchOption, name string) (sbatchOption, error) {
	var found []sbatchOption
	for _, o := range opts {
		if o.long == name {
			return o, nil
		}
		if strings.HasPrefix(o.long, name) {
			found = append(found, o)
		}
	}
	id := func(o sbatchOption) string {
		if o.val != "" {
			return o.val
		}
		return o.long
	}
	for _, o := range found[min(1, len(found)):] {
		if o.arg != found[0].arg || id(o) != id(found[0]) {
			names := make([]string, 0, 4)
			for _, f := range found[:min(4, len(found))] {
				names = append(names, "--"+f.long+"?")
			}
			if len(found) > 4 {
				names = append(names, fmt.Sprintf("and %d more", len(found)-4))
			}
			return sbatchOption{}, fmt.Errorf("%q is ambiguous in sbatch %s (%s)", clip("--"+name), sbatchVersion, strings.Join(names, " "))
		}
	}
	if len(found) == 0 {
		return sbatchOption{}, fmt.Errorf("%q is not an option of sbatch %s", clip("--"+name), sbatchVersion)
	}
	return found[0], nil
}

func lookupShort(opts []sbatchOption, c byte) (sbatchOption, bool) {
	for _, o := range opts {
		if o.short != 0 && o.short == c {
			return o, true
		}
	}
	return sbatchOption{}, false
}

// checkSbatchArg resolves one sbatch_args item and returns its options in canonical form, or why
// the item is refused.
func checkSbatchArg(item string) ([]string, error) {
	items, ignored, ended, err := parseSbatchItem(item)
	switch {
	case err != nil:
		return nil, err
	case ended:
		return nil, fmt.Errorf("\"--\" ends sbatch's options: the items after it would be invalid directives")
	case ignored != "":
		return nil, fmt.Errorf("sbatch would stop reading the line before %q", clip(ignored))
	case len(items) == 0:
		return nil, fmt.Errorf("holds no option")
	}
	refused := sbatchRefused()
	var out []string
	for _, it := range items {
		name := "--" + it.opt.long
		if it.typed != name {
			name = fmt.Sprintf("%s (%s)", it.typed, "--"+it.opt.long)
		}
		if it.opt.early {
			return nil, fmt.Errorf("%s has no effect in a batch script (sbatch reads it from its command line only)", name)
		}
		if why, ok := refused[it.opt.long]; ok {
			return nil, fmt.Errorf("%s %s (docs/slurm.md)", name, why)
		}
		out = append(out, it.canonical())
	}
	return out, nil
}

// ReadSbatchArg is what sbatch 22.05 reads from the batch script line "#SBATCH " + item: its
// options in canonical form (each one #SBATCH argument), and the text of the line it would not
// read (after a separator word or an empty argument, or "--" and what follows it); err says why
// sbatch would refuse the script. It applies none of specsweep's refusals
// (a spec's sbatch_args are checked by Parse); the end-to-end tests compare it with the real sbatch.
func ReadSbatchArg(item string) (options []string, ignored string, err error) {
	items, ignored, ended, err := parseSbatchItem(item)
	if err != nil {
		return nil, "", err
	}
	if ended {
		ignored = strings.TrimSpace("-- " + ignored)
	}
	for _, it := range items {
		options = append(options, it.canonical())
	}
	return options, ignored, nil
}
