package sim

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// A TP group over two nodes of four GPUs holds on each GPU what one node of eight holds, and each
// step adds the all-reduces across the nodes: slower per step, slower still over sockets.
func TestMultiNodeStepCost(t *testing.T) {
	one := mustModel(t, "qwen3.5-122b-a10b", eagle3(3)...)
	one8 := mustModel(t, "qwen3.5-122b-a10b", append(eagle3(3), "--tp", "8")...)
	two := mustModel(t, "qwen3.5-122b-a10b", append(eagle3(3), "--tp", "8", "--nnodes", "2", "--dist-init-addr", "10.231.250.1:5000")...)
	if one.NNodes != 1 || two.NNodes != 2 {
		t.Fatalf("nodes: %d, %d", one.NNodes, two.NNodes)
	}
	if two.Plan.WeightsGB != one8.Plan.WeightsGB || two.Plan.MaxTotalTokens != one8.Plan.MaxTotalTokens {
		t.Errorf("per-GPU memory differs: 2x4 weights %.2f GB, %d tokens; 1x8 %.2f GB, %d tokens",
			two.Plan.WeightsGB, two.Plan.MaxTotalTokens, one8.Plan.WeightsGB, one8.Plan.MaxTotalTokens)
	}
	for _, bs := range []int{1, 16, 64} {
		a, b := one8.StepTime(bs, 2000*bs), two.StepTime(bs, 2000*bs)
		if b <= a {
			t.Errorf("bs %d: step over 2x4 %v, not slower than on one node %v", bs, b, a)
		}
		sock := *two
		sock.Net = netDefaults("Socket")
		if s := sock.StepTime(bs, 2000*bs); s <= b {
			t.Errorf("bs %d: step over sockets %v, not slower than over IB %v", bs, s, b)
		}
	}
	if two.PrefillTime(4096) <= one8.PrefillTime(4096) {
		t.Errorf("prefill over 2x4 %v, not slower than on one node %v", two.PrefillTime(4096), one8.PrefillTime(4096))
	}
	// More nodes move a larger share of each all-reduce across them.
	if interNodeMs(netDefaults("IB"), 4, 64, 48) <= interNodeMs(netDefaults("IB"), 2, 64, 48) {
		t.Error("4 nodes cost no more than 2")
	}
	if interNodeMs(netDefaults("IB"), 1, 64, 48) != 0 {
		t.Error("one node pays an inter-node cost")
	}
}

// Node k of a launch over nodes runs TP ranks k*per .. (k+1)*per-1 on its own GPUs from ordinal 0.
func TestMultiNodeGPUs(t *testing.T) {
	a, _, err := ParseArgs([]string{"--model-path", "/m", "--tp", "8", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "h:1"})
	if err != nil {
		t.Fatal(err)
	}
	g := AssignGPUs(a, []int{0, 1, 2, 3})
	if g.BadRank != -1 || !slices.Equal(g.GPUs, []int{0, 1, 2, 3}) {
		t.Errorf("node 1 of 2 at tp 8 on 4 GPUs: %+v", g)
	}
	m, err := MultiOf(a)
	if err != nil || m.FirstRank() != 4 || m.Host != "h" || m.Port != 1 || m.TimeoutSec != 600 {
		t.Errorf("MultiOf: %+v, %v", m, err)
	}
	g = AssignGPUs(a, []int{0, 1})
	if g.BadRank != 6 || g.BadOrdinal != 2 {
		t.Errorf("node 1 with 2 GPUs: bad rank %d ordinal %d, want 6, 2", g.BadRank, g.BadOrdinal)
	}
}

// check_server_args' multi-node rule and what the simulator refuses besides.
func TestMultiNodeArgErrors(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
		le   bool
	}{
		{[]string{"--tp", "3", "--nnodes", "2"}, "AssertionError: tp_size must be divisible by number of nodes", true},
		{[]string{"--tp", "2", "--nnodes", "0"}, "ZeroDivisionError: integer modulo by zero", true},
		{[]string{"--tp", "2", "--nnodes", "2", "--node-rank", "2"}, "--node-rank 2 is not one of the 2 nodes", false},
		{[]string{"--tp", "2", "--node-rank", "-1"}, "--node-rank -1 is not one of the 1 nodes", false},
	} {
		a, _, err := ParseArgs(append([]string{"--model-path", "/m"}, c.argv...))
		if err != nil {
			t.Fatalf("%v: %v", c.argv, err)
		}
		err = checkServerArgs(a)
		var le *LaunchError
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &le) != c.le {
			t.Errorf("%v: %v, want %q (launch error %v)", c.argv, err, c.want, c.le)
		}
	}
	if a, _, err := ParseArgs([]string{"--model-path", "/m", "--tp", "4", "--nnodes", "2", "--node-rank", "1"}); err != nil || checkServerArgs(a) != nil {
		t.Errorf("tp 4 over 2 nodes refused")
	}
	a, _, _ := ParseArgs([]string{"--model-path", "/m", "--nnodes", "2", "--tp", "2", "--dist-init-addr", "nohost"})
	if _, err := MultiOf(a); err == nil {
		t.Error("--dist-init-addr without a port accepted")
	}
}

func TestParseFailMultiNode(t *testing.T) {
	for in, want := range map[string]FailMode{
		"never-join":      {Kind: "never-join"},
		"nccl-init-error": {Kind: "nccl-init-error"},
		"node-crash:2.5":  {Kind: "node-crash", Seconds: 2.5},
	} {
		if got, err := ParseFail(in); err != nil || got != want {
			t.Errorf("ParseFail(%q) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"node-crash", "node-crash:x", "never-join:1"} {
		if _, err := ParseFail(in); err == nil {
			t.Errorf("ParseFail(%q) accepted", in)
		}
	}
}

func TestNCCLNetKnobs(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := LoadConfig(env(nil))
	if err != nil || c.Net != netDefaults("IB") || c.NCCLDebugInfo {
		t.Errorf("defaults: %+v, %v", c.Net, err)
	}
	c, err = LoadConfig(env(map[string]string{"SGLANGSIM_NCCL_NET": "socket", "SGLANGSIM_NET_GBPS": "12.5", "NCCL_DEBUG": "info"}))
	if err != nil || c.Net.Name != "Socket" || c.Net.GBps != 12.5 || !c.NCCLDebugInfo {
		t.Errorf("socket: %+v, %v", c.Net, err)
	}
	for _, kv := range []map[string]string{{"SGLANGSIM_NCCL_NET": "RoCE"}, {"SGLANGSIM_NET_GBPS": "0"}, {"SGLANGSIM_NET_LATENCY_US": "-1"}} {
		if _, err := LoadConfig(env(kv)); err == nil {
			t.Errorf("%v accepted", kv)
		}
	}
	lines := strings.Join(ncclInfoLines("h", 7, 0, "10.231.250.1", "IB", true), "\n")
	if !strings.Contains(lines, "h:7:8 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB") || !strings.Contains(lines, "OOB eth0:10.231.250.1<0>") {
		t.Errorf("IB lines:\n%s", lines)
	}
	lines = strings.Join(ncclInfoLines("h", 7, 1, "10.231.250.1", "Socket", false), "\n")
	if !strings.Contains(lines, "h:7:9 [1] NCCL INFO NET/Socket : Using [0]eth0:10.231.250.1<0>") || strings.Contains(lines, "NCCL version") {
		t.Errorf("Socket lines:\n%s", lines)
	}
}

// launch_dummy_health_check_server per release: /ping from 0.5.4, /metrics (with
// --enable-metrics) from 0.5.2, never an OpenAI route.
func TestDummyHealthServerPerEra(t *testing.T) {
	for _, c := range []struct {
		era           string
		ping, metrics int
	}{{"0.4.2", 404, 404}, {"0.4.9.post1", 404, 404}, {"0.5.3.post2", 404, 200}, {"0.5.4", 200, 200}, {"main", 200, 200}} {
		era, err := LookupEra(c.era)
		if err != nil {
			t.Fatal(err)
		}
		a, _, err := ParseArgsEra(ParseOptions{Era: era}, []string{"--model-path", "/m", "--enable-metrics"})
		if err != nil {
			t.Fatal(err)
		}
		var logBuf, acc strings.Builder
		s := &Server{Args: a, log: NewLogger(&logBuf, &acc)}
		h := s.dummyHealthHandler()
		for path, want := range map[string]int{"/health": 200, "/health_generate": 200, "/ping": c.ping, "/metrics": c.metrics,
			"/v1/models": 404, "/generate": 404} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != want {
				t.Errorf("%s: GET %s = %d, want %d", c.era, path, rec.Code, want)
			}
			if want == 200 && path != "/metrics" && rec.Body.Len() != 0 {
				t.Errorf("%s: GET %s body %q, want empty", c.era, path, rec.Body.String())
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}")))
		if rec.Code != 404 || rec.Body.String() != `{"detail":"Not Found"}` {
			t.Errorf("%s: POST /v1/chat/completions = %d %s", c.era, rec.Code, rec.Body.String())
		}
		if c.era == "0.4.2" && !strings.Contains(acc.String(), `"GET /health HTTP/1.1" 200 OK`) {
			t.Errorf("0.4.2: no uvicorn access line: %q", acc.String())
		}
		if c.era != "0.4.2" && acc.Len() != 0 {
			t.Errorf("%s: access lines at uvicorn's warning level: %q", c.era, acc.String())
		}
	}
}
