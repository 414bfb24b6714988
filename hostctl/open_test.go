package hostctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

// TestOpenSaysWhatADriverCanDo: Open makes every driver of the spec, and each says through its
// interface how many points it runs at once and who places them: a packing host one per GPU with
// the GPUs shared out, a cluster max_jobs placed by Slurm, any other host one.
func TestOpenSaysWhatADriverCanDo(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		h    sweep.Host
		want Slots
	}{
		{sweep.Host{Name: "a", Driver: sweep.DriverLocal, GPUs: 1}, Slots{N: 1}},
		{sweep.Host{Name: "b", Driver: sweep.DriverLocal, GPUs: 4, Pack: true}, Slots{N: 4, GPUs: true}},
		{sweep.Host{Name: "c", Driver: sweep.DriverSSH, Address: "10.231.0.9", GPUs: 8}, Slots{N: 1}},
		{sweep.Host{Name: "d", Driver: sweep.DriverSSH, Address: "10.231.0.9", GPUs: 8, Pack: true}, Slots{N: 8, GPUs: true}},
		{sweep.Host{Name: "e", Driver: sweep.DriverSlurm, Address: "10.231.0.9", GPUs: 1, Slurm: &sweep.Slurm{MaxJobs: 3}}, Slots{N: 3}},
		{sweep.Host{Name: "f", Driver: sweep.DriverSlurm, GPUs: 1, Slurm: &sweep.Slurm{MaxJobs: 1}}, Slots{N: 1}},
	} {
		d, err := Open(ctx, c.h, Options{Sweep: "s"})
		if err != nil {
			t.Fatalf("%s: %v", c.h.Name, err)
		}
		if got := d.Slots(); got != c.want {
			t.Errorf("%s (%s): Slots %+v, want %+v", c.h.Name, c.h.Driver, got, c.want)
		}
		if d.Name() != c.h.Name {
			t.Errorf("%s: named %q", c.h.Name, d.Name())
		}
		for k := range d.Slots().N {
			if n := d.Slot(k).Name(); n != c.h.Name {
				t.Errorf("%s: slot %d named %q, want the host's name", c.h.Name, k, n)
			}
		}
		if err := d.Close(); err != nil {
			t.Errorf("%s: Close of a host never connected: %v", c.h.Name, err)
		}
	}
	for _, c := range []struct {
		h    sweep.Host
		want string
	}{
		{sweep.Host{Name: "x", Driver: "kubernetes"}, `host x: unknown driver "kubernetes"`},
		{sweep.Host{Name: "y", Driver: sweep.DriverSlurm}, "host y: driver slurm without its slurm block"},
	} {
		if _, err := Open(ctx, c.h, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v): %v, want %q", c.h, err, c.want)
		}
	}
}

// TestOpenConnectsOnFirstUse: Open dials nothing, so an unreachable host is trouble of its points
// (the runner retries them), not a refusal of the sweep; its first use says why.
func TestOpenConnectsOnFirstUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), DoctorTimeout)
	defer cancel()
	kh := t.TempDir() + "/known_hosts"
	o := SSHOptions{Address: "127.0.0.1:1", User: "root", KnownHosts: kh, ConfigFile: "none", noAgent: true,
		HandshakeTimeout: DoctorTimeout, ReconnectFor: time.Second}
	for _, h := range []sweep.Host{
		{Name: "ssh", Driver: sweep.DriverSSH, Address: o.Address},
		{Name: "cluster", Driver: sweep.DriverSlurm, Address: o.Address, Slurm: &sweep.Slurm{MaxJobs: 2}},
	} {
		d, err := Open(ctx, h, Options{Sweep: "s", ssh: &o})
		if err != nil {
			t.Fatalf("%s: Open dialled: %v", h.Name, err)
		}
		if _, err := d.Start(ctx, Launch{Argv: []string{"/bin/true"}}); err == nil {
			t.Errorf("%s: Start on a closed port succeeded", h.Name)
		}
		if err := d.Slot(1).Restore(ctx); err != nil {
			t.Errorf("%s: Restore of a slot never used: %v, want nothing to do", h.Name, err)
		}
		if err := d.Restore(ctx); err == nil || !strings.Contains(err.Error(), "restore "+h.Name) {
			t.Errorf("%s: Restore of an unreachable host: %v, want it to say so", h.Name, err)
		}
	}
}
