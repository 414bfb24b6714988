package api

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/specsweep/specsweep/sweep"
)

// SpecPolicy says what a spec submitted over the HTTP API may ask of the daemon. A spec runs with the
// daemon's rights: driver local runs server.command on the daemon's machine as the daemon's user,
// and identity_file / known_hosts choose which private key the daemon presents and which file it
// writes host keys to. Specs submitted with the CLI are not checked: writing the database already
// takes the daemon's rights.
type SpecPolicy struct {
	AllowLocalDriver bool // --allow-local-driver
	AllowAnyKeyPath  bool // --allow-any-key-path
	// Home is the daemon's home directory: identity_file and known_hosts must lie in Home/.ssh.
	// Empty refuses every explicit path (unless AllowAnyKeyPath).
	Home string
	// DatasetDir (--dataset-dir) is where workload.dataset files named over the API must lie: the
	// daemon reads them as its own user. Empty refuses every dataset file over the API.
	DatasetDir string
}

// PolicyError lists what a spec asks that the policy refuses.
type PolicyError struct{ Problems []string }

func (e *PolicyError) Error() string { return strings.Join(e.Problems, "; ") }

// CheckSpec returns a *PolicyError naming every host field the policy refuses, or nil.
func (p SpecPolicy) CheckSpec(spec *sweep.Spec) error {
	var problems []string
	var sshDir string
	if p.Home != "" {
		sshDir = resolvePath(filepath.Join(p.Home, ".ssh"))
	}
	for i, h := range spec.Hosts {
		at := fmt.Sprintf("hosts[%d] (%s)", i, h.Name)
		if h.Driver == sweep.DriverLocal && !p.AllowLocalDriver {
			problems = append(problems, fmt.Sprintf("%s: driver local runs server.command on the daemon's machine as the daemon's user; "+
				"the daemon refuses it over the API unless started with --allow-local-driver", at))
		}
		if h.Driver == sweep.DriverSlurm && h.Address == "" && !p.AllowLocalDriver {
			problems = append(problems, fmt.Sprintf("%s: driver slurm without an address submits jobs from the daemon's machine as the daemon's user; "+
				"the daemon refuses it over the API unless started with --allow-local-driver", at))
		}
		if p.AllowAnyKeyPath {
			continue
		}
		type keyPath struct{ at, key, path string }
		paths := []keyPath{{at, "identity_file", h.IdentityFile}, {at, "known_hosts", h.KnownHosts}}
		// A group's nodes have SSH settings of their own (those of the group where they give none).
		for j, n := range h.Nodes {
			nat := fmt.Sprintf("%s.nodes[%d] (%s)", at, j, n.Name)
			if n.IdentityFile != h.IdentityFile { // an inherited one is the group's, checked above
				paths = append(paths, keyPath{nat, "identity_file", n.IdentityFile})
			}
			if n.KnownHosts != h.KnownHosts {
				paths = append(paths, keyPath{nat, "known_hosts", n.KnownHosts})
			}
		}
		for _, f := range paths {
			if f.path == "" {
				continue
			}
			if sshDir == "" || hasDotDot(f.path) || !within(sshDir, resolvePath(expandHome(f.path, p.Home))) {
				problems = append(problems, fmt.Sprintf("%s: %s %q is outside the daemon's ~/.ssh (%s); "+
					"the daemon refuses it over the API unless started with --allow-any-key-path", f.at, f.key, f.path, orUnknown(sshDir)))
			}
		}
	}
	for i, d := range spec.Workload.Datasets {
		// A prompt set file is read by the daemon as its own user: only from --dataset-dir.
		dir := ""
		if p.DatasetDir != "" {
			dir = resolvePath(p.DatasetDir)
		}
		if dir == "" || !filepath.IsAbs(d.Path) || hasDotDot(d.Path) || !within(dir, resolvePath(d.Path)) {
			where := "no --dataset-dir was given"
			if dir != "" {
				where = "it is outside --dataset-dir " + dir
			}
			if !filepath.IsAbs(d.Path) {
				where = "it is not absolute, and the daemon has no spec folder to resolve it against"
			}
			problems = append(problems, fmt.Sprintf("workload.datasets[%d].path: the daemon reads %q as its own user, and %s; "+
				"start the daemon with --dataset-dir DIR and put the file there", i, d.Path, where))
		}
	}
	if path := spec.Workload.DatasetPath(); path != "" {
		dir := ""
		if p.DatasetDir != "" {
			dir = resolvePath(p.DatasetDir)
		}
		if dir == "" || hasDotDot(path) || !within(dir, resolvePath(expandHome(path, p.Home))) {
			where := "no --dataset-dir was given"
			if dir != "" {
				where = "it is outside --dataset-dir " + dir
			}
			problems = append(problems, fmt.Sprintf("workload.dataset: the daemon reads %q as its own user, and %s; "+
				"start the daemon with --dataset-dir DIR and put the dataset there", path, where))
		}
	}
	if len(problems) > 0 {
		return &PolicyError{Problems: problems}
	}
	return nil
}

// expandHome expands ~ and ~/ the way hostctl does (other ~user forms stay as written).
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// hasDotDot: p has a ".." element. Such paths are refused outright: the kernel resolves ".." after
// symlinks, filepath.Clean before them, so cleaning could make a path look inside that is not.
func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")
}

// resolvePath makes p absolute and clean and resolves the symlinks of its longest existing prefix,
// so neither ".." nor a symlink can lead out of a directory unnoticed. A relative path is taken
// against the working directory, as the SSH layer opens it. "" means it cannot be resolved.
func resolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	dir, rest := abs, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		// Only a missing entry may be skipped: a dangling symlink would be followed when the file
		// is created (known_hosts with --accept-new-host-keys).
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// within says whether path lies strictly inside dir (both resolved).
func within(dir, path string) bool {
	if dir == "" || path == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown: HOME is not set"
	}
	return s
}
