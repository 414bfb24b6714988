package argparse

import (
	"strings"
	"testing"
)

func TestLast(t *testing.T) {
	argv := []string{"/bin/python", "-m", "sglang.launch_server", "--port", "30000", "--host", "0.0.0.0",
		"--po", "30001", "--api-key=k1", "--api-key", "k2", "--tp", "4", "--", "--port", "1"}
	for _, c := range []struct {
		names []string
		want  string
		ok    bool
	}{
		{[]string{"--port"}, "30001", true},   // the last wins, abbreviated
		{[]string{"--host"}, "0.0.0.0", true}, //
		{[]string{"--api-key"}, "k2", true},   // "=" and space forms alike
		{[]string{"--tp-size", "--tensor-parallel-size"}, "4", true},
		{[]string{"--model-path", "--model"}, "", false},
	} {
		got, ok := Last(argv, c.names...)
		if got != c.want || ok != c.ok {
			t.Errorf("Last(%v) = %q %v, want %q %v", c.names, got, ok, c.want, c.ok)
		}
	}
	// "--p" is a prefix of many options: ambiguous, not --port.
	if got, ok := Last([]string{"--p", "1"}, "--port"); ok {
		t.Errorf("ambiguous --p read as --port: %q", got)
	}
	// A dangling option has no value.
	if _, ok := Last([]string{"--port"}, "--port"); ok {
		t.Error("a dangling --port has a value")
	}
}

func TestResolve(t *testing.T) {
	for tok, want := range map[string]string{"--port": "--port", "--po": "--port", "--por": "--port", "--p": "",
		"--enable-metrics": "", "-p": "", "--": ""} {
		if got := Resolve(tok, "--port"); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", tok, got, want)
		}
	}
	// "--enable-metric" is a prefix of --enable-metrics and of --enable-metrics-for-all-schedulers.
	if !Has([]string{"--enable-metrics"}, "--enable-metrics") || Has([]string{"--enable-metric"}, "--enable-metrics") {
		t.Error("Has: abbreviations")
	}
}

func FuzzLast(f *testing.F) {
	f.Add("--port", "30000", "--po=1")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		_, _ = Last([]string{a, b, c}, "--port")
		_ = Has([]string{a, b, c}, "--enable-metrics")
	})
}

func TestSet(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/x --port 30000 --tp 1", "/x --port 30005 --tp 1"},
		{"/x --port=30000", "/x --port=30005"},
		{"/x --port 1 --port 2", "/x --port 1 --port 30005"},
		{"/x --por 30000", "/x --por 30005"}, // an abbreviation argparse takes
		{"/x --tp 1", "/x --tp 1 --port 30005"},
		{"/x --tp 1 -- --port 7", "/x --tp 1 --port 30005 -- --port 7"},
	} {
		in := strings.Fields(c.in)
		got := strings.Join(Set(in, "30005", "--port"), " ")
		if got != c.want {
			t.Errorf("Set(%q) = %q, want %q", c.in, got, c.want)
		}
		if v, _ := Last(strings.Fields(got), "--port"); v != "30005" {
			t.Errorf("%q reads as --port %q", got, v)
		}
		if strings.Join(in, " ") != c.in {
			t.Errorf("Set changed its input %q", c.in)
		}
	}
}
