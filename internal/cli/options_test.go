package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestOptionsHoldEveryFlagAndArgument checks every command's options struct against its flag set:
// each flag is bound to a field of the struct of the flag's kind, no two flags to one field, and
// every field is a flag's or is filled from the positional arguments (or from which flags were
// given), so a run function reads the whole command line from its struct.
func TestOptionsHoldEveryFlagAndArgument(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts()
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			o.flags(fs)
			fields := map[uintptr]reflect.Value{} // by address, with their paths in names
			names := map[uintptr]string{}
			leafFields(reflect.ValueOf(o).Elem(), "", fields, names)
			bound := map[uintptr]string{}
			all := map[string]bool{}
			fs.VisitAll(func(f *flag.Flag) {
				all[f.Name] = true
				p := reflect.ValueOf(f.Value)
				if p.Kind() != reflect.Pointer {
					t.Errorf("--%s: its value is a %s, not a pointer to a field", f.Name, p.Kind())
					return
				}
				addr := p.Pointer()
				field, ok := fields[addr]
				switch {
				case !ok:
					t.Errorf("--%s is bound to no field of %T", f.Name, o)
				case bound[addr] != "":
					t.Errorf("--%s and --%s are bound to the same field %s", bound[addr], f.Name, names[addr])
				case p.Elem().Kind() != field.Kind():
					t.Errorf("--%s is a %s, its field %s a %s", f.Name, p.Elem().Kind(), names[addr], field.Kind())
				default:
					bound[addr] = f.Name
				}
			})
			if g, ok := o.(givenFlags); ok {
				g.given(all)
			}
			if err := o.args(synopsisArgs(c.args)); err != nil {
				t.Fatalf("args %q: %v", synopsisArgs(c.args), err)
			}
			for addr, field := range fields {
				if bound[addr] == "" && field.IsZero() {
					t.Errorf("field %s of %T is neither a flag's nor filled by the arguments %q", names[addr], o, c.args)
				}
			}
		})
	}
}

// leafFields collects the fields of the struct v, descending into struct fields.
func leafFields(v reflect.Value, prefix string, out map[uintptr]reflect.Value, names map[uintptr]string) {
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), prefix+v.Type().Field(i).Name
		if f.Kind() == reflect.Struct {
			leafFields(f, name+".", out, names)
			continue
		}
		out[f.Addr().Pointer()] = f
		names[f.Addr().Pointer()] = name
	}
}

// synopsisArgs makes one positional argument of each word of a usage synopsis ("METHOD PATH",
// "[SWEEP]"), each a path so that api's PATH passes.
func synopsisArgs(synopsis string) []string {
	var out []string
	for _, w := range strings.Fields(synopsis) {
		out = append(out, "/"+strings.Trim(w, "[]"))
	}
	return out
}

// defaults is a new options struct O with its flags' defaults (bound to a throwaway flag set, as
// binding sets each field to its flag's default).
func defaults[O any, P interface {
	*O
	options
}]() P {
	o := P(new(O))
	o.flags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return o
}

func directEnv(stdout, stderr io.Writer) Env {
	return Env{Stdout: stdout, Stderr: stderr, Getenv: func(string) string { return "" }}
}

// The run functions take their options struct directly, with no command line.
func TestRunFunctionsTakeTheirOptions(t *testing.T) {
	ctx := context.Background()
	spec := exampleCopy(t, "quickstart.yaml")
	var out, errs bytes.Buffer
	if err := validateRun(ctx, directEnv(&out, &errs), &validateOptions{Spec: spec}); err != nil {
		t.Fatalf("validateRun: %v (stderr %s)", err, errs.String())
	}
	if !strings.HasPrefix(out.String(), spec+": ok: sweep ") {
		t.Errorf("validateRun printed %q", out.String())
	}
	want, _, code := runMain(t, nil, "validate", spec)
	if code != ExitOK || want != out.String() {
		t.Errorf("validate through Main: code %d, %q; validateRun: %q", code, want, out.String())
	}

	out.Reset()
	if err := planRun(ctx, directEnv(&out, &errs), &planOptions{JSON: true, Spec: spec}); err != nil {
		t.Fatalf("planRun: %v", err)
	}
	var p struct {
		Name   string
		Points []json.RawMessage
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil || p.Name == "" || len(p.Points) == 0 {
		t.Errorf("planRun --json: %v: %s", err, out.String())
	}

	err := planRun(ctx, directEnv(io.Discard, io.Discard), &planOptions{Spec: "does-not-exist.yaml"})
	if err == nil {
		t.Error("planRun of a missing spec: no error")
	}
}

func TestRunsRunAgreesWithTheCommandLine(t *testing.T) {
	ctx := context.Background()
	path, plan := recordedDB(t)
	o := defaults[runsOptions]()
	o.DB, o.Where, o.Format, o.Columns = path, "concurrency = 16", "csv", "point_id,concurrency"
	var out bytes.Buffer
	if err := runsRun(ctx, directEnv(&out, io.Discard), o); err != nil {
		t.Fatalf("runsRun: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1+len(plan.Points) || lines[0] != "point_id,concurrency" {
		t.Errorf("runsRun: %d lines (want a header and %d rows):\n%s", len(lines), len(plan.Points), out.String())
	}
	want, errs, code := runMain(t, nil, "runs", "--db", path, "--where", "concurrency = 16", "--format", "csv",
		"--columns", "point_id,concurrency")
	if code != ExitOK || want != out.String() {
		t.Errorf("runs through Main: code %d (%s)\n%s\nrunsRun:\n%s", code, errs, want, out.String())
	}

	// A refusal is the same usage error Main words.
	o = defaults[runsOptions]()
	o.DB, o.Best, o.Sort = path, true, "output_tok_s DESC"
	var ue usageError
	if err := runsRun(ctx, directEnv(io.Discard, io.Discard), o); !errors.As(err, &ue) || !strings.Contains(ue.msg, "--sort does not apply to --best") {
		t.Errorf("runsRun --best --sort: %v", err)
	}
}

// Which flags were given is part of bench's options: the struct says it, not the flag set.
func TestBenchRunReadsGivenFlagsFromItsOptions(t *testing.T) {
	o := defaults[benchOptions]()
	o.URL, o.RequestsGiven, o.DurationGiven = "http://127.0.0.1:1", true, true
	var ue usageError
	err := benchRun(context.Background(), directEnv(io.Discard, io.Discard), o)
	if !errors.As(err, &ue) || ue.msg != "give --requests or --duration, not both" {
		t.Errorf("benchRun with --requests and --duration given: %v", err)
	}
	o.RequestsGiven, o.Duration = false, 0
	if err := benchRun(context.Background(), directEnv(io.Discard, io.Discard), o); !errors.As(err, &ue) || ue.msg != "--duration must be positive" {
		t.Errorf("benchRun with --duration 0 given: %v", err)
	}
}

// The args step stores the positional arguments, or refuses them as Main's usage errors.
func TestArgsStep(t *testing.T) {
	st := &statusOptions{}
	if err := st.args(nil); err != nil || st.Sweep != nil {
		t.Errorf("status without SWEEP: %v, %v", err, st.Sweep)
	}
	if err := st.args([]string{"7"}); err != nil || st.Sweep == nil || *st.Sweep != "7" {
		t.Errorf("status 7: %v, %v", err, st.Sweep)
	}
	a := &apiOptions{}
	if err := a.args([]string{"post", "/api/sweeps"}); err != nil || a.Method != "POST" || a.Path != "/api/sweeps" {
		t.Errorf("api post /api/sweeps: %v, %+v", err, a)
	}
	var ue usageError
	if err := a.args([]string{"GET", "api/sweeps"}); !errors.As(err, &ue) {
		t.Errorf("api GET api/sweeps: %v, want a usage error", err)
	}
	r := &runOptions{}
	if err := r.args([]string{"a.yaml", "b.yaml"}); !errors.As(err, &ue) || !strings.Contains(ue.msg, "expected one SPEC") {
		t.Errorf("run a.yaml b.yaml: %v", err)
	}
}
