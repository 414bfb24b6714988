package orchestrator

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// applyFake is a host that applies as scripted and fails the test on a call it did not expect.
type applyFake struct {
	t           *testing.T
	applyErr    error
	readyErr    error
	rollbackErr error
	calls       []string
	launch      hostctl.Launch
	rec         hostctl.AppliedRecord
}

func (f *applyFake) Apply(ctx context.Context, l hostctl.Launch, rec hostctl.AppliedRecord) (hostctl.Instance, error) {
	f.calls = append(f.calls, "apply")
	f.launch, f.rec = l, rec
	if f.applyErr != nil {
		return nil, f.applyErr
	}
	return &applyInstance{f: f}, nil
}
func (f *applyFake) Rollback(ctx context.Context) error {
	f.calls = append(f.calls, "rollback")
	return f.rollbackErr
}
func (f *applyFake) Commit(ctx context.Context) error {
	f.calls = append(f.calls, "commit")
	return nil
}

// applyInstance is the applied server: ready or not, as scripted; nothing else may be asked of it.
type applyInstance struct {
	hostctl.Instance // nil: any other call panics, failing the test
	f                *applyFake
}

func (i *applyInstance) WaitReady(ctx context.Context) (hostctl.Ready, error) {
	i.f.calls = append(i.f.calls, "ready")
	if i.f.readyErr != nil {
		return hostctl.Ready{}, i.f.readyErr
	}
	return hostctl.Ready{Elapsed: time.Second, ServerInfo: []byte(`{"version":"0.5.10"}`)}, nil
}
func (i *applyInstance) BaseURL() string          { return "http://127.0.0.1:1" }
func (i *applyInstance) HTTPClient() *http.Client { return http.DefaultClient }
func (i *applyInstance) Address() string          { return "" }

// TestApplyRollsBackEachFailure: a start the host refuses, a server that never gets ready and a
// rollback that fails too each end the apply rolled back (or rollback_failed) with the failure's
// evidence in the history; a server that comes up is committed.
func TestApplyRollsBackEachFailure(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec, err := sweep.Parse("s.yaml", []byte(`version: 1
name: s
hosts: [{name: gpu1, address: gpu1.example, gpus: 1}]
server: {command: [/opt/sglang/bin/python], env: {HF_TOKEN: hf_secret_value}}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8, output_check: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	pt := spec.Plan().Points[0]
	sw, err := db.CreateSweep(ctx, store.NewSweep{Name: "s", SpecHash: "h", SpecText: "name: s"}, []store.NewHost{{Name: "gpu1", Driver: "ssh", GPUs: 1}},
		[]store.NewPoint{{ID: pt.ID, Method: "baseline", Baseline: true, TP: 1, Argv: pt.Argv, Runs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bad := &hostctl.Failure{Class: hostctl.ClassBadArgs, Detail: "exit 2", Evidence: []string{"error: unrecognized arguments: --no-such-flag",
		"environ: HF_TOKEN=hf_secret_value"}}
	for _, c := range []struct {
		name                 string
		fake                 applyFake
		result, failure      string
		calls, evidence, eng string
	}{
		{"refused at start", applyFake{applyErr: bad}, store.ApplyRolledBack, "start", "apply rollback", "unrecognized arguments", ""},
		{"never ready", applyFake{readyErr: bad}, store.ApplyRolledBack, "start", "apply ready rollback", "unrecognized arguments", ""},
		{"unreachable", applyFake{applyErr: errors.New("dial tcp: no route")}, store.ApplyRolledBack, "host", "apply rollback", "", ""},
		{"rollback fails", applyFake{readyErr: bad, rollbackErr: errors.New("ssh: gone")}, store.ApplyRollbackFailed, "start", "apply ready rollback", "", ""},
		{"ready", applyFake{}, store.ApplyApplied, "", "apply ready commit", "", "0.5.10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.fake
			f.t = t
			out, err := Apply(ctx, db, &f, ApplyRequest{SweepID: sw, Sweep: "s", Spec: spec, Host: "gpu1", Unit: "sglang.service", Point: pt,
				Choice: "point", Label: "baseline tp=1", By: "me@here"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.calls, " "); got != c.calls {
				t.Errorf("calls %q, want %q", got, c.calls)
			}
			if out.Result != c.result || string(out.Failure) != c.failure || out.Engine != c.eng {
				t.Errorf("outcome %+v", out)
			}
			if f.launch.Env["HF_TOKEN"] != "hf_secret_value" || f.rec.Point != pt.ID || f.rec.Label != "baseline tp=1" {
				t.Errorf("launch env %v, record %+v: the planned point's, secrets included", f.launch.Env, f.rec)
			}
			hist, err := db.Applies(ctx, "gpu1", 1)
			if err != nil || len(hist) != 1 || hist[0].ID != out.ID || hist[0].Result != c.result || hist[0].Failure != c.failure ||
				!strings.Contains(string(hist[0].Evidence), c.evidence) || hist[0].FinishedAt.IsZero() ||
				strings.Contains(string(hist[0].Evidence)+hist[0].Detail+strings.Join(out.Evidence, " "), "hf_secret_value") {
				t.Errorf("history %+v (%v)", hist, err)
			}
		})
	}
}
