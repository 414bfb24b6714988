// Package argparse reads SGLang's launch_server command line the way Python's argparse does, so
// that every part of specsweep that looks into a point's argv (the port to probe, the host it
// binds, the API key, the flags the matrix sets) agrees with the server: the last occurrence of an
// option wins, "--opt value" and "--opt=value" are the same, and any unambiguous prefix of a long
// option names it (argparse's allow_abbrev, on by default in every release).
//
// An abbreviation is taken as ambiguous when it is a prefix of two long options of any release
// SGLang has had (options.go): specsweep does not know which release a host runs before it starts,
// and a prefix that release found ambiguous would make the server exit with a usage error anyway.
package argparse

import (
	"slices"
	"strings"
)

// Resolve names the long option token tok (without "=value") stands for, among names (options,
// each standing for itself and its aliases: "--tp-size" for "--tensor-parallel-size" too): tok
// itself, or an abbreviation that no other known option shares. It returns "" when tok is none
// of them.
func Resolve(tok string, names ...string) string { return resolve(tok, expand(names)) }

// resolve is Resolve over names already expanded.
func resolve(tok string, names []string) string {
	if !strings.HasPrefix(tok, "--") || len(tok) < 3 {
		return ""
	}
	if slices.Contains(names, tok) {
		return tok
	}
	// Only a prefix of one of names can be an abbreviation of it: most tokens (other options)
	// end here, without looking at the known options.
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, tok) }) {
		return ""
	}
	var match string
	for o := range strings.FieldsSeq(knownOptions) {
		if strings.HasPrefix(o, tok) {
			if match != "" && match != o {
				return "" // ambiguous
			}
			match = o
		}
	}
	if slices.Contains(names, match) {
		return match
	}
	return ""
}

// Last returns the value of the last occurrence of the option names (an option and its aliases)
// in argv, and whether it occurs with a value. Tokens after a lone "--" are not options.
func Last(argv []string, names ...string) (string, bool) {
	_, v, ok := LastAt(argv, names...)
	return v, ok
}

// LastAt is Last with the index in argv of that occurrence's option token (-1 when none).
func LastAt(argv []string, names ...string) (at int, value string, found bool) {
	at = -1
	names = expand(names)
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		tok, v, hasValue := strings.Cut(a, "=")
		if resolve(tok, names) == "" {
			continue
		}
		j := i
		if !hasValue {
			if i+1 >= len(argv) {
				break
			}
			i++
			v = argv[i]
		}
		at, value, found = j, v, true
	}
	return at, value, found
}

// Has reports whether a store_true option (or an abbreviation of it) is given.
func Has(argv []string, names ...string) bool {
	names = expand(names)
	for _, a := range argv {
		if a == "--" {
			return false
		}
		if tok, _, _ := strings.Cut(a, "="); resolve(tok, names) != "" {
			return true
		}
	}
	return false
}

// Set returns a copy of argv in which the option names takes value as argparse will read it: the
// value of its last occurrence replaced ("--opt value" or "--opt=value", as written), or
// "names[0] value" appended when it does not occur (before a lone "--", if any).
func Set(argv []string, value string, names ...string) []string {
	out := slices.Clone(argv)
	at, _, found := LastAt(out, names...)
	if found {
		if tok, _, hasValue := strings.Cut(out[at], "="); hasValue {
			out[at] = tok + "=" + value
		} else {
			out[at+1] = value
		}
		return out
	}
	end := slices.Index(out, "--")
	if end < 0 {
		return append(out, names[0], value)
	}
	return slices.Insert(out, end, names[0], value)
}
