package orchestrator

import (
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

func TestRedactorHidesEveryEnvValueAndLiteralCredential(t *testing.T) {
	spec := &sweep.Spec{
		Server: sweep.Server{
			Args: []string{"--port", "30000", "--api-key", "sk-literal-1", "--api-key=sk-literal-2", "--admin-api-key", "${ADMIN}"},
			Env:  map[string]string{"HF_TOKEN": "hf_abcdef", "SCALE": "0.05", "ON": "true", "N": "1", "LONG": "hf_abcdef-and-more"},
		},
		Methods: map[string]sweep.Method{"m": {Name: "m", Args: []string{"--hf-token", "hf_method_token"}, Env: map[string]string{"Q": `a"b\c`}}},
	}
	x := newRedactor(spec)
	in := `token hf_abcdef, longer hf_abcdef-and-more, keys sk-literal-1 sk-literal-2 ${ADMIN}, method hf_method_token, quoted "a\"b\\c" raw a"b\c; scale 0.05 true 1`
	want := `token <redacted>, longer <redacted>, keys <redacted> <redacted> ${ADMIN}, method <redacted>, quoted "<redacted>" raw <redacted>; scale 0.05 true 1`
	if got := x.text(in); got != want {
		t.Errorf("redacted:\n got %s\nwant %s", got, want)
	}
	if got := newRedactor(&sweep.Spec{}).text(in); got != in {
		t.Errorf("a spec without secrets changed the text: %s", got)
	}
	if got := (*redactor)(nil).text("x"); got != "x" {
		t.Errorf("nil redactor: %q", got)
	}
	if strings.Contains(x.text(strings.Repeat("hf_abcdef", 3)), "hf_") {
		t.Error("repeated secret left")
	}
}
