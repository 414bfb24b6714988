package hostctl

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestQuoteExecArg(t *testing.T) {
	cases := map[string]string{
		"plain":         `"plain"`,
		"50%":           `"50%%"`,
		"$HOME":         `"$$HOME"`,
		`a"b`:           `"a\"b"`,
		`back\slash`:    `"back\\slash"`,
		"it's":          `"it's"`,
		";":             `\;`,
		"a;b":           `"a;b"`,
		"":              `""`,
		"tab\there":     `"tab\there"`,
		"%n ${X} $$ %%": `"%%n $${X} $$$$ %%%%"`,
		"\x01ctrl":      `"\x01ctrl"`,
		"ünïcode ✓ 世界":  `"ünïcode ✓ 世界"`,
	}
	for in, want := range cases {
		got, err := QuoteExecArg(in)
		if err != nil || got != want {
			t.Errorf("QuoteExecArg(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"a\nb", "nul\x00", "cr\r", "\xff\xfe"} {
		if _, err := QuoteExecArg(bad); err == nil {
			t.Errorf("QuoteExecArg(%q): no error", bad)
		}
	}
}

func TestExecStartLine(t *testing.T) {
	got, err := ExecStartLine([]string{"/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server", "--port", "30000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `/opt/sglang/.venv/bin/python "-m" "sglang.launch_server" "--port" "30000"`; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if _, err := ExecStartLine([]string{"python", "-m"}, nil); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative path: %v", err)
	}
	if _, err := ExecStartLine(nil, nil); err == nil {
		t.Fatal("empty argv accepted")
	}
	// A path needing quotes is quoted.
	got, _ = ExecStartLine([]string{"/opt/my dir/bin/x"}, nil)
	if got != `"/opt/my dir/bin/x"` {
		t.Fatalf("got %q", got)
	}
	// Long lines wrap with continuations, each physical line under the limit.
	argv := []string{"/bin/x"}
	for range 300 {
		argv = append(argv, "--speculative-draft-model-path", "/models/"+strings.Repeat("m", 20))
	}
	got, err = ExecStartLine(argv, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split("ExecStart="+got, "\n") {
		if len(line) > wrapAt+2 {
			t.Fatalf("physical line of %d bytes", len(line))
		}
	}
	back, err := unquoteExec(got)
	if err != nil || !slices.Equal(back, argv) {
		t.Fatalf("round trip of a wrapped line: %v", err)
	}
}

func TestRenderDropIn(t *testing.T) {
	b, err := RenderDropIn("sglang.service", Launch{
		Argv:        []string{"/usr/local/bin/sglangsim", "--model-path", "/models/Q 1", "--port", "30001", "--api-key", "${SGLANG_API_KEY}", "--x=$HOME${Q}%"},
		Env:         map[string]string{"SGL_FORCE_SHUTDOWN": "1", "A_PCT": "50%", "Q": `say "hi" $X`, "SGLANG_API_KEY": "sk-secret"},
		StopTimeout: 2500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// No value of the environment in the drop-in (0644, and `systemctl show` prints Environment=):
	// the values are in the root-only file it names; ${NAME} is left to systemd.
	want := "# Written by specsweep for a sweep; removed by `specsweep` when the sweep ends. ExecStart= runs the\n" +
		"# point's command line from 50-specsweep.launch beside it.\n" +
		"# The operator's unit is untouched. To undo: `specsweep restore SPEC`, or by hand: delete this file,\n" +
		"# 50-specsweep.env and 50-specsweep.launch beside it and /var/lib/specsweep/restore-sglang.service.json, then `systemctl daemon-reload`.\n" +
		"[Service]\n" +
		"ExecStart=\n" +
		`ExecStart=/bin/sh "/etc/systemd/system/sglang.service.d/50-specsweep.launch"` + "\n" +
		"EnvironmentFile=/etc/systemd/system/sglang.service.d/50-specsweep.env\n" +
		"TimeoutStopSec=2500ms\n"
	if string(b) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b, want)
	}
	if bytes.Contains(b, []byte("sk-secret")) || bytes.Contains(b, []byte("say")) {
		t.Fatal("an environment value is in the drop-in")
	}
	// Another point of the sweep (its command line another) has the same drop-in: no daemon-reload.
	other, err := RenderDropIn("sglang.service", Launch{
		Argv:        []string{"/usr/local/bin/sglangsim", "--speculative-num-steps", "3"},
		Env:         map[string]string{"SGL_FORCE_SHUTDOWN": "1"},
		StopTimeout: 2500 * time.Millisecond,
	})
	if err != nil || !bytes.Equal(other, b) {
		t.Fatalf("the drop-in of another point differs (%v):\n%s", err, other)
	}
	env, err := RenderEnvFile(map[string]string{"SGL_FORCE_SHUTDOWN": "1", "A_PCT": "50%", "Q": `say "hi" $X \ ` + "`id`"})
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := "# Written by specsweep for one sweep point (root only); removed with the drop-in.\n" +
		`A_PCT="50%"` + "\n" + `Q="say \"hi\" \$X \\ \` + "`id\\`" + `"` + "\n" + `SGL_FORCE_SHUTDOWN="1"` + "\n"
	if string(env) != wantEnv {
		t.Fatalf("env file:\n%s\nwant:\n%s", env, wantEnv)
	}
	// Without environment, no EnvironmentFile= (systemd would fail on a missing file).
	b, err = RenderDropIn("sglang.service", Launch{Argv: []string{"/bin/x"}})
	if err != nil || bytes.Contains(b, []byte("EnvironmentFile")) {
		t.Fatalf("drop-in without environment: %v\n%s", err, b)
	}
	for _, l := range []Launch{
		{Argv: []string{"/bin/x", "a\nb"}},
		{Argv: []string{"/bin/x"}, Env: map[string]string{"BAD NAME": "x"}},
		{Argv: []string{"/bin/x"}, Env: map[string]string{"X": "nul\x00"}},
		{Argv: []string{"bin/x"}},
		{Argv: []string{"/bin/x", "bad\xffutf8"}},
	} {
		if _, err := RenderDropIn("sglang.service", l); err == nil {
			t.Errorf("RenderDropIn(%v): no error", l)
		}
		if _, err := RenderLaunchScript(l); err == nil && len(l.Env) == 0 {
			t.Errorf("RenderLaunchScript(%v): no error", l)
		}
	}
}

// TestRenderLaunchScript: the launch script reads as an operator expects, and sh hands the command
// exactly the argv systemd would have (ExpandArgv: ${NAME} of the environment substituted, in every
// argument but the command, every other byte as written), the references expanded from the
// environment, never written into the script.
func TestRenderLaunchScript(t *testing.T) {
	t.Parallel()
	l := Launch{Argv: []string{"/opt/sglang/bin/python", "-m", "sglang.launch_server", "--api-key", "${KEY}", "--x=a${KEY}b${NOPE}'c"},
		Env: map[string]string{"KEY": "sk-secret"}}
	b, err := RenderLaunchScript(l)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Written by specsweep for one sweep point: its command line, run by the ExecStart= of 50-specsweep.conf.\n" +
		"[ -f /opt/sglang/bin/python ] && [ -x /opt/sglang/bin/python ] || { printf '%s\\n' 'specsweep: Failed to execute /opt/sglang/bin/python: not an executable file' >&2; exit 203; }\n" +
		"exec /opt/sglang/bin/python \\\n\t-m \\\n\tsglang.launch_server \\\n\t--api-key \\\n\t\"${KEY}\" \\\n\t--x=a\"${KEY}\"'b${NOPE}'\\''c'\n"
	if string(b) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b, want)
	}
	if bytes.Contains(b, []byte("sk-secret")) {
		t.Fatal("an environment value is in the launch script")
	}

	dir := t.TempDir()
	nasty := []string{"50%", "%n%i%%", "$HOME", "${X}", "$$", `back\slash`, `\\double`, `"quoted"`, "it's", "''", ";", "a;b", "tab\there",
		"\x01ctl", "ünïcode ✓", "", " lead", "trail ", "--flag=va lue", "*", "~", "`id`", "$(id)", "\\;", "${P}", "x${P}y${P}", "${P", "$P",
		"${}", "${ P}", strings.Repeat("L", 3000)}
	env := map[string]string{"P": "50% $HOME \"q\" \\ 'it' `id`"} // ${X}: no variable, no reference
	// The command prints its arguments, each ended by NUL.
	argv := append([]string{"/bin/sh", "-c", `printf '%s\0' "$@"`, "sh"}, nasty...)
	script, err := RenderLaunchScript(Launch{Argv: argv, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "launch")
	if err := os.WriteFile(f, script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", f)
	cmd.Env = []string{"P=" + env["P"], "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if want := ExpandArgv(argv, env)[4:]; !slices.Equal(got, want) {
		t.Errorf("argv through the launch script:\n got %q\nwant %q", got, want)
	}

	// A command that cannot be executed ends the script with systemd's 203/EXEC and its words.
	for _, c := range []string{"/nonexistent/sglang", dir} {
		script, err := RenderLaunchScript(Launch{Argv: []string{c, "--port", "1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, script, 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command("/bin/sh", f)
		cmd.Stderr = &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 203 || !reExec.MatchString(stderr.String()) {
			t.Errorf("launch of %s: %v, stderr %q; want exit 203 and a line classify reads as 203/EXEC", c, err, stderr.String())
		}
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	m := Marker{Unit: "sglang.service", WasActive: true, DropIn: DropInPath("sglang.service"), CreatedAt: time.Unix(1, 0).UTC()}
	got, err := DecodeMarker(m.Encode())
	if err != nil || got != m {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := DecodeMarker([]byte("{}")); err == nil {
		t.Fatal("empty marker accepted")
	}
}

// FuzzExecStart checks that every argv either is refused (newline, NUL) or
// renders to an ExecStart= value that splits back to exactly argv under
// systemd's rules, with no raw newline except continuations.
func FuzzExecStart(f *testing.F) {
	for _, s := range []string{"plain", "50%", "$HOME ${X}", `a"b\c`, ";", "", "a;b", "\t", "\x7f", "%%$$", "ünï"} {
		f.Add(s, "--x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		argv := []string{"/usr/bin/env", a, b, a + b}
		line, err := ExecStartLine(argv, nil)
		if strings.ContainsAny(a+b, "\n\r\x00") || !utf8.ValidString(a) || !utf8.ValidString(b) {
			if err == nil {
				t.Fatalf("accepted %q", argv)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ReplaceAll(line, "\\\n", ""), "\n") {
			t.Fatalf("raw newline in %q", line)
		}
		back, err := unquoteExec(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !slices.Equal(back, argv) {
			t.Fatalf("round trip: %q -> %q -> %q", argv, line, back)
		}
		if !utf8.ValidString(line) {
			t.Fatalf("not UTF-8 clean: %q", line)
		}
	})
}

func TestLaunchPort(t *testing.T) {
	l := Launch{Argv: []string{"/bin/x", "--port", "30001"}}.withDefaults()
	if l.Port != 30001 {
		t.Fatalf("port from argv: %d", l.Port)
	}
	// argparse: the last occurrence wins, and an unambiguous abbreviation names the option.
	if l := (Launch{Argv: []string{"/bin/x", "--port", "30000", "--po", "30001"}}).withDefaults(); l.Port != 30001 {
		t.Fatalf("port from --po after --port: %d", l.Port)
	}
	if h, ext := serverEndpoint([]string{"/bin/x", "--host", "127.0.0.1", "--hos=0.0.0.0"}, 30000); h != "127.0.0.1" || !ext {
		t.Fatalf("--hos=0.0.0.0 after --host 127.0.0.1: %s %v, want the wildcard (probed on loopback, reachable)", h, ext)
	}
	if got := (Launch{Argv: []string{"/bin/x"}}).withDefaults().Port; got != 30000 {
		t.Fatalf("default port: %d", got)
	}
	if err := (Launch{Argv: []string{"/bin/x", "--port=30001"}, Port: 30000}).Validate(); err == nil {
		t.Fatal("a port mismatch was accepted")
	}
	if err := (Launch{Argv: []string{"/bin/x", "--port", "30000"}, Port: 30000}).Validate(); err != nil {
		t.Fatal(err)
	}
	// An invalid launch is the point's failure (bad_args), not host trouble.
	_, err := NewLocal(LocalOptions{}).Start(t.Context(), Launch{Argv: []string{"/bin/x", "--port", "1"}, Port: 2})
	if f, ok := AsFailure(err); !ok || f.Class != ClassBadArgs {
		t.Fatalf("want bad_args, got %v", err)
	}
}

func TestExpandArgv(t *testing.T) {
	env := map[string]string{"K": "v 1", "E": ""}
	got := ExpandArgv([]string{"/bin/${K}", "${K}", "--a=${K}x", "${NOPE}", "$K", "${K", "${E}", "$${K}", "${}"}, env)
	want := []string{"/bin/${K}", "v 1", "--a=v 1x", "${NOPE}", "$K", "${K", "", "$v 1", "${}"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if k := APIKey(Launch{Argv: []string{"/bin/x", "--api-key", "a", "--api-key=${K}"}, Env: env}); k != "v 1" {
		t.Fatalf("APIKey: %q", k)
	}
}

// TestExecStartReferencesRoundTrip: an argument mixing literal text and ${NAME} references renders
// to what systemd substitutes back into exactly ExpandArgv's argument, whatever the literal pieces
// hold (a lone ";" piece included: it is only systemd's separator as a whole word).
func TestExecStartReferencesRoundTrip(t *testing.T) {
	env := map[string]string{"K": "v"}
	for _, a := range []string{"${K};", ";${K}", "a${K}b", "50%${K}$$x", `"${K}"\`, "${K}"} {
		line, err := ExecStartLine([]string{"/bin/x", a}, env)
		if err != nil {
			t.Fatal(err)
		}
		// systemd's substitution of ${K}, then its unquoting.
		back, err := unquoteExec(strings.ReplaceAll(line, "${K}", "v"))
		if err != nil {
			t.Fatalf("%q -> %q: %v", a, line, err)
		}
		if want := ExpandArgv([]string{"/bin/x", a}, env); !slices.Equal(back, want) {
			t.Errorf("%q -> %q -> %q, want %q", a, line, back, want)
		}
	}
}
