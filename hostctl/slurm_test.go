package hostctl

import (
	"strings"
	"testing"
)

// TestJobStatesReadAsUnitStates: each job state as the classification reads it (docs/slurm.md).
func TestJobStatesReadAsUnitStates(t *testing.T) {
	for _, c := range []struct {
		line    string
		running bool
		class   Class // classify's verdict before ready, "" while running
		detail  string
	}{
		{"JobId=7 JobState=PENDING Reason=Resources ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=RUNNING Reason=None ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=COMPLETING Reason=None ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=2:0", false, ClassBadArgs, "code=exited, status=2"},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0", false, ClassCrashDuringStart, "code=exited, status=1"},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=0:9", false, ClassCrashDuringStart, "code=killed, status=9"},
		{"JobId=7 JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125", false, ClassOOM, "out of memory"},
		{"JobId=7 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:0", false, ClassCrashDuringStart, "result timeout"},
		{"JobId=7 JobState=CANCELLED Reason=None ExitCode=0:0", false, ClassCrashDuringStart, "code=killed, status=15"},
		{"JobId=7 JobState=COMPLETED Reason=None ExitCode=0:0", false, ClassCrashDuringStart, "code=exited, status=0"},
	} {
		f := scontrolFields(c.line)
		st := jobStateOf(f)
		if st.Running() != c.running {
			t.Errorf("%s: running %v", c.line, st.Running())
		}
		got := classify(st, nil, false)
		switch {
		case c.class == "" && got != nil:
			t.Errorf("%s: classified %v while it runs", c.line, got)
		case c.class != "" && (got == nil || got.Class != c.class || !strings.Contains(got.Detail, c.detail)):
			t.Errorf("%s: %v, want %s with %q", c.line, got, c.class, c.detail)
		}
	}
	for _, lost := range []string{"NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "REQUEUED"} {
		if nodeLost(scontrolFields("JobId=7 JobState="+lost+" NodeList=n1")) == "" {
			t.Errorf("%s is not read as a lost host", lost)
		}
	}
	if nodeLost(scontrolFields("JobId=7 JobState=FAILED")) != "" {
		t.Error("a failed job read as a lost host")
	}
}

func TestJobScriptHoldsTheLaunch(t *testing.T) {
	l := Launch{Argv: []string{"/opt/sglang/bin/python", "-m", "sglang.launch_server", "--tp-size", "2", "--api-key", "${KEY}", "--port", "30001"},
		Env: map[string]string{"KEY": "it's secret", "CUDA_VISIBLE_DEVICES": "5"}, Port: 30001}
	b, err := jobScript(SlurmOptions{Partition: "gpu", TimeLimit: 90 * 60e9, SbatchArgs: []string{"--qos=normal"}}, l, "specsweep.s.p", "/shared/o/specsweep.s.p.%j.out")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"#SBATCH --gres=gpu:2\n", "#SBATCH --partition=gpu\n", "#SBATCH --time=90\n", "#SBATCH --qos=normal\n",
		"#SBATCH --job-name=specsweep.s.p\n", "#SBATCH --output=/shared/o/specsweep.s.p.%j.out\n", "#SBATCH --no-requeue\n",
		"export KEY='it'\\''s secret'\n", "exec /opt/sglang/bin/python -m sglang.launch_server --tp-size 2 --api-key 'it'\\''s secret' --port 30001\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("the job script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "CUDA_VISIBLE_DEVICES") {
		t.Errorf("the job script sets CUDA_VISIBLE_DEVICES (Slurm's to set):\n%s", s)
	}
}
