package api

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

func policySpec(t *testing.T, hosts string) *sweep.Spec {
	t.Helper()
	spec, err := sweep.Parse("p.yaml", []byte(apiSpec(hosts)))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestSpecPolicyKeyPaths: identity_file and known_hosts must lie in the daemon's ~/.ssh once ~ is
// expanded, the path cleaned and its symlinks resolved.
func TestSpecPolicyKeyPaths(t *testing.T) {
	real := t.TempDir()
	ssh := filepath.Join(real, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"id_ed25519", "known_hosts"} {
		if err := os.WriteFile(filepath.Join(ssh, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "host_key")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out":      outside,                           // a symlink out of ~/.ssh
		"dangling": filepath.Join(t.TempDir(), "new"), // would be created through the link
		"in":       filepath.Join(ssh, "id_ed25519"),  // a symlink inside is fine
		"up":       "..",                              // a directory symlink out
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ssh, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon's HOME may itself be a symlink.
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	p := SpecPolicy{Home: home}
	for _, ok := range []string{"~/.ssh/id_ed25519", home + "/.ssh/id_ed25519", real + "/.ssh/known_hosts",
		"~/.ssh/new_known_hosts", "~/.ssh/sub/dir/known_hosts", "~/.ssh/in", "~/.ssh/./id_ed25519", "~/.ssh//id_ed25519"} {
		for _, key := range []string{"identity_file", "known_hosts"} {
			if err := p.CheckSpec(policySpec(t, "hosts: [{name: h, address: h.example, "+key+": "+ok+"}]")); err != nil {
				t.Errorf("%s %s refused: %v", key, ok, err)
			}
		}
	}
	for _, bad := range []string{"/etc/ssh/ssh_host_ed25519_key", "~/.ssh/../../etc/x", "~/.ssh/out", "~/.ssh/dangling",
		"~/.ssh/up/x", "~/.ssh", "~", "~/.ssh2/id", "id_ed25519", ".ssh/id_ed25519", "~root/.ssh/id_ed25519", outside,
		"~/.ssh/id_ed25519/x", "~/.ssh/x/../id_ed25519", "~/.ssh/up/../id_ed25519"} {
		for _, key := range []string{"identity_file", "known_hosts"} {
			err := p.CheckSpec(policySpec(t, "hosts: [{name: h, address: h.example, "+key+": \""+bad+"\"}]"))
			var pe *PolicyError
			if !errors.As(err, &pe) || len(pe.Problems) != 1 || !strings.Contains(err.Error(), "--allow-any-key-path") ||
				!strings.Contains(err.Error(), key) {
				t.Errorf("%s %s: %v, want a refusal naming --allow-any-key-path", key, bad, err)
			}
		}
	}
	// A group's nodes are checked too: a node's own key path, and the group's once.
	err := p.CheckSpec(policySpec(t, "hosts: [{name: g, gpus: 4, known_hosts: /etc/kh, nodes: [{address: a.example}, {address: b.example, identity_file: /etc/ssh/ssh_host_ed25519_key}]}]"))
	var pe *PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 2 || !strings.Contains(pe.Problems[0], "hosts[0] (g): known_hosts") ||
		!strings.Contains(pe.Problems[1], "hosts[0] (g).nodes[1] (g-1): identity_file") {
		t.Errorf("group: %v, want the group's known_hosts and node 1's identity_file refused", err)
	}
	if err := (SpecPolicy{AllowAnyKeyPath: true}).CheckSpec(policySpec(t,
		"hosts: [{name: h, address: h.example, identity_file: /etc/ssh/ssh_host_ed25519_key, known_hosts: /etc/x}]")); err != nil {
		t.Errorf("--allow-any-key-path: %v", err)
	}
	// Without a home directory every explicit path is refused; the defaults are fine.
	if err := (SpecPolicy{}).CheckSpec(policySpec(t, "hosts: [{name: h, address: h.example, known_hosts: ~/.ssh/known_hosts}]")); err == nil {
		t.Error("no home: an explicit path was accepted")
	}
	if err := (SpecPolicy{}).CheckSpec(policySpec(t, "")); err != nil {
		t.Errorf("no explicit paths: %v", err)
	}
}

func TestSpecPolicyLocalDriver(t *testing.T) {
	spec := policySpec(t, "hosts: [{name: a, address: a.example}, {name: here, driver: local}, {name: there, driver: local}]")
	err := SpecPolicy{}.CheckSpec(spec)
	var pe *PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 2 || !strings.Contains(pe.Problems[0], "hosts[1] (here)") ||
		!strings.Contains(pe.Problems[0], "--allow-local-driver") {
		t.Errorf("local driver: %v, want two refusals naming --allow-local-driver", err)
	}
	if err := (SpecPolicy{AllowLocalDriver: true}).CheckSpec(spec); err != nil {
		t.Errorf("--allow-local-driver: %v", err)
	}
}

// TestSpecPolicyDatasetFiles: a dataset file named over the API must lie in --dataset-dir (the
// daemon reads it as its own user); without --dataset-dir every dataset file is refused.
func TestSpecPolicyDatasetFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sharegpt.json"), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "shadow")); err != nil {
		t.Fatal(err)
	}
	withDataset := func(path string) *sweep.Spec {
		t.Helper()
		text := strings.Replace(apiSpec(""), "workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}",
			"workload: {concurrency: [1], requests: 2, output_tokens: 8, dataset: \"sharegpt:"+path+"\"}", 1)
		spec, err := sweep.Parse("p.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	p := SpecPolicy{DatasetDir: dir}
	if err := p.CheckSpec(withDataset(filepath.Join(dir, "sharegpt.json"))); err != nil {
		t.Errorf("a dataset in --dataset-dir refused: %v", err)
	}
	for _, bad := range []string{"/etc/shadow", filepath.Join(dir, "shadow"), filepath.Join(dir, "..", "x.json"), dir} {
		err := p.CheckSpec(withDataset(bad))
		var pe *PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--dataset-dir") {
			t.Errorf("dataset %s: %v, want a refusal naming --dataset-dir", bad, err)
		}
	}
	if err := (SpecPolicy{}).CheckSpec(withDataset(filepath.Join(dir, "sharegpt.json"))); err == nil ||
		!strings.Contains(err.Error(), "no --dataset-dir") {
		t.Errorf("no --dataset-dir: %v, want a refusal", err)
	}
	if err := (SpecPolicy{}).CheckSpec(policySpec(t, "")); err != nil {
		t.Errorf("the random dataset: %v", err)
	}
}

// TestSpecPolicyLocalSlurm: a cluster without an address submits jobs from the daemon's machine as
// the daemon's user: refused over the API as driver local is; a cluster at a login node is not.
func TestSpecPolicyLocalSlurm(t *testing.T) {
	spec := policySpec(t, "hosts: [{name: far, driver: slurm, address: login.example}, {name: near, driver: slurm}]")
	err := SpecPolicy{}.CheckSpec(spec)
	var pe *PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || !strings.Contains(pe.Problems[0], "hosts[1] (near)") ||
		!strings.Contains(pe.Problems[0], "--allow-local-driver") {
		t.Errorf("local slurm: %v, want one refusal naming --allow-local-driver", err)
	}
	if err := (SpecPolicy{AllowLocalDriver: true}).CheckSpec(spec); err != nil {
		t.Errorf("--allow-local-driver: %v", err)
	}
}
