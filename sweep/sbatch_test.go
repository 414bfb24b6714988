package sweep

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSbatchArgsNormalized: each item is read as sbatch reads its #SBATCH line and stored as the
// canonical --long=value options it holds, so the job script gets exactly what was checked.
func TestSbatchArgsNormalized(t *testing.T) {
	s, err := Load("testdata/sbatch.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--qos=normal",
		"--qos=high",
		"--exclusive", // --exclus: the unique prefix (--excl is also --exclude's)
		"--mem=80G",   // exact name wins over --mem-bind, --mem-per-cpu, --mem-per-gpu
		"--constraint=a100&nvlink",
		"--constraint=h100",
		"--mail-type=END,FAIL",
		`--reservation="my slot"`,
		"--overcommit", "--oversubscribe", // -Os: a cluster of two flags
		"--ntasks-per-node=1", "--cpus-per-task=16", // two options in one item
		"--tasks-per-node=1", // --tasks-per: the unique prefix of the alias of --ntasks-per-node
		"--no-kill=now",      // -know: -k takes an optional value attached, "now"
		"--nice",
		"--signal=B:USR1@60",
		"--qos=",
	}
	got := s.Hosts[0].Slurm.SbatchArgs
	if !slices.Equal(got, want) {
		t.Errorf("sbatch_args stored as\n%q\nwant\n%q", got, want)
	}
}

// TestSbatchOptionResolution: getopt_long's rules as glibc applies them to sbatch's table.
func TestSbatchOptionResolution(t *testing.T) {
	for _, c := range []struct{ item, want string }{
		{"--cluster=x", "--cluster"},   // exact, though --cluster-constraint and --clusters share it
		{"--gres=gpu:1", "--gres"},     // exact, though --gres-flags shares it
		{"--gpus=1", "--gpus"},         // exact, though --gpus-per-* share it
		{"--exclus", "--exclusive"},    // unique prefix
		{"--gres-f=x", "--gres-flags"}, // unique prefix
		{"--tasks=1", "--tasks-per-node"},
		{"-w node1", "--nodelist=node1"},
	} {
		items, _, _, err := parseSbatchItem(c.item)
		if err != nil || len(items) != 1 || !strings.HasPrefix(items[0].canonical(), c.want) {
			t.Errorf("parseSbatchItem(%q) = %+v, %v; want %s", c.item, items, err, c.want)
		}
	}
	for _, c := range []struct{ item, want string }{
		{"--excl", "ambiguous"}, // --exclude, --exclusive
		{"--cl=x", "ambiguous"},
		{"--exclusive=user --hold", "keeps the job pending"},
		{"--qos --job-name=x", ""}, // --qos takes the next argument, whatever it is, as getopt does
	} {
		_, err := checkSbatchArg(c.item)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkSbatchArg(%q): %v", c.item, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("checkSbatchArg(%q) = %v, want an error containing %q", c.item, err, c.want)
		}
	}
	if got, _ := checkSbatchArg("--qos --job-name=x"); !slices.Equal(got, []string{"--qos=--job-name=x"}) {
		t.Errorf("--qos --job-name=x stored as %q", got)
	}
	// glibc: a prefix matching several names of one option (same has_arg and val) is no ambiguity.
	opts := []sbatchOption{{long: "ntasks-per-node", arg: argRequired, val: "N"}, {long: "ntasks-per-nodes", arg: argRequired, val: "N"},
		{long: "other", arg: argNone}}
	if o, err := lookupLong(opts, "ntasks-per-n"); err != nil || o.long != "ntasks-per-node" {
		t.Errorf("lookupLong over one option's two names = %+v, %v", o, err)
	}
	opts[1].val = "M"
	if _, err := lookupLong(opts, "ntasks-per-n"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("lookupLong over two options = %v, want ambiguous", err)
	}
}

// TestSbatchTable: the transcribed table is well formed and the refusals name options it holds.
func TestSbatchTable(t *testing.T) {
	longs, shorts := map[string]bool{}, map[byte]bool{}
	for _, o := range sbatchOptions() {
		if longs[o.long] || (o.short != 0 && shorts[o.short]) {
			t.Errorf("option %+v listed twice", o)
		}
		longs[o.long], shorts[o.short] = true, o.short != 0
	}
	if len(longs) != 106 {
		t.Errorf("%d options, want the 106 of sbatch 22.05", len(longs))
	}
	for name := range sbatchRefused() {
		if !longs[name] {
			t.Errorf("sbatchRefused names --%s, which sbatch 22.05 does not have", name)
		}
	}
}

// TestSbatchRefusedCoversJobScript: every option hostctl's job script (or its sbatch command line)
// sets is refused in sbatch_args, so a spec cannot override it.
func TestSbatchRefusedCoversJobScript(t *testing.T) {
	src, err := os.ReadFile("../hostctl/slurm.go")
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, m := range regexp.MustCompile(`opt\("--([a-z-]+)`).FindAllStringSubmatch(string(src), -1) {
		set = append(set, m[1])
	}
	for _, m := range regexp.MustCompile(`"sbatch ((?:--?[a-z-]+ ?)+)"`).FindAllStringSubmatch(string(src), -1) {
		for _, f := range strings.Fields(m[1]) {
			set = append(set, strings.TrimLeft(f, "-"))
		}
	}
	if len(set) < 8 || !slices.Contains(set, "job-name") || !slices.Contains(set, "parsable") {
		t.Fatalf("read %q from hostctl/slurm.go: the job script's form changed, update this test", set)
	}
	refused := sbatchRefused()
	for _, name := range set {
		if _, ok := refused[name]; !ok {
			t.Errorf("hostctl's job script sets --%s, which sbatch_args may override", name)
		}
	}
}

// FuzzSbatchArg: checkSbatchArg never panics, and what it stores reads back as itself: each
// canonical option is one argument to sbatch and resolves to the same option and value.
func FuzzSbatchArg(f *testing.F) {
	for _, s := range []string{"--qos normal", "-Os", "--exclusive=user", `--reservation=a\ b`, "--comment='a b'",
		"-know", "--mail-type=END # x", "--qos=a hetjob", `--qos="a`, "-vpother", "--ex", "--=", "--qos=\"#\\'\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, item string) {
		out, err := checkSbatchArg(item)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(out) == 0 {
			t.Fatalf("checkSbatchArg(%q) accepted nothing", item)
		}
		for _, c := range out {
			toks, rest, err := sbatchTokens(c)
			if err != nil || rest != "" || len(toks) != 1 {
				t.Fatalf("canonical %q of %q reads as %q, %q, %v", c, item, toks, rest, err)
			}
			again, err := checkSbatchArg(c)
			if err != nil || !slices.Equal(again, []string{c}) {
				t.Fatalf("canonical %q of %q reads back as %q, %v", c, item, again, err)
			}
		}
	})
}
