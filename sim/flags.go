package sim

import (
	"embed"
	"encoding/json"
	"fmt"
	"strconv"
)

// The launch flag tables, one per era, extracted from each era's
// server_args.py (source repository and commit inside each file).
//
//go:embed flags/*.json
var flagFiles embed.FS

// FlagTable is one era's argparse table as stored in flags/*.json.
type FlagTable struct {
	Release string `json:"release"`
	Prog    string `json:"prog"`
	Source  struct {
		Repo        string `json:"repo"`
		Path        string `json:"path"`
		Commit      string `json:"commit"`
		VersionFile string `json:"version_file"`
	} `json:"source"`
	Flags             []FlagSpec `json:"flags"`
	ExcludedForkFlags []string   `json:"excluded_fork_flags"`
}

// FlagSpec is one add_argument call: option strings, dest, the type's name
// (int, float, str, human_readable_int, loads, json_list_type, bool for
// store_true, boolopt for BooleanOptionalAction, ...), choices, nargs.
type FlagSpec struct {
	Names          []string `json:"names"`
	Dest           string   `json:"dest"`
	Type           string   `json:"type"`
	Default        any      `json:"default"`
	Required       bool     `json:"required"`
	Choices        []any    `json:"choices"`
	ChoicesUnknown bool     `json:"choices_unknown"` // choices come from a plugin registry
	Nargs          string   `json:"nargs"`
	Action         string   `json:"action"`
}

// LoadFlagTable reads the named era's table.
func LoadFlagTable(era *Era) (*FlagTable, error) {
	b, err := flagFiles.ReadFile("flags/" + era.Table)
	if err != nil {
		return nil, fmt.Errorf("flag table of %s: %w", era.Name, err)
	}
	var t FlagTable
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("flag table of %s: %w", era.Name, err)
	}
	return &t, nil
}

type flagKind int

const (
	kindValue      flagKind = iota // takes values (nargs)
	kindStoreTrue                  // store_true
	kindBoolOpt                    // BooleanOptionalAction: --x / --no-x
	kindZeroArgs                   // deprecated or store_const actions: no value
	kindZeroArgErr                 // a deprecated action that refuses the flag
)

// flagDef describes one launch option the way argparse knows it.
type flagDef struct {
	names      []string // option strings as declared; errors join them with "/"
	dest       string
	kind       flagKind
	conv       string // the type's name, as argparse prints it in errors
	choices    []string
	intChoices bool
	nargs      string // "", "?", "*", "+"
	req        bool
	deprecated bool // warns when given
	dflt       any
}

func buildDefs(t *FlagTable) []*flagDef {
	defs := make([]*flagDef, 0, len(t.Flags))
	for _, f := range t.Flags {
		d := &flagDef{names: f.Names, dest: f.Dest, conv: f.Type, nargs: f.Nargs, req: f.Required, dflt: f.Default}
		if v, ok := f.Default.(float64); ok && (f.Type == "int" || f.Type == "human_readable_int") {
			d.dflt = int(v) // JSON numbers decode as float64
		}
		switch f.Type {
		case "bool":
			d.kind = kindStoreTrue
		case "boolopt":
			d.kind = kindBoolOpt
			d.names = append(append([]string(nil), f.Names...), "--no-"+f.Names[0][2:])
		case "deprecated", "const":
			d.kind = kindZeroArgs
		case "deprecated_error":
			d.kind = kindZeroArgErr
		}
		d.deprecated = f.Action == "deprecated" || f.Type == "deprecated"
		for _, c := range f.Choices {
			switch v := c.(type) {
			case float64:
				d.choices = append(d.choices, strconv.Itoa(int(v)))
				d.intChoices = true
			case string:
				d.choices = append(d.choices, v)
			}
		}
		defs = append(defs, d)
	}
	return defs
}
