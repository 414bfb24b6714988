package sweep

import (
	"fmt"
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
// taken to hold no options. A repeat within server.args is told once, not once per method.
func (p *parser) repeatCheck(s *Spec) {
	srv := len(s.Server.Args)
	at := func(m argNodes, i int) (string, *yaml.Node) {
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
	report := func(argv []string, m argNodes, r argparse.Repeat) {
		last := r.At[len(r.At)-1]
		lastPath, lastNode := at(m, last)
		firstPath, firstNode := at(m, r.At[0])
		times := "twice"
		if len(r.At) > 2 {
			times = fmt.Sprintf("%d times", len(r.At))
		}
		line := ""
		if lastNode != nil {
			line = fmt.Sprintf(" (line %d)", lastNode.Line)
		}
		p.warnf(firstNode, "%s: %s is given %s; SGLang uses the last occurrence, %s%s: %s", firstPath, r.Option, times,
			lastPath, line, clip(shownOption(argv, last)))
	}
	for _, r := range argparse.Repeats(s.Server.Args) {
		report(s.Server.Args, argNodes{}, r)
	}
	for name, m := range s.Methods {
		argv := append(append([]string{}, s.Server.Args...), m.Args...)
		for _, r := range argparse.Repeats(argv) {
			if r.At[len(r.At)-1] >= srv {
				report(argv, p.methodArgNodes[name], r)
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
