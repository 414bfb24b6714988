package hostctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/specsweep/specsweep/internal/defaults"
	"github.com/specsweep/specsweep/sweep"
)

// openGroup is an ssh host of several nodes (hosts[].nodes, docs/spec.md "Points over several
// nodes"): one systemd host per node, each its own SSH connection and unit. It runs one point per
// node at once (slot k is node k): a point whose tp fits one node runs on its slot's node; a larger
// one on the first tp/gpus nodes, one SGLang rank each (--nnodes, --node-rank, --dist-init-addr),
// once those nodes are free (a node runs one point at a time: a lock per node), started together
// and followed as one instance: the first rank that fails fails the point with that rank's
// evidence, and every rank is stopped.
type openGroup struct {
	h     sweep.Host
	o     Options
	nodes []*openSSH
	locks []chan struct{} // a token per node, held by the point that runs there
	slots []*groupSlot

	sweepMu sync.Mutex // held while the nodes are rid of what a killed run left
	swept   bool
}

var _ Driver = (*openGroup)(nil)

func newGroup(h sweep.Host, o Options) *openGroup {
	g := &openGroup{h: h, o: o}
	for i, nd := range h.Nodes {
		nh := sweep.Host{Name: nd.Name, Address: nd.Address, User: nd.User, IdentityFile: nd.IdentityFile,
			KnownHosts: nd.KnownHosts, Unit: h.Unit, CreateUnit: h.CreateUnit, Driver: sweep.DriverSSH, GPUs: h.GPUs}
		no := o
		no.ssh = nil
		if i < len(o.nodeSSH) {
			no.ssh = &o.nodeSSH[i]
		}
		d := &openSSH{h: nh, o: no}
		d.conn.dial = d.dial
		g.nodes = append(g.nodes, d)
		g.locks = append(g.locks, make(chan struct{}, 1))
		g.slots = append(g.slots, &groupSlot{g: g, k: i})
	}
	return g
}

func (g *openGroup) Name() string { return g.h.Name }

// Slots: a point per node at once; the group places them on its nodes itself.
func (g *openGroup) Slots() Slots { return Slots{N: len(g.nodes)} }

func (g *openGroup) Slot(k int) Host { return g.slots[k] }

// Start runs the launch as slot 0 does (the group used as one host).
func (g *openGroup) Start(ctx context.Context, l Launch) (Instance, error) {
	return g.slots[0].Start(ctx, l)
}

// span is how many nodes the launch takes on the group (launchNodes).
func (g *openGroup) span(l Launch) (int, error) { return launchNodes(l, g.h) }

// launchNodes is how many nodes of h a launch takes: its --tp-size (as SGLang reads it) over h's GPUs
// per node, whole nodes only (sweep.Host.Span).
func launchNodes(l Launch, h sweep.Host) (int, error) {
	tp, err := launchTP(l)
	if err != nil {
		return 0, err
	}
	k := h.Span(tp)
	if k == 0 {
		return 0, fmt.Errorf("tp %d is not a whole number of nodes of %d GPUs, up to %d (a point spans whole nodes)", tp, h.GPUs, h.NodeCount())
	}
	return k, nil
}

// acquire takes the nodes' tokens, in order (two points never wait on each other's), or gives back
// what it took when ctx ends.
func (g *openGroup) acquire(ctx context.Context, nodes []int) error {
	for i, n := range nodes {
		select {
		case g.locks[n] <- struct{}{}:
		case <-ctx.Done():
			g.release(nodes[:i])
			return ctx.Err()
		}
	}
	return nil
}

func (g *openGroup) release(nodes []int) {
	for _, n := range nodes {
		<-g.locks[n]
	}
}

// startOn starts the launch on nodes (rank r on nodes[r]): each rank's unit with the launch's argv
// and, over several nodes, that rank's flags, side by side. A rank that cannot start stops the
// others.
func (g *openGroup) startOn(ctx context.Context, l Launch, nodes []int) (*groupInstance, error) {
	k := len(nodes)
	gi := &groupInstance{ranks: make([]Instance, k), names: make([]string, k), nodes: nodes,
		clock: orRealClock(g.o.Clock), join: l.withDefaults().JoinTimeout}
	for r, n := range nodes {
		gi.names[r] = g.nodes[n].h.Name
	}
	if k == 1 {
		in, err := g.nodes[nodes[0]].Start(ctx, l)
		if err != nil {
			return nil, nodeFailure(err, gi.names[0])
		}
		gi.ranks[0] = in
		return gi, nil
	}
	dist, err := g.distInit(ctx, nodes[0])
	if err != nil {
		return nil, err
	}
	gi.dist = dist
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r, n := range nodes {
		lr := l
		lr.Argv = slices.Concat(l.Argv, sweep.RankArgs(k, r, dist))
		// Ranks >= 1 serve SGLang's dummy health server only (engine.py _launch_subprocesses).
		lr.HealthOnly = r > 0
		wg.Go(func() { gi.ranks[r], errs[r] = g.nodes[n].Start(ctx, lr) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			gi.stopStarted(context.WithoutCancel(ctx))
			return nil, rankFailure(err, r, gi.names[r])
		}
	}
	return gi, nil
}

// sweepLeftovers stops, once per run and before any point starts, the servers a killed run left on
// the nodes (each node's Start would stop its own, but not before another node's rank of a new
// point waited for a rank of the old one).
func (g *openGroup) sweepLeftovers(ctx context.Context) error {
	g.sweepMu.Lock()
	defer g.sweepMu.Unlock()
	if g.swept {
		return nil
	}
	errs := make([]error, len(g.nodes))
	var wg sync.WaitGroup
	for i, n := range g.nodes {
		wg.Go(func() {
			r, err := n.conn.get(ctx)
			if err == nil {
				err = r.stopLeftover(ctx)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: stopping what an earlier run left: %w", n.h.Name, wrapUnreachable(err))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	g.swept = true
	return nil
}

// groupSlot is slot k of a group: its single-node points run on node k, its spanning points on the
// first nodes they need.
type groupSlot struct {
	g *openGroup
	k int

	mu   sync.Mutex
	held []int          // the nodes of the slot's point, until it stops or the slot starts another
	last *groupInstance // for Provenance
}

var _ Host = (*groupSlot)(nil)

func (s *groupSlot) Name() string { return s.g.h.Name }

// Start waits until the nodes the launch needs are free, then starts it there.
func (s *groupSlot) Start(ctx context.Context, l Launch) (Instance, error) {
	s.releaseHeld() // the slot's previous point is over
	g := s.g
	k, err := g.span(l)
	if err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: fmt.Sprintf("host %s: %v", g.h.Name, err), Err: err}
	}
	nodes := []int{s.k}
	if k > 1 {
		nodes = make([]int, k)
		for i := range nodes {
			nodes[i] = i
		}
	}
	if err := g.sweepLeftovers(ctx); err != nil {
		return nil, err
	}
	if err := g.acquire(ctx, nodes); err != nil {
		return nil, err
	}
	gi, err := g.startOn(ctx, l, nodes)
	if err != nil {
		g.release(nodes)
		return nil, err
	}
	s.mu.Lock()
	s.held, s.last = nodes, gi
	s.mu.Unlock()
	gi.onStop = s.releaseHeld
	return gi, nil
}

// releaseHeld gives back the nodes of the slot's point (once).
func (s *groupSlot) releaseHeld() {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	s.g.release(held)
}

// Restore gives the slot's nodes back; the nodes themselves are the group's to restore.
func (s *groupSlot) Restore(ctx context.Context) error {
	s.releaseHeld()
	return nil
}

func (s *groupSlot) Provenance(ctx context.Context) (Provenance, error) {
	s.mu.Lock()
	gi := s.last
	s.mu.Unlock()
	return s.g.provenanceOf(ctx, gi, s.k)
}

// Close: the nodes' connections are the group's.
func (s *groupSlot) Close() error { return nil }

// distInitPorts is how many ports from --dist-init-addr's SGLang binds on rank 0's node (the port,
// then port_base = port + 1 .. + 5 with DP attention: PortArgs.init_new, server_args.py).
const distInitPorts = 6

// distInitFirst is where the search for a free --dist-init-addr port starts: torch's customary
// rendezvous port (MASTER_PORT 29500).
const distInitFirst = 29500

// distInit is --dist-init-addr: node n's (rank 0's) address as its SSH connection resolved it (an
// ~/.ssh/config alias is no name the other nodes know), and the spec's port or the first run of
// distInitPorts ports from 29500 that nothing listens on at that node now.
func (g *openGroup) distInit(ctx context.Context, n int) (string, error) {
	r, err := g.nodes[n].conn.get(ctx)
	if err != nil {
		return "", rankFailure(err, 0, g.nodes[n].h.Name)
	}
	host, _, err := net.SplitHostPort(r.conn.Addr())
	if err != nil {
		host = sweep.AddressHost(g.h.Nodes[n].Address)
	}
	if g.h.DistInitPort > 0 {
		return hostPort(host, g.h.DistInitPort), nil
	}
	// /proc/net/tcp{,6} list the listening sockets (state 0A) with their ports in hex: no tool needed.
	out, err := r.run(ctx, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true", 15*time.Second)
	if err != nil {
		return "", rankFailure(wrapUnreachable(fmt.Errorf("reading the listening ports: %w", err)), 0, g.nodes[n].h.Name)
	}
	busy := listeningPorts(string(out.Stdout))
	for p := distInitFirst; p+distInitPorts-1 <= 65535; p++ {
		free := true
		for q := p; q < p+distInitPorts; q++ {
			if busy[q] {
				free, p = false, q // go on after the busy one
				break
			}
		}
		if free {
			return hostPort(host, p), nil
		}
	}
	return "", &Failure{Class: ClassLaunchFailed, Detail: fmt.Sprintf("host %s: no %d free ports from %d on %s for --dist-init-addr", g.h.Name, distInitPorts, distInitFirst, g.nodes[n].h.Name)}
}

var reListen = regexp.MustCompile(`^\s*\d+:\s+[0-9A-Fa-f]+:([0-9A-Fa-f]{4})\s+[0-9A-Fa-f]+:[0-9A-Fa-f]{4}\s+0A\s`)

// listeningPorts reads /proc/net/tcp text: the local ports of the sockets in state LISTEN (0A).
func listeningPorts(text string) map[int]bool {
	out := map[int]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if m := reListen.FindStringSubmatch(line); m != nil {
			if p, err := strconv.ParseUint(m[1], 16, 16); err == nil {
				out[int(p)] = true
			}
		}
	}
	return out
}

// rankFailure names the rank and its node in a failure (a *Failure keeps its class).
func rankFailure(err error, rank int, node string) error {
	return prefixFailure(err, fmt.Sprintf("rank %d on %s", rank, node))
}

// nodeFailure names the node of a group a single-node point failed on.
func nodeFailure(err error, node string) error { return prefixFailure(err, node) }

func prefixFailure(err error, who string) error {
	if f, ok := AsFailure(err); ok {
		g := *f
		g.Detail = who + ": " + f.Detail
		return &g
	}
	return fmt.Errorf("%s: %w", who, err)
}

// Restore restores every node (each one's units, drop-ins and slots), all of them even when one
// fails.
func (g *openGroup) Restore(ctx context.Context) error {
	errs := make([]error, len(g.nodes))
	var wg sync.WaitGroup
	for i, n := range g.nodes {
		wg.Go(func() { errs[i] = n.Restore(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Provenance is slot 0's point's (the group used as one host).
func (g *openGroup) Provenance(ctx context.Context) (Provenance, error) {
	return g.slots[0].Provenance(ctx)
}

// provenanceOf is rank 0's provenance of gi (of node k when nothing ran), with every rank's machine,
// engine and network transport.
func (g *openGroup) provenanceOf(ctx context.Context, gi *groupInstance, k int) (Provenance, error) {
	nodes := []int{k}
	if gi != nil {
		nodes = gi.nodes
	}
	provs := make([]Provenance, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for r, n := range nodes {
		wg.Go(func() { provs[r], errs[r] = g.nodes[n].Provenance(ctx) })
	}
	wg.Wait()
	p := provs[0]
	if errs[0] != nil {
		return p, rankFailure(errs[0], 0, g.nodes[nodes[0]].h.Name)
	}
	if len(nodes) == 1 {
		return p, nil
	}
	p.DistInit = gi.dist
	for r, n := range nodes {
		rp := RankProvenance{Rank: r, Node: g.nodes[n].h.Name, Address: g.h.Nodes[n].Address,
			Hostname: provs[r].Hostname, GPUs: provs[r].GPUs, EngineVer: provs[r].EngineVer, Argv: provs[r].Argv}
		if errs[r] != nil {
			rp.CollectedErr = errs[r].Error()
		}
		if lines, err := gi.ranks[r].Logs(ctx); err == nil {
			rp.Transport = NCCLTransport(lines)
		}
		p.Ranks = append(p.Ranks, rp)
	}
	return p, nil
}

// reNCCLNet matches NCCL's line naming the network it uses between nodes, printed at
// communicator init under NCCL_DEBUG=INFO: "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ..." or
// "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>".
var reNCCLNet = regexp.MustCompile(`NCCL INFO NET/(IB|Socket|OFI|[A-Za-z0-9_]+) ?: Using (.*)`)

// NCCLTransport is the network a rank's NCCL says it uses ("IB: [0]mlx5_0:1/IB"), from its log;
// "" when the log does not say (NCCL_DEBUG unset).
func NCCLTransport(lines []string) string {
	for _, l := range lines {
		if m := reNCCLNet.FindStringSubmatch(l); m != nil {
			return m[1] + ": " + strings.TrimSpace(clipLine(m[2], 120))
		}
	}
	return ""
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (g *openGroup) Close() error {
	var errs []error
	for _, n := range g.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// Doctor checks every node, each check named after its node.
func (g *openGroup) Doctor(ctx context.Context) []Check {
	out := make([][]Check, len(g.nodes))
	var wg sync.WaitGroup
	for i, n := range g.nodes {
		wg.Go(func() { out[i] = n.Doctor(ctx) })
	}
	wg.Wait()
	var all []Check
	for i, cs := range out {
		for _, c := range cs {
			c.Host = g.nodes[i].h.Name
			all = append(all, c)
		}
	}
	return all
}

// Clean cleans every node; what each removed is named after its node.
func (g *openGroup) Clean(ctx context.Context) (Cleanup, error) {
	var all Cleanup
	var errs []error
	for _, n := range g.nodes {
		c, err := n.Clean(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.h.Name, err))
			continue
		}
		for _, r := range c.Removed {
			all.Removed = append(all.Removed, n.h.Name+": "+r)
		}
		all.Unit = c.Unit
		if all.UnitState == "" || all.UnitState == c.UnitState {
			all.UnitState = c.UnitState
		} else {
			all.UnitState = "mixed"
		}
	}
	return all, errors.Join(errs...)
}

// groupInstance is the ranks of one point, followed as one server: rank 0 serves HTTP.
type groupInstance struct {
	ranks []Instance
	nodes []int    // each rank's node, by index in the group
	names []string // each rank's node
	dist  string   // --dist-init-addr ("" on one node)
	clock Clock
	join  time.Duration // Launch.JoinTimeout
	// onStop gives the nodes back once the ranks stopped (the slot's).
	onStop func()
}

var _ Instance = (*groupInstance)(nil)

// ID is the ranks' invocations, rank 0's first.
func (gi *groupInstance) ID() string {
	ids := make([]string, 0, len(gi.ranks))
	for _, in := range gi.ranks {
		if in != nil {
			ids = append(ids, in.ID())
		}
	}
	return strings.Join(ids, "+")
}

// WaitReady waits for every rank side by side (rank 0's /health and a generation, the others'
// health servers), and watches the ranks meet at torch's rendezvous. A rank that fails ends the
// wait: its failure, naming the rank and its node. One rank's death ends the others within moments
// (SGLang's peer-loss path), so the failures of a short grace are gathered and the rank whose server
// exited first is the one reported.
func (gi *groupInstance) WaitReady(ctx context.Context) (Ready, error) {
	if len(gi.ranks) == 1 {
		r, err := gi.ranks[0].WaitReady(ctx)
		return r, gi.named(err, 0)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		rank  int
		ready Ready
		err   error
	}
	results := make(chan result, len(gi.ranks))
	for r, in := range gi.ranks {
		go func() {
			ready, err := in.WaitReady(wctx)
			results <- result{r, ready, err}
		}()
	}
	joinc := make(chan *Failure, 1)
	go func() {
		// A rank that never meets the others at the rendezvous fails the point after JoinTimeout,
		// not after torch's own timeout (10 minutes by default).
		joinc <- gi.watchJoin(wctx)
	}()
	joined := false
	defer func() {
		cancel()
		if !joined {
			<-joinc
		}
	}()
	jc := joinc
	var (
		ready    Ready
		fails    = map[int]error{}
		joinFail *Failure
		grace    <-chan time.Time
	)
	for pending := len(gi.ranks); pending > 0; {
		select {
		case res := <-results:
			pending--
			switch {
			case res.err == nil && res.rank == 0:
				ready = res.ready
			case res.err != nil && wctx.Err() == nil:
				fails[res.rank] = res.err
				if grace == nil {
					grace = orRealClock(gi.clock).After(culpritGrace)
				}
			}
		case f := <-jc:
			joined, jc = true, nil
			if f != nil && len(fails) == 0 {
				joinFail = f
				cancel()
			}
		case <-grace:
			cancel()
		}
	}
	if err := ctx.Err(); err != nil {
		return Ready{}, err
	}
	if len(fails) > 0 {
		r := gi.culprit(ctx, fails)
		return Ready{}, gi.named(fails[r], r)
	}
	if joinFail != nil {
		return Ready{}, joinFail
	}
	return ready, nil
}

// culpritGrace is how long WaitReady gathers the failures of other ranks after the first: SGLang's
// nodes end within moments of a peer's death.
const culpritGrace = 2 * time.Second

// rePeerLost matches what a rank logs when another rank went away, not of its own fault: gloo's
// "Connection closed by peer" (the schedulers' broadcast over the TP CPU group, scheduler.py
// recv_requests), torch's store losing its server ("Failed to recv, got 0 bytes", "Connection was
// likely closed"), a reset connection (docs/sglangsim.md, "A node dying").
var rePeerLost = regexp.MustCompile(`Connection closed by peer|Failed to recv, got 0 bytes|Connection was likely closed|Connection reset by peer`)

// culprit is the failed rank that did not just follow another: of the failed ranks whose logs do not
// say a peer went away, the one whose server exited first (its unit's ExecMainExit, whole seconds),
// the lowest rank on a tie; if every failed rank says so, the same over all of them.
func (gi *groupInstance) culprit(ctx context.Context, fails map[int]error) int {
	var own, all []int
	for r := range gi.ranks {
		if _, ok := fails[r]; !ok {
			continue
		}
		all = append(all, r)
		lines, _ := gi.ranks[r].Logs(ctx)
		if !anyMatch(lines, rePeerLost) {
			own = append(own, r)
		}
	}
	if len(own) == 0 {
		own = all
	}
	best, bestAt := -1, time.Time{}
	for _, r := range own {
		var at time.Time
		if f, ok := AsFailure(fails[r]); ok {
			at = f.State.ExecMainExit
		}
		if best < 0 || (!at.IsZero() && (bestAt.IsZero() || at.Before(bestAt))) {
			best, bestAt = r, at
		}
	}
	return best
}

// ModelRunner.init_torch_distributed's lines around torch's rendezvous and the world group's
// set-up (python/sglang/srt/model_executor/model_runner.py, sgl-project/sglang at b437f6be4).
var (
	reJoinBegin = regexp.MustCompile(`Init torch distributed begin\.`)
	reJoinEnd   = regexp.MustCompile(`Init torch distributed ends\.`)
)

// joinPoll is how often the rendezvous watch reads the ranks' logs.
const joinPoll = 500 * time.Millisecond

// rankLogs reads, for each rank of a point that spans nodes, the log lines it has printed.
type rankLogs func(ctx context.Context) [][]string

// watchJoin follows the ranks' logs from the first "Init torch distributed begin." until every
// rank logged "ends." (nil), or join passed (a crash_during_start naming the ranks that did not
// begin, else those that did not end, by names[rank], and the rendezvous dist()), or ctx ended (nil).
func watchJoin(ctx context.Context, clock Clock, join time.Duration, read rankLogs, names []string, dist func() string) *Failure {
	clock, join = orRealClock(clock), cmp.Or(join, defaults.JoinTimeout)
	var since time.Time // when the first rank began
	for {
		logs := read(ctx)
		began, ended := make([]bool, len(logs)), make([]bool, len(logs))
		all := len(logs) > 0
		for r, lines := range logs {
			began[r], ended[r] = anyMatch(lines, reJoinBegin), anyMatch(lines, reJoinEnd)
			all = all && ended[r]
			if began[r] && since.IsZero() {
				since = clock.Now()
			}
		}
		if all {
			return nil
		}
		if !since.IsZero() && clock.Now().Sub(since) > join {
			return joinFailure(logs, began, ended, names, dist(), join)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clock.After(joinPoll):
		}
	}
}

// joinFailure names the ranks that kept the others waiting: those that never began the rendezvous,
// else those that began and never ended it (torch's store does not tell which one is missing until
// its own timeout), with each one's last lines.
func joinFailure(logs [][]string, began, ended []bool, names []string, dist string, join time.Duration) *Failure {
	var late []int
	for r := range logs {
		if !began[r] {
			late = append(late, r)
		}
	}
	what := "did not begin torch's rendezvous"
	if len(late) == 0 {
		what = "did not complete torch's rendezvous"
		for r := range logs {
			if !ended[r] {
				late = append(late, r)
			}
		}
	}
	var who, ev []string
	for _, r := range late {
		who = append(who, fmt.Sprintf("rank %d on %s", r, names[r]))
		lines := logs[r]
		for _, l := range lines[max(0, len(lines)-3):] {
			ev = append(ev, fmt.Sprintf("[%s] %s", names[r], l))
		}
	}
	return &Failure{Class: ClassCrashDuringStart, Evidence: ev,
		Detail: fmt.Sprintf("%s %s at %s within %v of the first rank's start of it (server.join_timeout)", strings.Join(who, ", "), what, dist, join)}
}

// watchJoin is the rendezvous watch over the group's ranks, each with its own log.
func (gi *groupInstance) watchJoin(ctx context.Context) *Failure {
	return watchJoin(ctx, gi.clock, gi.join, func(ctx context.Context) [][]string {
		out := make([][]string, len(gi.ranks))
		for r, in := range gi.ranks {
			out[r], _ = in.Logs(ctx)
		}
		return out
	}, gi.names, func() string { return gi.dist })
}

func (gi *groupInstance) named(err error, rank int) error {
	if err == nil || len(gi.ranks) == 1 || errors.Is(err, context.Canceled) {
		return err
	}
	return rankFailure(err, rank, gi.names[rank])
}

// Check reports a rank's failure, naming it: of several failed ranks, the one whose server exited
// first (the others followed it).
func (gi *groupInstance) Check(ctx context.Context) (*Failure, error) {
	if len(gi.ranks) == 1 {
		return gi.ranks[0].Check(ctx)
	}
	fails := map[int]error{}
	for r, in := range gi.ranks {
		f, err := in.Check(ctx)
		if err != nil {
			return nil, gi.named(err, r)
		}
		if f != nil {
			fails[r] = f
		}
	}
	if len(fails) == 0 {
		return nil, nil
	}
	r := gi.culprit(ctx, fails)
	f, _ := AsFailure(gi.named(fails[r], r))
	return f, nil
}

func (gi *groupInstance) State(ctx context.Context) (State, error) { return gi.ranks[0].State(ctx) }

// Logs are rank 0's (the scheduler that logs the batches), then each other rank's last lines,
// under a line naming it.
func (gi *groupInstance) Logs(ctx context.Context) ([]string, error) {
	lines, err := gi.ranks[0].Logs(ctx)
	for r := 1; r < len(gi.ranks); r++ {
		more, _ := gi.ranks[r].Logs(ctx)
		if len(more) > maxRankLines {
			more = more[len(more)-maxRankLines:]
		}
		lines = append(lines, fmt.Sprintf("--- rank %d on %s ---", r, gi.names[r]))
		lines = append(lines, more...)
	}
	return lines, err
}

// maxRankLines bounds what Logs adds of each rank >= 1.
const maxRankLines = 200

// Stop stops every rank side by side; the result is rank 0's, SIGKILL, a stop timeout and the
// evidence of any rank included.
func (gi *groupInstance) Stop(ctx context.Context, progress func(State)) (StopResult, error) {
	res, err := gi.stop(ctx, progress)
	if gi.onStop != nil {
		// The nodes are free for the next point (a rank a failed stop left is stopped by the next
		// start on its node).
		gi.onStop()
	}
	return res, err
}

func (gi *groupInstance) stop(ctx context.Context, progress func(State)) (StopResult, error) {
	if len(gi.ranks) == 1 {
		return gi.ranks[0].Stop(ctx, progress)
	}
	res := make([]StopResult, len(gi.ranks))
	errs := make([]error, len(gi.ranks))
	var wg sync.WaitGroup
	for r, in := range gi.ranks {
		p := progress
		if r > 0 {
			p = nil
		}
		wg.Go(func() { res[r], errs[r] = in.Stop(ctx, p) })
	}
	wg.Wait()
	out := res[0]
	for r := 1; r < len(res); r++ {
		s := res[r]
		out.Duration = max(out.Duration, s.Duration)
		out.Clean = out.Clean && s.Clean
		out.SIGKILL = out.SIGKILL || s.SIGKILL
		if s.Class != "" && out.Class == "" {
			out.Class = s.Class
			out.Evidence = append(out.Evidence, fmt.Sprintf("rank %d on %s:", r, gi.names[r]))
			out.Evidence = append(out.Evidence, s.Evidence...)
		}
		out.Already = out.Already && s.Already
	}
	for r, err := range errs {
		if err != nil {
			errs[r] = gi.named(err, r)
		}
	}
	return out, errors.Join(errs...)
}

// stopStarted stops the ranks that started (a start that failed on another rank).
func (gi *groupInstance) stopStarted(ctx context.Context) {
	var wg sync.WaitGroup
	for _, in := range gi.ranks {
		if in != nil {
			wg.Go(func() { _, _ = in.Stop(ctx, nil) })
		}
	}
	wg.Wait()
}

func (gi *groupInstance) HTTPClient() *http.Client { return gi.ranks[0].HTTPClient() }
func (gi *groupInstance) BaseURL() string          { return gi.ranks[0].BaseURL() }
func (gi *groupInstance) Address() string          { return gi.ranks[0].Address() }

func (gi *groupInstance) LogMark(ctx context.Context) (int, error) { return gi.ranks[0].LogMark(ctx) }

func (gi *groupInstance) LogsSince(ctx context.Context, mark int) ([]string, error) {
	return gi.ranks[0].LogsSince(ctx, mark)
}

// HostLost: any rank's machine lost.
func (gi *groupInstance) HostLost(ctx context.Context) error {
	for r, in := range gi.ranks {
		if err := in.HostLost(ctx); err != nil {
			return gi.named(err, r)
		}
	}
	return nil
}
