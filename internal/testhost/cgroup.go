package testhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// cgroupParent is the directory, in each cgroup hierarchy systemd uses, that holds the cgroups of
// the test hosts (systemdCgroups).
const cgroupParent = "sst-hosts"

// systemdCgroups lists where, in each cgroup hierarchy a test host's systemd works in, the cgroups
// of this process's test hosts go: under this process's own cgroup of that hierarchy (a session's
// memory cgroup, say, keeps counting them), <mount><own path>/sst-hosts/<host name>. The hierarchies
// are every cgroup2 mount and the v1 ones systemd makes its units' cgroups in (name=systemd, pids,
// devices, memory). Each host gets a cgroup of its own in each, and a cgroup namespace rooted there:
// without them every host's systemd made its units' cgroups in the same machine-wide trees
// (/system.slice/sglang.service for all of them), and hosts started side by side took each other's
// cgroups away ("Failed at step CGROUP spawning ...: No such file or directory", status 219).
func systemdCgroups() ([]string, error) {
	dirs, err := ownCgroupDirs(true, "name=systemd", "pids", "devices", "memory")
	if err != nil {
		return nil, err
	}
	for i := range dirs {
		dirs[i] = filepath.Join(dirs[i], cgroupParent)
	}
	sort.Strings(dirs)
	return dirs, nil
}

// ownCgroupDirs lists this process's own cgroup, <mount><own path>, in every v1 hierarchy mounted
// with one of controllers among its options, and in every cgroup2 mount if cgroup2.
func ownCgroupDirs(cgroup2 bool, controllers ...string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("testhost: read mountinfo: %w", err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("testhost: read own cgroups: %w", err)
	}
	// Own path per hierarchy, keyed by its controllers as /proc/self/cgroup names them ("" for
	// cgroup2).
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			paths[f[1]] = f[2]
		}
	}
	var dirs []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue // not a hierarchy's root mount
		}
		key := ""
		switch g[0] {
		case "cgroup2":
			if !cgroup2 {
				continue
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if slices.Contains(controllers, o) {
					key = o
				}
			}
			if key == "" {
				continue
			}
			// The hierarchy's name in /proc/self/cgroup: its controllers, as mounted together.
			for k := range paths {
				if k != "" && hasOption(k, key) {
					key = k
				}
			}
		default:
			continue
		}
		p, ok := paths[key]
		if !ok {
			continue
		}
		dirs = append(dirs, filepath.Join(f[4], p))
	}
	return dirs, nil
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// hostCgroups makes the host's cgroup in each of parents (systemdCgroups) and returns their paths.
func hostCgroups(parents []string, name string) ([]string, error) {
	var dirs []string
	for _, m := range parents {
		d := filepath.Join(m, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dirs, fmt.Errorf("testhost: make cgroup %s: %w", d, err)
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// removeCgroup removes the cgroup dir and every cgroup under it, deepest first (a cgroup is removed
// by rmdir once it has no process and no child). It says what it could not remove.
func removeCgroup(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("testhost: list cgroup %s: %w", dir, err)
	}
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
