package sweep

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/specsweep/specsweep/internal/argparse"
)

// argNodes are a method's args' nodes and the path they are under (methods.NAME or
// methods.NAME.args).
type argNodes struct {
	path  string
	nodes []*yaml.Node
}

// argsAt is args for a method's list, keeping where it is for repeatCheck.
func (p *parser) argsAt(n *yaml.Node, path string) ([]string, argNodes) {
	args, nodes := p.args(n, path, false)
	return args, argNodes{path, nodes}
}

// repeatCheck warns about an option given more than once in the args a point passes to SGLang
// (server.args, then the method's): argparse keeps the last, so the earlier ones do nothing.
// The planner's own flags cannot repeat (the args may not carry them) and server.command is
// taken to hold no options. A repeat within server.args is told once, not once per method, and
// server.args is read once (a spec may hold many methods).
func (p *parser) repeatCheck(s *Spec) {
	srv := len(s.Server.Args)
	where := func(m argNodes, i int) (string, *yaml.Node) {
		if i < srv {
			if i < len(p.serverArgNodes) {
				return index("server.args", i), p.serverArgNodes[i]
			}
			return index("server.args", i), nil
		}
		if i-srv < len(m.nodes) {
			return index(m.path, i-srv), m.nodes[i-srv]
		}
		return index(m.path, i-srv), nil
	}
	// report warns at the first occurrence of option (indices in server.args + the method's args).
	report := func(m argNodes, option string, at []int, last string) {
		lastPath, lastNode := where(m, at[len(at)-1])
		firstPath, firstNode := where(m, at[0])
		times := "twice"
		if len(at) > 2 {
			times = fmt.Sprintf("%d times", len(at))
		}
		line := ""
		if lastNode != nil {
			line = fmt.Sprintf(" (line %d)", lastNode.Line)
		}
		p.warnf(firstNode, "%s: %s is given %s; SGLang uses the last occurrence, %s%s: %s", firstPath, option, times,
			lastPath, line, clip(last))
	}
	known := argparse.Known()
	for _, r := range known.Repeats(s.Server.Args) {
		report(argNodes{}, r.Option, r.At, shownOption(s.Server.Args, r.At[len(r.At)-1]))
	}
	if slices.Contains(s.Server.Args, "--") {
		return // the method's args are not options
	}
	inServer := map[string][]int{}
	for i, o := range known.Options(s.Server.Args) {
		if o != "" {
			inServer[o] = append(inServer[o], i)
		}
	}
	for name, m := range s.Methods {
		inMethod := map[string][]int{}
		var order []string
		for i, o := range known.Options(m.Args) {
			if o == "" {
				continue
			}
			if _, seen := inMethod[o]; !seen {
				order = append(order, o)
			}
			inMethod[o] = append(inMethod[o], srv+i)
		}
		for _, o := range order {
			at := slices.Concat(inServer[o], inMethod[o])
			if len(at) > 1 {
				report(p.methodArgNodes[name], o, at, shownOption(m.Args, at[len(at)-1]-srv))
			}
		}
	}
}

// shownOption spells the option at argv[i] with its value, as written: "--opt=v", "--opt v",
// or "--opt" alone when the next token is another option (or there is none).
func shownOption(argv []string, i int) string {
	if strings.Contains(argv[i], "=") || i+1 >= len(argv) || strings.HasPrefix(argv[i+1], "--") {
		return argv[i]
	}
	return argv[i] + " " + argv[i+1]
}
