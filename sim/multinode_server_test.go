package sim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// startNode starts node rank of an nnodes launch whose rendezvous is on 127.0.0.1:distPort, each
// node on 4 simulated GPUs. env adds knobs; args more flags (after the multi-node ones: the last wins).
func startNode(t *testing.T, rank, nnodes, distPort int, env map[string]string, args ...string) *proc {
	t.Helper()
	e := map[string]string{"SGLANGSIM_GPUS": "4"}
	for k, v := range env {
		e[k] = v
	}
	full := append([]string{"--tp", fmt.Sprint(2 * nnodes), "--nnodes", fmt.Sprint(nnodes), "--node-rank", fmt.Sprint(rank),
		"--dist-init-addr", fmt.Sprintf("127.0.0.1:%d", distPort)}, args...)
	return startSim(t, e, full...)
}

// waitGone waits for p to end by SIGKILL (SGLang's kill_process_tree of itself) and for stderr to
// hold every pattern.
func (p *proc) waitGone(patterns ...string) {
	p.t.Helper()
	if ws := p.wait(20 * time.Second); !killedBySIGKILL(ws) {
		p.t.Errorf("status %v, want killed by SIGKILL", ws)
	}
	for _, s := range patterns {
		if !p.waitLog(regexp.MustCompile(regexp.QuoteMeta(s)), 5*time.Second) {
			p.t.Errorf("stderr lacks %q", s)
		}
	}
}

func (p *proc) lastExit() string {
	tl := p.truthLines()
	if len(tl) == 0 {
		return ""
	}
	return tl[len(tl)-1].Reason
}

func postStatus(p *proc, path string) int {
	resp, err := client.Post(p.base+path, "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
	if err != nil {
		return -1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Two nodes on loopback join, node 0 serves the OpenAI API and node 1 only SGLang's dummy health
// server; NCCL_DEBUG=INFO shows each node's transport. Killing node 1 while node 0 streams makes
// node 0 fail the stream and exit.
func TestMultiNodeServeThenNodeOneDies(t *testing.T) {
	t.Parallel()
	dist := testhost.FreePort(t)
	r0 := startNode(t, 0, 2, dist, map[string]string{"NCCL_DEBUG": "INFO"})
	r1 := startNode(t, 1, 2, dist, map[string]string{"NCCL_DEBUG": "INFO", "SGLANGSIM_NCCL_NET": "Socket"}, "--enable-metrics")
	r0.waitReady()
	r1.waitStatus("/health", 200, 10*time.Second)
	if code, body := r0.post("/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 4}); code != 200 || !strings.Contains(string(body), `"chat.completion"`) {
		t.Errorf("node 0 chat: %d %s", code, body)
	}
	for path, want := range map[string]int{"/health_generate": 200, "/ping": 200, "/metrics": 200, "/v1/models": 404, "/get_server_info": 404} {
		if got := r1.status(path); got != want {
			t.Errorf("node 1 GET %s: %d, want %d", path, got, want)
		}
	}
	if got := postStatus(r1, "/v1/chat/completions"); got != 404 {
		t.Errorf("node 1 POST /v1/chat/completions: %d, want 404", got)
	}
	if got := postStatus(r1, "/health"); got != 405 {
		t.Errorf("node 1 POST /health: %d, want 405", got)
	}
	if s := r1.stderr.String(); !strings.Contains(s, fmt.Sprintf("Dummy health check server started in background thread at 127.0.0.1:%d", r1.port)) ||
		!strings.Contains(s, " TP2] Init torch distributed begin.") || strings.Contains(s, " TP0]") {
		t.Errorf("node 1's log: want its ranks TP2, TP3 and the dummy server line:\n%s", tail(s, 30))
	}
	if !strings.Contains(r0.stdout.String(), "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB") || !strings.Contains(r1.stdout.String(), "NCCL INFO NET/Socket : Using [0]eth0:127.0.0.1<0>") {
		t.Errorf("NCCL transport lines missing:\nnode 0:\n%s\nnode 1:\n%s", tail(r0.stdout.String(), 10), tail(r1.stdout.String(), 10))
	}

	// A long stream on node 0, then node 1 dies.
	b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 100000, "ignore_eos": true, "stream": true})
	resp, err := client.Post(r0.base+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	_ = r1.cmd.Process.Signal(syscall.SIGKILL)
	rest, err := io.ReadAll(br)
	if err == nil && bytes.Contains(rest, []byte("[DONE]")) {
		t.Error("node 0 finished the stream after node 1 died")
	}
	r0.waitGone(" TP0] Scheduler hit an exception: Traceback", "Connection closed by peer [127.0.0.1]:",
		"SIGQUIT received. signum=<Signals.SIGQUIT: 3>, frame=None. It usually means one child failed.")
	if r := r0.lastExit(); r != "peer_lost" {
		t.Errorf("node 0 exit reason %q, want peer_lost", r)
	}
}

// Node 0 gone: the other node's scheduler sees its connection drop and the node ends too.
func TestMultiNodeNodeZeroDies(t *testing.T) {
	t.Parallel()
	dist := testhost.FreePort(t)
	r0 := startNode(t, 0, 2, dist, nil)
	r1 := startNode(t, 1, 2, dist, nil)
	r0.waitReady()
	r1.waitStatus("/health", 200, 10*time.Second)
	_ = r0.cmd.Process.Signal(syscall.SIGKILL)
	r1.waitGone(" TP2] Scheduler hit an exception: Traceback", "Connection closed by peer",
		"Received sigquit from a child process. It usually means the child failed.")
	if r := r1.lastExit(); r != "peer_lost" {
		t.Errorf("node 1 exit reason %q, want peer_lost", r)
	}
}

// A node missing at start fails every node after --dist-timeout with torch's words: node 0's store
// counts the ranks that joined, a joined node loses the store, a node with no store to reach times
// out connecting. (--dist-timeout 100 at time scale 0.01: one second.)
func TestMultiNodeMissingNode(t *testing.T) {
	t.Parallel()
	t.Run("node 2 of 3 missing", func(t *testing.T) {
		t.Parallel()
		dist := testhost.FreePort(t)
		r0 := startNode(t, 0, 3, dist, nil, "--tp", "3", "--dist-timeout", "100")
		r1 := startNode(t, 1, 3, dist, nil, "--tp", "3", "--dist-timeout", "100")
		r0.waitGone("torch.distributed.DistStoreError: Timed out after 101 seconds waiting for clients. 2/3 clients joined.",
			"Received sigquit from a child process. It usually means the child failed.")
		r1.waitGone(" TP1] Scheduler hit an exception: Traceback",
			"torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Failed to recv, got 0 bytes.")
		if r0.lastExit() != "rendezvous_timeout" || r1.lastExit() != "peer_lost" {
			t.Errorf("exit reasons %q, %q", r0.lastExit(), r1.lastExit())
		}
		if r0.status("/health") != -1 {
			t.Error("node 0 opened its port")
		}
	})
	t.Run("node 0 missing", func(t *testing.T) {
		t.Parallel()
		dist := testhost.FreePort(t)
		r1 := startNode(t, 1, 2, dist, nil, "--dist-timeout", "30")
		r1.waitGone(fmt.Sprintf("torch.distributed.DistNetworkError: The client socket has timed out after 30s while trying to connect to (127.0.0.1, %d).", dist))
	})
	t.Run("never-join", func(t *testing.T) {
		t.Parallel()
		dist := testhost.FreePort(t)
		r0 := startNode(t, 0, 2, dist, nil, "--dist-timeout", "30")
		r1 := startNode(t, 1, 2, dist, map[string]string{"SGLANGSIM_FAIL": "never-join"}, "--dist-timeout", "30")
		r0.waitGone("Timed out after 31 seconds waiting for clients. 2/4 clients joined.")
		time.Sleep(50 * time.Millisecond)
		if !r1.alive() {
			t.Error("the node that never joins ended")
		}
	})
}

// SGLANGSIM_FAIL=nccl-init-error on node 1: it fails creating its communicator, node 0 follows.
func TestMultiNodeNCCLInitError(t *testing.T) {
	t.Parallel()
	dist := testhost.FreePort(t)
	r0 := startNode(t, 0, 2, dist, nil)
	r1 := startNode(t, 1, 2, dist, map[string]string{"SGLANGSIM_FAIL": "nccl-init-error"})
	r1.waitGone(" TP2] Scheduler hit an exception: Traceback", "unhandled system error (run with NCCL_DEBUG=INFO for details)",
		"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")
	r0.waitGone("Connection closed by peer", "Received sigquit from a child process. It usually means the child failed.")
	if r1.lastExit() != "nccl_init_error" || r0.lastExit() != "peer_lost" {
		t.Errorf("exit reasons %q, %q", r1.lastExit(), r0.lastExit())
	}
}

// check_server_args refuses a TP size the nodes do not divide, as SGLang words it.
func TestMultiNodeArgErrorBinary(t *testing.T) {
	t.Parallel()
	p := startSim(t, nil, "--tp", "3", "--nnodes", "2", "--dist-init-addr", "127.0.0.1:1")
	if ws := p.wait(10 * time.Second); ws.ExitStatus() != 1 {
		t.Errorf("status %v, want exit 1", ws)
	}
	if s := p.stderr.String(); !strings.Contains(s, "in check_server_args\n") || !strings.HasSuffix(s, "AssertionError: tp_size must be divisible by number of nodes\n") {
		t.Errorf("stderr:\n%s", s)
	}
}

// SGLANGSIM_FAIL=node-crash:S on node 1: S simulated seconds after loading its scheduler dies;
// node 0 sees the connection drop and ends too.
func TestMultiNodeNodeCrash(t *testing.T) {
	t.Parallel()
	dist := testhost.FreePort(t)
	r0 := startNode(t, 0, 2, dist, nil)
	r1 := startNode(t, 1, 2, dist, map[string]string{"SGLANGSIM_FAIL": "node-crash:5"})
	r1.waitGone(" TP2] Scheduler hit an exception: Traceback", "an illegal memory access was encountered",
		"Received sigquit from a child process. It usually means the child failed.")
	r0.waitGone("Connection closed by peer")
	if r1.lastExit() != "crash" || r0.lastExit() != "peer_lost" {
		t.Errorf("exit reasons %q, %q", r1.lastExit(), r0.lastExit())
	}
}
