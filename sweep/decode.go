package sweep

import (
	"fmt"
	"math"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/specsweep/specsweep/internal/argparse"
)

// maxCombinations bounds the matrix cross product (Limits, LimitCombinations).
const maxCombinations = 100_000

// spec decodes the top level, starting from the defaults.
func (p *parser) spec(root *yaml.Node) *Spec {
	s := &Spec{
		Server: Server{
			Args:         []string{},
			Port:         DefaultPort,
			ReadyTimeout: DefaultReadyTimeout,
			StopTimeout:  DefaultStopTimeout,
		},
		Methods: map[string]Method{},
		Matrix: Matrix{
			NumDraftTokens: []DraftTokens{{Auto: true}},
			TP:             []int{1},
		},
		Workload: Workload{
			API:            DefaultAPI,
			WarmupRequests: DefaultWarmupRequests,
			Dataset:        DefaultDataset,
			Repeats:        DefaultRepeats,
			Seed:           DefaultSeed,
			OutputCheck:    DefaultOutputCheck,
		},
	}
	n := root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			p.errf(n, "empty spec: expected a mapping with version, name, hosts, server, methods, matrix and workload")
			return s
		}
		n = n.Content[0]
	}
	p.object(n, "", []field{
		{"version", true, func(v *yaml.Node) {
			if x, ok := p.integer(v, "version"); ok {
				if x != 1 {
					p.errf(resolve(v), "version: unsupported version %d (this specsweep reads version 1)", x)
					return
				}
				s.Version = 1
			}
		}},
		{"name", true, func(v *yaml.Node) {
			if x, ok := p.str(v, "name"); ok {
				if !sweepName.MatchString(x) {
					p.errf(resolve(v), "name: %q must match [a-z0-9._-]+", clip(x))
				}
				s.Name = x
			}
		}},
		{"hosts", true, func(v *yaml.Node) { s.Hosts = p.hosts(v) }},
		{"server", true, func(v *yaml.Node) { p.server(v, &s.Server) }},
		{"methods", true, func(v *yaml.Node) { s.Methods = p.methods(v) }},
		{"matrix", true, func(v *yaml.Node) { p.matrix(v, &s.Matrix) }},
		{"workload", true, func(v *yaml.Node) { p.workload(v, &s.Workload) }},
		{"schedule", false, func(v *yaml.Node) { s.Schedule = p.schedule(v) }},
		{"search", false, func(v *yaml.Node) { s.Search = p.search(v) }},
		{"watch", false, func(v *yaml.Node) { s.Watch = p.watch(v) }},
	})
	return s
}

func (p *parser) hosts(n *yaml.Node) []Host {
	items, ok := p.nonEmpty(n, "hosts")
	if !ok {
		return nil
	}
	p.boundedLen(n, "hosts", LimitHosts, "hosts", len(items))
	good := true
	hosts := []Host{}
	seen := map[string]int{} // name -> line of its first use
	type group struct {
		nodes *yaml.Node // the nodes list, nil for one machine
		item  int        // index in hosts
	}
	var groups []group // parallel to hosts
	for i, it := range items {
		at := index("hosts", i)
		h := Host{Unit: DefaultUnit, Driver: DefaultDriver, GPUs: DefaultGPUs}
		var nameNode, packNode, slurmNode, nodesNode, distPortNode, dbusNode *yaml.Node
		driverOK := true
		str := func(dst *string, key string) func(*yaml.Node) {
			return func(v *yaml.Node) {
				if x, ok := p.str(v, join(at, key)); ok {
					*dst = x
				}
			}
		}
		present, ok := p.object(it, at, []field{
			{"name", true, func(v *yaml.Node) {
				x, ok := p.str(v, at+".name")
				if !ok {
					return
				}
				if !identName.MatchString(x) {
					p.errf(resolve(v), "%s.name: %q must match [A-Za-z0-9._-]+", at, clip(x))
				}
				h.Name, nameNode = x, resolve(v)
			}},
			{"address", false, func(v *yaml.Node) {
				x, ok := p.str(v, at+".address")
				if !ok {
					return
				}
				if msg := checkAddress(x); msg != "" {
					p.errf(resolve(v), "%s.address: %q %s", at, clip(x), msg)
				}
				h.Address = x
			}},
			{"user", false, str(&h.User, "user")},
			{"identity_file", false, str(&h.IdentityFile, "identity_file")},
			{"known_hosts", false, str(&h.KnownHosts, "known_hosts")},
			{"unit", false, func(v *yaml.Node) {
				x, ok := p.str(v, at+".unit")
				if !ok {
					return
				}
				if !unitName.MatchString(x) {
					p.errf(resolve(v), "%s.unit: %q is not a systemd service name (want NAME.service)", at, clip(x))
					return
				}
				if strings.HasPrefix(x, "-") {
					// It reaches systemctl and journalctl as an argument.
					p.errf(resolve(v), "%s.unit: %q must not start with \"-\" (systemctl would read it as an option)", at, clip(x))
					return
				}
				h.Unit = x
			}},
			{"gpus", false, func(v *yaml.Node) {
				x, ok := p.bounded(v, at+".gpus", LimitGPUs)
				if !ok {
					good = false
					return
				}
				h.GPUs = x
			}},
			{"create_unit", false, func(v *yaml.Node) {
				if x, ok := p.boolean(v, at+".create_unit"); ok {
					h.CreateUnit = x
				}
			}},
			{"dbus", false, func(v *yaml.Node) {
				if x, ok := p.boolean(v, at+".dbus"); ok {
					h.DBus, dbusNode = &x, resolve(v)
				}
			}},
			{"slurm", false, func(v *yaml.Node) {
				h.Slurm, slurmNode = p.slurm(v, at+".slurm"), resolve(v)
			}},
			{"pack", false, func(v *yaml.Node) {
				if x, ok := p.boolean(v, at+".pack"); ok {
					h.Pack, packNode = x, resolve(v)
				}
			}},
			{"nodes", false, func(v *yaml.Node) {
				h.Nodes, nodesNode = p.nodes(v, at+".nodes"), resolve(v)
			}},
			{"dist_init_port", false, func(v *yaml.Node) {
				x, ok := p.integer(v, at+".dist_init_port")
				if !ok {
					return
				}
				// SGLang takes the next ports too (PortArgs.init_new with dp attention: port_base
				// = dist_init_port + 1 .. + 5; docs/spec.md).
				if x < 1 || x > 65535-distInitPorts {
					p.errf(resolve(v), "%s.dist_init_port: %d is outside 1-%d (SGLang also binds the %d ports after it)", at, x, 65535-distInitPorts, distInitPorts)
					return
				}
				h.DistInitPort, distPortNode = int(x), resolve(v)
			}},
			{"driver", false, func(v *yaml.Node) {
				x, ok := p.oneOf(v, at+".driver", DriverSSH, DriverLocal, DriverSlurm)
				if !ok {
					// No driver rather than the default: the checks of what a driver needs (an
					// address, an absolute command) would add errors that are not the user's.
					good, driverOK, h.Driver = false, false, ""
					return
				}
				h.Driver = x
			}},
		})
		if !ok {
			good = false
			continue
		}
		if h.Pack && packNode != nil && h.GPUs < 2 {
			p.errf(packNode, "%s.pack: packing runs several points at once on disjoint GPUs and needs gpus >= 2 (this host has %d)", at, h.GPUs)
		}
		if nodesNode != nil {
			p.groupCheck(&h, at, present, nodesNode, driverOK)
		}
		if distPortNode != nil && nodesNode == nil && (h.Slurm == nil || h.Slurm.MaxNodes <= 1) {
			p.errf(distPortNode, "%s.dist_init_port: only a host that spans nodes (nodes:, or slurm.max_nodes above 1) starts ranks", at)
		}
		// A cluster without an address runs its Slurm commands on this machine (the login node).
		if driverOK && h.Driver == DriverSSH && !present["address"] && nodesNode == nil {
			p.errf(resolve(it), "missing required key \"address\" in %s (required for driver ssh)", at)
		}
		if driverOK && h.DBus != nil && *h.DBus && h.Driver != DriverSSH {
			p.errf(dbusNode, "%s.dbus: only an ssh host's unit is driven over systemd's D-Bus API (this one is driver %s)", at, h.Driver)
		}
		if driverOK {
			switch {
			case h.Driver == DriverSlurm && h.Slurm == nil:
				h.Slurm = &Slurm{MaxJobs: DefaultMaxJobs, OutputDir: DefaultOutputDir}
			case h.Driver != DriverSlurm && slurmNode != nil:
				p.errf(slurmNode, "%s.slurm: only a host with driver: slurm takes a slurm block (this one is driver %s)", at, h.Driver)
			}
			if h.Driver == DriverSlurm {
				if packNode != nil && h.Pack {
					p.errf(packNode, "%s.pack: a Slurm cluster places its jobs itself (slurm.max_jobs sets how many run at once)", at)
				}
				for _, k := range []string{"unit", "create_unit"} {
					if present[k] {
						p.errf(resolve(it), "%s.%s: a Slurm cluster runs points as jobs, not in a systemd unit", at, k)
					}
				}
			}
		}
		if nameNode != nil {
			if line, dup := seen[h.Name]; dup {
				p.errf(nameNode, "%s.name: duplicate host name %q (first at line %d)", at, clip(h.Name), line)
			} else {
				seen[h.Name] = nameNode.Line
			}
		}
		hosts = append(hosts, h)
		groups = append(groups, group{nodesNode, i})
	}
	// A node's name is a host's name in events, the store and error messages: one per machine.
	names := map[string]string{}
	for _, h := range hosts {
		names[h.Name] = "a host"
	}
	for i, h := range hosts {
		for j, nd := range h.Nodes {
			if by, dup := names[nd.Name]; dup && groups[i].nodes != nil {
				p.errf(groups[i].nodes, "%s.nodes[%d]: the node name %q is already %s's name (name the node)", index("hosts", groups[i].item), j, clip(nd.Name), by)
				continue
			}
			names[nd.Name] = "a node of " + strconv.Quote(h.Name)
		}
	}
	p.hostsOK = good
	return hosts
}

// distInitPorts is how many ports after --dist-init-addr's SGLang binds on rank 0's node
// (PortArgs.init_new with dp attention: port_base = dist_init_port + 1, then + 2 .. + 5).
const distInitPorts = 5

// nodes decodes a host group's nodes: each a mapping with an address and optional name and SSH
// settings.
func (p *parser) nodes(n *yaml.Node, at string) []Node {
	items, ok := p.list(n, at)
	if !ok {
		return nil
	}
	if len(items) < 2 {
		p.errf(resolve(n), "%s: a group has at least 2 nodes (one machine is a host of its own: write its address on the host)", at)
	}
	p.boundedLen(n, at, LimitNodes, "nodes", len(items))
	out := make([]Node, 0, len(items))
	for i, it := range items {
		ip := index(at, i)
		var nd Node
		str := func(dst *string, key string) func(*yaml.Node) {
			return func(v *yaml.Node) {
				if x, ok := p.str(v, join(ip, key)); ok {
					*dst = x
				}
			}
		}
		p.object(it, ip, []field{
			{"name", false, func(v *yaml.Node) {
				x, ok := p.str(v, ip+".name")
				if !ok {
					return
				}
				if !identName.MatchString(x) {
					p.errf(resolve(v), "%s.name: %q must match [A-Za-z0-9._-]+", ip, clip(x))
					return
				}
				nd.Name = x
			}},
			{"address", true, func(v *yaml.Node) {
				x, ok := p.str(v, ip+".address")
				if !ok {
					return
				}
				if msg := checkAddress(x); msg != "" {
					p.errf(resolve(v), "%s.address: %q %s", ip, clip(x), msg)
				}
				nd.Address = x
			}},
			{"user", false, str(&nd.User, "user")},
			{"identity_file", false, str(&nd.IdentityFile, "identity_file")},
			{"known_hosts", false, str(&nd.KnownHosts, "known_hosts")},
		})
		out = append(out, nd)
	}
	return out
}

// groupCheck relates a host group's nodes to the host's own keys: names filled in and unique,
// SSH settings inherited, and nothing that belongs to one machine at the group's level.
func (p *parser) groupCheck(h *Host, at string, present map[string]bool, nodesNode *yaml.Node, driverOK bool) {
	if driverOK && h.Driver != DriverSSH {
		p.errf(nodesNode, "%s.nodes: only driver ssh takes a list of nodes (a Slurm cluster spans nodes with slurm.max_nodes; driver local is this one machine)", at)
	}
	if present["address"] {
		p.errf(nodesNode, "%s: a group gives each node its address under nodes:, not address", at)
	}
	if h.Pack && present["pack"] {
		p.errf(nodesNode, "%s.nodes: packing a group's nodes is not built yet; drop pack or list the nodes as hosts", at)
	}
	for i := range h.Nodes {
		nd := &h.Nodes[i]
		if nd.Name == "" {
			nd.Name = fmt.Sprintf("%s-%d", h.Name, i)
		}
		if nd.User == "" {
			nd.User = h.User
		}
		if nd.IdentityFile == "" {
			nd.IdentityFile = h.IdentityFile
		}
		if nd.KnownHosts == "" {
			nd.KnownHosts = h.KnownHosts
		}
	}
}

// slurm decodes a host's slurm block, starting from its defaults.
func (p *parser) slurm(n *yaml.Node, at string) *Slurm {
	s := &Slurm{MaxJobs: DefaultMaxJobs, OutputDir: DefaultOutputDir}
	word := func(dst *string, key string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			x, ok := p.str(v, at+"."+key)
			if !ok {
				return
			}
			if x == "" || strings.ContainsAny(x, " \t\n\r\x00,") || strings.HasPrefix(x, "-") {
				p.errf(resolve(v), "%s.%s: %q is not a Slurm name (no spaces, commas or leading -)", at, key, clip(x))
				return
			}
			*dst = x
		}
	}
	p.object(n, at, []field{
		{"partition", false, word(&s.Partition, "partition")},
		{"account", false, word(&s.Account, "account")},
		{"time_limit", false, func(v *yaml.Node) {
			d, ok := p.duration(v, at+".time_limit")
			if !ok {
				return
			}
			if d < time.Minute {
				p.errf(resolve(v), "%s.time_limit: %v is under Slurm's unit of a minute", at, d)
				return
			}
			if !p.withinLimit(resolve(v), at+".time_limit", p.limit(LimitTimeLimit), int64(d)) {
				return
			}
			s.TimeLimit = d
		}},
		{"max_jobs", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, at+".max_jobs", LimitMaxJobs); ok {
				s.MaxJobs = x
			}
		}},
		{"max_nodes", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, at+".max_nodes", LimitMaxNodes); ok {
				s.MaxNodes = x
			}
		}},
		{"output_dir", false, func(v *yaml.Node) {
			x, ok := p.str(v, at+".output_dir")
			if !ok {
				return
			}
			if x == "" || strings.ContainsAny(x, "\n\r\x00%") {
				p.errf(resolve(v), "%s.output_dir: %q must be a directory path without newlines or %%", at, clip(x))
				return
			}
			// It reaches sbatch in an #SBATCH --output= line, which sbatch splits at whitespace and
			// reads quotes, backslashes and # in (docs/slurm.md, "sbatch_args").
			if strings.ContainsAny(x, " \t\v\f\"'\\#") {
				p.errf(resolve(v), "%s.output_dir: %q holds a space, a quote, a backslash or #, which sbatch's #SBATCH line reader would split or cut", at, clip(x))
				return
			}
			s.OutputDir = x
		}},
		{"sbatch_args", false, func(v *yaml.Node) {
			items, ok := p.list(v, at+".sbatch_args")
			if !ok {
				return
			}
			p.boundedLen(v, at+".sbatch_args", LimitSbatchArgs, "items", len(items))
			for i, it := range items {
				ip := index(at+".sbatch_args", i)
				a, ok := p.str(it, ip)
				if !ok {
					continue
				}
				// Each item is read the way sbatch reads its #SBATCH line, and stored in canonical
				// form so the job script holds exactly what was checked (docs/slurm.md).
				norm, err := checkSbatchArg(a)
				if err != nil {
					p.errf(resolve(it), "%s: %q: %v", ip, clip(a), err)
					continue
				}
				s.SbatchArgs = append(s.SbatchArgs, norm...)
			}
		}},
	})
	return s
}

// checkAddress checks host[:port] and returns what is wrong, or "".
func checkAddress(a string) string {
	switch {
	case a == "":
		return "is empty (want host or host:port)"
	case strings.Contains(a, "@"):
		return "holds a user: put it in user: and write host or host:port"
	case strings.ContainsAny(a, " \t/"):
		return "is not host or host:port"
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if strings.Count(a, ":") > 1 {
			return "" // a bare IPv6 address
		}
		if strings.Contains(a, ":") {
			return "is not host or host:port"
		}
		return ""
	}
	if host == "" {
		return "has no host"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has a port outside 1-65535"
	}
	return ""
}

func (p *parser) server(n *yaml.Node, srv *Server) {
	var portNode *yaml.Node
	var argNodes []*yaml.Node
	p.object(n, "server", []field{
		{"command", true, func(v *yaml.Node) {
			items, ok := p.nonEmpty(v, "server.command")
			if !ok {
				return
			}
			cmd := []string{}
			for i, it := range items {
				x, ok := p.str(it, index("server.command", i))
				if !ok {
					return
				}
				cmd = append(cmd, x)
			}
			if cmd[0] == "" {
				p.errf(resolve(items[0]), "server.command[0]: must not be empty")
				return
			}
			srv.Command, p.cmd0 = cmd, resolve(items[0])
		}},
		{"args", false, func(v *yaml.Node) {
			srv.Args, argNodes = p.args(v, "server.args", true)
			p.serverArgNodes = argNodes
		}},
		{"env", false, func(v *yaml.Node) { srv.Env = p.env(v, "server.env") }},
		{"port", false, func(v *yaml.Node) {
			x, ok := p.positive(v, "server.port")
			if !ok {
				return
			}
			if x > 65535 {
				p.errf(resolve(v), "server.port: %d is not a TCP port (1-65535)", x)
				return
			}
			srv.Port, portNode = x, resolve(v)
		}},
		{"ready_timeout", false, func(v *yaml.Node) {
			if d, ok := p.boundedDuration(v, "server.ready_timeout", LimitReadyTimeout); ok {
				srv.ReadyTimeout = d
			}
		}},
		{"stop_timeout", false, func(v *yaml.Node) {
			if d, ok := p.boundedDuration(v, "server.stop_timeout", LimitStopTimeout); ok {
				srv.StopTimeout = d
			}
		}},
		{"stop", false, func(v *yaml.Node) {
			if x, ok := p.oneOf(v, "server.stop", StopKill, StopDrain); ok && x == StopDrain {
				srv.Stop = x // kill, the default, is left out (hashes as before)
			}
		}},
		{"gpu_wait", false, func(v *yaml.Node) {
			if d, ok := p.boundedDuration(v, "server.gpu_wait", LimitGPUWait); ok {
				srv.GPUWait = d
			}
		}},
		{"join_timeout", false, func(v *yaml.Node) {
			if d, ok := p.boundedDuration(v, "server.join_timeout", LimitJoinTimeout); ok {
				srv.JoinTimeout = d
			}
		}},
	})
	// Readiness is probed on server.port: SGLang must listen there. argparse takes the last --port
	// (or an unambiguous abbreviation of it, such as --po).
	last, val, _ := argparse.LastAt(srv.Args, flagPort)
	if last >= 0 {
		if val != strconv.Itoa(srv.Port) && last < len(argNodes) {
			p.errf(argNodes[last], "server.args[%d]: --port %s differs from server.port %d (readiness is probed on server.port)", last, clip(val), srv.Port)
		}
		return
	}
	if srv.Port != DefaultPort && portNode != nil {
		p.errf(portNode, "server.port: %d, but server.args has no --port (SGLang would listen on %d)", srv.Port, DefaultPort)
	}
}

// args decodes an argument list. Flags the matrix sets are refused (two
// values for one flag: argparse would silently take the last).
func (p *parser) args(n *yaml.Node, path string, server bool) ([]string, []*yaml.Node) {
	items, ok := p.list(n, path)
	if !ok {
		return []string{}, nil
	}
	args, nodes := []string{}, []*yaml.Node{}
	for i, it := range items {
		at := index(path, i)
		a, ok := p.str(it, at)
		if !ok {
			continue
		}
		name := flagName(a)
		hasValue := name != "" && strings.Contains(a, "=")
		if f, ok := matrixFlag(a); ok {
			shown, by := f.flag, "matrix."+f.key
			if name != f.flag {
				shown = fmt.Sprintf("%s (%s)", name, f.flag)
			}
			if f.as != "" {
				by += ", as " + f.as
			}
			p.errf(resolve(it), "%s: %s is set by the matrix (%s); remove it from %s", at, shown, by, path)
		}
		if f := rankFlag(a); f != "" {
			shown := f
			if name != f {
				shown = fmt.Sprintf("%s (%s)", name, f)
			}
			p.errf(resolve(it), "%s: %s is set by specsweep for each rank of a point that spans nodes (hosts[].nodes, slurm.max_nodes); remove it from %s", at, shown, path)
		}
		switch {
		case name == "":
		case server && argparse.MayName(name, flagAlgorithm):
			p.errf(resolve(it), "%s: --speculative-algorithm belongs in a method's args (a method without it is a baseline)", at)
		case !server && argparse.Resolve(name, flagAlgorithm) != "":
			if !hasValue && i+1 >= len(items) {
				p.errf(resolve(it), "%s: --speculative-algorithm needs a value", at)
			}
		}
		args = append(args, a)
		nodes = append(nodes, resolve(it))
	}
	return args, nodes
}

func (p *parser) methods(n *yaml.Node) map[string]Method {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "methods: expected a mapping of method name to args, got %s", describe(n))
		return map[string]Method{}
	}
	p.methodsOK = true
	if len(n.Content) == 0 {
		p.errf(n, "methods: at least one method is required")
	}
	ms := map[string]Method{}
	first := map[string]int{}
	p.methodArgNodes = map[string]argNodes{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		name, ok := p.key(k, "methods")
		if !ok {
			continue
		}
		if line, dup := first[name]; dup {
			p.errf(k, "duplicate method %q in methods (first at line %d)", clip(name), line)
			continue
		}
		first[name] = k.Line
		if !identName.MatchString(name) {
			p.errf(k, "methods: method name %q must match [A-Za-z0-9._-]+", clip(name))
		}
		at := "methods." + name
		m := Method{Name: name, Args: []string{}}
		switch {
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
			// "baseline:" alone: no extra args.
		case v.Kind == yaml.SequenceNode:
			m.Args, p.methodArgNodes[name] = p.argsAt(v, at)
		case v.Kind == yaml.MappingNode:
			p.object(v, at, []field{
				{"args", false, func(a *yaml.Node) { m.Args, p.methodArgNodes[name] = p.argsAt(a, at+".args") }},
				{"env", false, func(e *yaml.Node) { m.Env = p.env(e, at+".env") }},
				{"num_steps", false, func(v *yaml.Node) { m.NumSteps, _ = p.boundedList(v, at+".num_steps", LimitNumSteps) }},
				{"topk", false, func(v *yaml.Node) { m.TopK, _ = p.boundedList(v, at+".topk", LimitTopK) }},
				{"num_draft_tokens", false, func(v *yaml.Node) { m.NumDraftTokens = p.draftList(v, at+".num_draft_tokens") }},
				{"files", false, func(v *yaml.Node) { m.Files = p.files(v, at+".files") }},
			})
			if m.NumSteps != nil || m.TopK != nil || m.NumDraftTokens != nil {
				p.ownLists = append(p.ownLists, ownList{name, v})
			}
		default:
			p.errf(v, "%s: expected a list of args or a mapping with args, env, num_steps, topk, num_draft_tokens and files, got %s", at, describe(v))
		}
		ms[name] = m
	}
	return ms
}

func (p *parser) matrix(n *yaml.Node, m *Matrix) {
	p.matrixNode = resolve(n)
	present, ok := p.object(n, "matrix", []field{
		{"method", true, func(v *yaml.Node) {
			items, _ := p.nonEmpty(v, "matrix.method")
			for i, it := range items {
				if x, ok := p.str(it, index("matrix.method", i)); ok {
					m.Methods = append(m.Methods, x)
					p.methodRefs = append(p.methodRefs, ref{resolve(it), i})
				}
			}
		}},
		{"num_steps", false, func(v *yaml.Node) { m.NumSteps, _ = p.boundedList(v, "matrix.num_steps", LimitNumSteps) }},
		{"topk", false, func(v *yaml.Node) { m.TopK, _ = p.boundedList(v, "matrix.topk", LimitTopK) }},
		{"num_draft_tokens", false, func(v *yaml.Node) { m.NumDraftTokens = p.draftList(v, "matrix.num_draft_tokens") }},
		{"tp", false, func(v *yaml.Node) { m.TP, p.tpRefs = p.boundedList(v, "matrix.tp", LimitTP) }},
	})
	if !ok {
		p.matrixNode = nil
		return
	}
	p.matrixKeys = present
	combos := 1
	for _, l := range []int{len(m.Methods), len(m.NumSteps), len(m.TopK), len(m.NumDraftTokens), len(m.TP)} {
		combos = satMul(combos, max(l, 1))
	}
	if l := p.limit(LimitCombinations); int64(combos) > l.Max {
		p.errf(p.matrixNode, "matrix: expands to %d combinations, more than the limit of %d (%s)", combos, l.Max, l.Why)
	}
}

// draftList decodes a list of num_draft_tokens values: positive integers or "auto".
func (p *parser) draftList(v *yaml.Node, path string) []DraftTokens {
	items, _ := p.nonEmpty(v, path)
	out := []DraftTokens{}
	for i, it := range items {
		at := index(path, i)
		if r := resolve(it); r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" {
			if r.Value == "auto" {
				out = append(out, DraftTokens{Auto: true})
			} else {
				p.errf(r, "%s: must be a positive integer or \"auto\", got %s", at, describe(r))
			}
			continue
		}
		if x, ok := p.bounded(it, at, LimitDraftTokens); ok {
			out = append(out, DraftTokens{N: x})
		}
	}
	return out
}

// files decodes a method's files: a mapping of absolute path to content, kept sorted by path.
func (p *parser) files(n *yaml.Node, path string) []File {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: expected a mapping of absolute path to content, got %s", path, describe(n))
		return nil
	}
	if !p.boundedLen(n, path, LimitFiles, "files", len(n.Content)/2) {
		return nil
	}
	var out []File
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		name, ok := p.key(k, path)
		if !ok {
			continue
		}
		if line, dup := first[name]; dup {
			p.errf(k, "duplicate file %q in %s (first at line %d)", clip(name), path, line)
			continue
		}
		first[name] = k.Line
		if err := CheckFilePath(name); err != nil {
			p.errf(k, "%s: %v", path, err)
			continue
		}
		// A file's content never enters a unit (it is written as a file), so lines are what it holds.
		if v := resolve(n.Content[i+1]); v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			p.errf(v, "%s: expected the file's content as a string, got %s", join(path, name), describe(v))
		} else if !utf8.ValidString(v.Value) {
			p.errf(v, "%s: must be valid UTF-8", join(path, name))
		} else {
			out = append(out, File{Path: name, Content: v.Value})
		}
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// CheckFilePath refuses a method file's path that is not absolute and clean, or that holds a
// newline or NUL (it is written by a remote shell or SFTP, and quoted into a Slurm job script).
func CheckFilePath(name string) error {
	switch {
	case strings.ContainsAny(name, "\n\r\x00"):
		return fmt.Errorf("file path %q holds a newline or NUL", clip(name))
	case !strings.HasPrefix(name, "/"):
		return fmt.Errorf("file path %q is not absolute (the host writes it where the server reads it)", clip(name))
	case path.Clean(name) != name || name == "/":
		return fmt.Errorf("file path %q is not clean (want %q)", clip(name), path.Clean(name))
	}
	return nil
}

func (p *parser) workload(n *yaml.Node, w *Workload) {
	datasetOK := true
	var levels []*yaml.Node
	// workload.precision's max_requests and min_requests, checked against the cap once requests is known.
	var maxReq, minReq *yaml.Node
	setInt := func(dst *int, key string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			if x, ok := p.bounded(v, "workload."+key, "workload."+key); ok {
				*dst = x
			}
		}
	}
	present, ok := p.object(n, "workload", []field{
		{"api", false, func(v *yaml.Node) {
			if x, ok := p.oneOf(v, "workload.api", APIChat, APICompletions); ok {
				w.API = x
			}
		}},
		{"concurrency", false, func(v *yaml.Node) {
			w.Concurrency, levels = p.boundedList(v, "workload.concurrency", LimitConcurrency)
			if r := resolve(v); r.Kind == yaml.SequenceNode {
				p.boundedLen(r, "workload.concurrency", LimitLevels, "levels", len(r.Content))
			}
		}},
		{"requests", false, setInt(&w.Requests, "requests")},
		{"phases", false, func(v *yaml.Node) { p.phases(v, w) }},
		{"warmup_requests", false, setInt(&w.WarmupRequests, "warmup_requests")},
		{"input_tokens", false, func(v *yaml.Node) {
			if r := resolve(v); r.Kind == yaml.SequenceNode {
				// A list is the context-length axis: every prompt source is measured at each length.
				var nodes []*yaml.Node
				w.InputLengths, nodes = p.boundedList(v, "workload.input_tokens", LimitInputTokens)
				p.boundedLen(r, "workload.input_tokens", LimitLengths, "lengths", len(r.Content))
				seen := map[int]bool{}
				for i, n := range w.InputLengths {
					if seen[n] {
						p.errf(nodes[i], "workload.input_tokens: length %d is listed twice", n)
					}
					seen[n] = true
				}
				if len(w.InputLengths) > 0 {
					w.InputTokens = w.InputLengths[0]
				}
				return
			}
			setInt(&w.InputTokens, "input_tokens")(v)
		}},
		{"output_tokens", true, setInt(&w.OutputTokens, "output_tokens")},
		{"dataset", false, func(v *yaml.Node) {
			x, ok := p.str(v, "workload.dataset")
			if !ok {
				datasetOK = false
				return
			}
			if x != "random" && (!strings.HasPrefix(x, "sharegpt:") || x == "sharegpt:") {
				p.errf(resolve(v), "workload.dataset: must be random or sharegpt:PATH, got %q", clip(x))
				datasetOK = false
				return
			}
			w.Dataset = x
		}},
		{"datasets", false, func(v *yaml.Node) { p.datasets(v, w) }},
		{"repeats", false, setInt(&w.Repeats, "repeats")},
		{"seed", false, func(v *yaml.Node) {
			if x, ok := p.integer(v, "workload.seed"); ok {
				w.Seed = x
			}
		}},
		{"temperature", false, func(v *yaml.Node) {
			if x, ok := p.number(v, "workload.temperature"); ok {
				if x < 0 || x > maxTemperature {
					p.errf(resolve(v), "workload.temperature: must be between 0 and %g, got %g", float64(maxTemperature), x)
					return
				}
				w.Temperature = x
			}
		}},
		{"output_check", false, func(v *yaml.Node) { p.outputCheck(v, &w.OutputCheck) }},
		{"precision", false, func(v *yaml.Node) { w.Precision, minReq, maxReq = p.precision(v) }},
	})
	if !ok {
		return
	}
	if maxReq != nil {
		// precision.max_requests is the level's cap, which requests already is: one of them.
		if present["requests"] {
			p.errf(maxReq, "workload.precision.max_requests: workload.requests is the cap already: give one of them")
		} else if x, ok := p.bounded(maxReq, "workload.precision.max_requests", LimitRequests); ok {
			w.Requests = x
		}
		present["requests"] = true // given (its error, if any, said)
	}
	if pr := w.Precision; pr != nil && w.Requests > 0 && pr.MinRequests > w.Requests {
		p.errf(resolve(minReq), "workload.precision.min_requests: %d is above the cap of %d requests a level", pr.MinRequests, w.Requests)
	}
	if w.Precision != nil && !present["requests"] && !present["phases"] {
		p.errf(resolve(n), "workload.precision: a level needs a cap too: give workload.requests or precision.max_requests")
		present["requests"] = true
	}
	switch {
	case present["phases"] && w.Precision != nil:
		p.errf(resolve(n), "workload: phases are timed and precision ends a level when its figure is known: give one of them")
	case present["phases"] && (present["concurrency"] || present["requests"]):
		p.errf(resolve(n), "workload: phases hold each concurrency for a time: give phases, or concurrency and requests, not both")
	case present["phases"]:
		// The levels of the phases, in order of first use, for everything that reads levels.
		for _, ph := range w.Phases {
			if !slices.Contains(w.Concurrency, ph.Concurrency) {
				w.Concurrency = append(w.Concurrency, ph.Concurrency)
			}
		}
		if len(w.Sources()) > 1 {
			p.errf(resolve(n), "workload: phases measure one prompt source: give one prompt set or length with phases")
		}
	default:
		for _, key := range []string{"concurrency", "requests"} {
			if !present[key] {
				p.errf(resolve(n), "missing required key %q in workload (or give phases)", key)
			}
		}
	}
	if present["datasets"] && present["dataset"] && w.Dataset != DefaultDataset {
		p.errf(resolve(n), "workload: dataset %q and datasets are exclusive: list the file under datasets (format sharegpt)", clip(w.Dataset))
	}
	// A random prompt needs a length; ShareGPT prompts and prompt sets bring their own.
	if datasetOK && w.Dataset == DefaultDataset && !present["input_tokens"] && !present["datasets"] {
		p.errf(resolve(n), "missing required key \"input_tokens\" in workload (required for dataset random)")
	}
	seen := map[int]bool{}
	for i, c := range w.Concurrency {
		if seen[c] {
			p.errf(levels[i], "workload.concurrency: level %d is listed twice", c)
		}
		seen[c] = true
	}
}

// precision decodes workload.precision: one figure with its target (`output_tok_s: 2%`), the
// confidence, min_requests; max_requests is returned undecoded (the workload's cap, which
// workload.requests may give instead), and min_requests's node (checked against the cap).
func (p *parser) precision(n *yaml.Node) (pr *Precision, minReq, maxReq *yaml.Node) {
	const path = "workload.precision"
	pr = &Precision{Confidence: DefaultConfidence}
	target := func(metric string) func(*yaml.Node) {
		return func(v *yaml.Node) {
			if pr.Metric != "" {
				p.errf(resolve(v), "%s: %s and %s: give the target of one figure", path, pr.Metric, metric)
				return
			}
			pr.Metric = metric
			if x, ok := p.percent(v, path+"."+metric); ok {
				if x <= 0 || x >= 0.5 {
					p.errf(resolve(v), "%s.%s: the target is a relative half-width above 0%% and below 50%% (2%% or 0.02), got %g%%", path, metric, 100*x)
					return
				}
				pr.Target = x
			}
		}
	}
	present, ok := p.object(n, path, []field{
		{PrecisionOutputTokS, false, target(PrecisionOutputTokS)},
		{PrecisionTTFT, false, target(PrecisionTTFT)},
		{PrecisionTPOT, false, target(PrecisionTPOT)},
		{"confidence", false, func(v *yaml.Node) {
			if x, ok := p.number(v, path+".confidence"); ok {
				if x < 0.5 || x > 0.999 {
					p.errf(resolve(v), "%s.confidence: must be between 0.5 and 0.999, got %g", path, x)
					return
				}
				pr.Confidence = x
			}
		}},
		{"min_requests", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, path+".min_requests", LimitRequests); ok {
				pr.MinRequests, minReq = x, v
			}
		}},
		{"max_requests", false, func(v *yaml.Node) { maxReq = v }},
	})
	if ok && !present[PrecisionOutputTokS] && !present[PrecisionTTFT] && !present[PrecisionTPOT] {
		p.errf(resolve(n), "%s: give the figure and its target: %s, %s or %s (e.g. output_tok_s: 2%%)", path,
			PrecisionOutputTokS, PrecisionTTFT, PrecisionTPOT)
	}
	return pr, minReq, maxReq
}

// percent decodes a fraction written as a percentage ("2%") or as a number (0.02).
func (p *parser) percent(n *yaml.Node, path string) (float64, bool) {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" {
		num, isPct := strings.CutSuffix(strings.TrimSpace(r.Value), "%")
		x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !isPct || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			p.errf(r, "%s: expected a percentage (2%%) or a fraction (0.02), got %q", path, clip(r.Value))
			return 0, false
		}
		return x / 100, true
	}
	x, ok := p.number(n, path)
	if ok && x >= 1 {
		p.errf(r, "%s: %g is no fraction: write %g%% or %g", path, x, x, x/100)
		return 0, false
	}
	return x, ok
}

// outputCheck decodes workload.output_check: false (off), true (the default) or a mapping.
func (p *parser) outputCheck(n *yaml.Node, c *OutputCheck) {
	const path = "workload.output_check"
	if r := resolve(n); r.Kind == yaml.ScalarNode && r.ShortTag() == "!!bool" {
		if on, ok := p.boolean(r, path); ok {
			*c = DefaultOutputCheck
			c.Enabled = on
			if !on {
				*c = OutputCheck{}
			}
		}
		return
	}
	*c = DefaultOutputCheck
	p.object(n, path, []field{
		{"prompts", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, path+".prompts", LimitCheckPrompts); ok {
				c.Prompts = x
			}
		}},
		{"max_tokens", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, path+".max_tokens", LimitCheckMaxTokens); ok {
				c.MaxTokens = x
			}
		}},
		{"fail_on_mismatch", false, func(v *yaml.Node) {
			if x, ok := p.boolean(v, path+".fail_on_mismatch"); ok {
				c.FailOnMismatch = x
			}
		}},
	})
}

func (p *parser) schedule(n *yaml.Node) *Schedule {
	s := &Schedule{}
	present, ok := p.object(n, "schedule", []field{
		{"cron", false, func(v *yaml.Node) {
			x, ok := p.str(v, "schedule.cron")
			if !ok {
				return
			}
			// ParseCron also accepts a CRON_TZ=Zone (or TZ=Zone) prefix
			// and descriptors such as @daily.
			if _, err := ParseCron(x); err != nil {
				p.errf(resolve(v), "schedule.cron: bad cron expression %q: %v", clip(x), err)
				return
			}
			s.Cron = x
		}},
		{"window", false, func(v *yaml.Node) {
			x, ok := p.str(v, "schedule.window")
			if !ok {
				return
			}
			if _, err := ParseWindow(x); err != nil {
				p.errf(resolve(v), "schedule.window: %v", err)
				return
			}
			s.Window = x
		}},
	})
	if ok && !present["cron"] && !present["window"] {
		p.errf(resolve(n), "schedule: needs cron, window or both")
	}
	return s
}

// search decodes the search block, starting from its defaults.
func (p *parser) search(n *yaml.Node) *Search {
	s := &Search{Strategy: DefaultStrategy, MinGain: DefaultMinGain, Patience: DefaultPatience}
	p.object(n, "search", []field{
		{"strategy", false, func(v *yaml.Node) {
			if x, ok := p.oneOf(v, "search.strategy", StrategyGrid, StrategyClimb); ok {
				s.Strategy = x
			}
		}},
		{"min_gain", false, func(v *yaml.Node) {
			if x, ok := p.number(v, "search.min_gain"); ok {
				if x < 0 || x >= 1 {
					p.errf(resolve(v), "search.min_gain: must be at least 0 and below 1 (0.02 is 2%%), got %g", x)
					return
				}
				s.MinGain = x
			}
		}},
		{"patience", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, "search.patience", LimitSearchPatience); ok {
				s.Patience = x
			}
		}},
		{"probe", false, func(v *yaml.Node) {
			items, _ := p.list(v, "search.probe")
			seen := map[int]bool{}
			for i, it := range items {
				if x, ok := p.bounded(it, index("search.probe", i), LimitNumSteps); ok {
					if seen[x] {
						p.errf(resolve(it), "search.probe: num_steps %d is listed twice", x)
						continue
					}
					seen[x] = true
					s.Probe = append(s.Probe, x)
					p.probeRefs = append(p.probeRefs, resolve(it))
				}
			}
		}},
		{"budget", false, func(v *yaml.Node) {
			if x, ok := p.bounded(v, "search.budget", LimitSearchBudget); ok {
				s.Budget = x
			}
		}},
	})
	p.searchNode = resolve(n)
	return s
}

// crossCheck runs the checks that relate sections to each other.
func (p *parser) crossCheck(s *Spec) {
	// systemd's ExecStart= needs an absolute path; a local child process may
	// rely on PATH.
	if p.cmd0 != nil && !path.IsAbs(s.Server.Command[0]) {
		for _, h := range s.Hosts {
			if h.Driver == DriverSSH {
				p.errf(p.cmd0, "server.command[0]: %q must be an absolute path (host %q uses the ssh driver, and ExecStart= needs one)", clip(s.Server.Command[0]), h.Name)
				break
			}
		}
	}

	// The first listed method needing each matrix key, and its algorithm.
	needs := map[string][2]string{}
	climbable := false // some method of the matrix takes num_steps
	if p.methodsOK {
		defined := make([]string, 0, len(s.Methods))
		for name := range s.Methods {
			defined = append(defined, name)
		}
		sort.Strings(defined)
		for i, name := range s.Matrix.Methods {
			m, ok := s.Methods[name]
			if !ok {
				r := p.methodRefs[i]
				p.errf(r.node, "matrix.method[%d]: method %q is not defined in methods (defined: %s)", r.index, clip(name), strings.Join(defined, ", "))
				continue
			}
			if m.Baseline() {
				continue
			}
			if rulesOf(m.Algorithm()).applies().steps {
				climbable = true
			}
			own := map[string]bool{"num_steps": m.NumSteps != nil, "topk": m.TopK != nil}
			for _, k := range rulesOf(m.Algorithm()).required() {
				if _, seen := needs[k]; !seen && !own[k] {
					needs[k] = [2]string{name, m.Algorithm()}
				}
			}
		}
	}
	if p.matrixNode != nil {
		for _, k := range []string{"num_steps", "topk"} {
			if by, ok := needs[k]; ok && !p.matrixKeys[k] {
				p.errf(p.matrixNode, "missing required key %q in matrix (method %q runs %s, which needs it)", k, clip(by[0]), clip(by[1]))
			}
		}
	}

	for _, o := range p.ownLists {
		if n := ownCombinations(s, s.Methods[o.name]); int64(n) > p.limit(LimitCombinations).Max {
			l := p.limit(LimitCombinations)
			p.errf(o.node, "methods.%s: its lists expand to %d combinations, more than the limit of %d (%s)", o.name, n, l.Max, l.Why)
		}
	}
	if w := s.Watch; w != nil && p.watchNode != nil {
		if w.Host != "" && !slices.ContainsFunc(s.Hosts, func(h Host) bool { return h.Name == w.Host }) {
			p.errf(p.watchNode, "watch.host: %q is not a host of this spec", clip(w.Host))
		}
		if !slices.Contains(s.Matrix.Methods, WatchMethod) {
			p.errf(p.watchNode, "watch: matrix.method must run the method %q (the applied configuration)", WatchMethod)
		}
		for c := range w.Reference {
			if len(s.Workload.Phases) == 0 && !slices.Contains(s.Workload.Concurrency, c) {
				p.errf(p.watchNode, "watch.reference: concurrency %d is not a level of workload.concurrency", c)
			}
		}
	}
	if s.Search != nil && len(p.ownLists) > 0 {
		// The search walks the matrix's own lists (a chain per method and tp over matrix.num_steps).
		p.errf(p.ownLists[0].node, "methods: a method with its own num_steps, topk or num_draft_tokens cannot be searched (search walks the matrix's lists); move the lists to matrix or drop search")
	}
	if s.Search.Climbs() && p.methodsOK && p.matrixNode != nil && !climbable {
		p.errf(p.searchNode, "search: strategy climb climbs num_steps, and no method of matrix.method takes it (EAGLE, EAGLE3, NEXTN, STANDALONE or a plugin algorithm do); use strategy grid")
	}
	if s.Search != nil && p.matrixNode != nil {
		steps := map[int]bool{}
		for _, v := range s.Matrix.NumSteps {
			steps[v] = true
		}
		for i, v := range s.Search.Probe {
			if !steps[v] && i < len(p.probeRefs) {
				p.errf(p.probeRefs[i], "search.probe: num_steps %d is not in matrix.num_steps %s (a probe runs a planned point)", v, intList(s.Matrix.NumSteps))
			}
		}
	}

	if p.hostsOK && len(s.Hosts) > 0 {
		largest := s.Hosts[0]
		for _, h := range s.Hosts[1:] {
			if h.GPUs > largest.GPUs {
				largest = h
			}
		}
		for i, tp := range s.Matrix.TP {
			if i >= len(p.tpRefs) || slices.ContainsFunc(s.Hosts, func(h Host) bool { return h.Span(tp) > 0 }) {
				continue
			}
			msg := fmt.Sprintf("matrix.tp: tp %d fits no host (the largest, %q, has %s)", tp, largest.Name, plural(largest.GPUs, "GPU"))
			// A group or cluster that spans nodes takes whole nodes (SGLang splits tp evenly over
			// --nnodes): say which tps it would take.
			for _, h := range s.Hosts {
				if n := h.NodeCount(); n > 1 {
					msg += fmt.Sprintf("; host %q spans whole nodes of %s, up to %d: tp %s", h.Name, plural(h.GPUs, "GPU"), n, spanTPs(h))
				}
			}
			p.errf(p.tpRefs[i], "%s", msg)
		}
	}
}

// plural spells n things: "1 GPU", "4 GPUs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// spanTPs lists the tps above one node that h runs over several ("8, 12 or 16").
func spanTPs(h Host) string {
	var tps []string
	for k := 2; k <= h.NodeCount(); k++ {
		tps = append(tps, strconv.Itoa(k*h.GPUs))
	}
	if len(tps) > 4 {
		tps = append(tps[:3], "...", tps[len(tps)-1])
	}
	if len(tps) == 1 {
		return tps[0]
	}
	return strings.Join(tps[:len(tps)-1], ", ") + " or " + tps[len(tps)-1]
}

// intList spells a list of ints as YAML would: [1, 2, 3].
func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// satMul multiplies non-negative ints, saturating instead of overflowing.
func satMul(a, b int) int {
	const maxInt = int(^uint(0) >> 1)
	if a != 0 && b > maxInt/a {
		return maxInt
	}
	return a * b
}

// ownCombinations is the cross product a method's points expand (its lists or the matrix's, x tp).
func ownCombinations(s *Spec, m Method) int {
	mx := s.MatrixOf(m)
	n := 1
	for _, l := range []int{len(mx.NumSteps), len(mx.TopK), len(mx.NumDraftTokens), len(mx.TP)} {
		n = satMul(n, max(l, 1))
	}
	return n
}

// watch decodes a watch block (issue 29); crossCheck relates it to the hosts, methods and levels.
func (p *parser) watch(n *yaml.Node) *Watch {
	w := &Watch{Reference: map[int]string{}, Tolerance: 0.1}
	p.watchNode = resolve(n)
	p.object(n, "watch", []field{
		{"sweep_id", true, func(v *yaml.Node) {
			if x, ok := p.integer(v, "watch.sweep_id"); ok {
				if x < 1 {
					p.errf(resolve(v), "watch.sweep_id: must be positive, got %d", x)
				}
				w.SweepID = x
			}
		}},
		{"host", true, func(v *yaml.Node) {
			if x, ok := p.str(v, "watch.host"); ok {
				w.Host = x
			}
		}},
		{"reference", true, func(v *yaml.Node) {
			r := resolve(v)
			if r.Kind != yaml.MappingNode || len(r.Content) == 0 {
				p.errf(r, "watch.reference: expected a mapping of concurrency to point id, got %s", describe(r))
				return
			}
			for i := 0; i+1 < len(r.Content); i += 2 {
				k, val := resolve(r.Content[i]), resolve(r.Content[i+1])
				c, err := strconv.Atoi(k.Value)
				if err != nil || c < 1 {
					p.errf(k, "watch.reference: key %q is not a concurrency (a positive integer)", clip(k.Value))
					continue
				}
				id, ok := p.str(val, fmt.Sprintf("watch.reference.%d", c))
				if ok && !pointIDPattern.MatchString(id) {
					p.errf(val, "watch.reference.%d: %q is not a point id (12 hex digits)", c, clip(id))
					continue
				}
				w.Reference[c] = id
			}
		}},
		{"tolerance", false, func(v *yaml.Node) {
			if x, ok := p.number(v, "watch.tolerance"); ok {
				if !(x >= 0 && x < 1) {
					p.errf(resolve(v), "watch.tolerance: must be at least 0 and below 1 (0.1 is 10%%), got %g", x)
				}
				w.Tolerance = x
			}
		}},
	})
	return w
}

// pointIDPattern is a point id (PointID): 12 hex digits.
var pointIDPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)
