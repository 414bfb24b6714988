package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// GET /api/sweeps/{id} names the sweep's hosts with their GPU counts: the dashboard's GPUs column of
// a host that runs one point at a time (its activity carries GPU indices only for a packing slot).
func TestSweepDetailNamesItsHostsGPUs(t *testing.T) {
	t.Parallel()
	a := newAPIHarness(t, APIConfig{})
	spec := apiSpec("hosts: [{name: big, address: big.example, gpus: 4}, {name: small, address: small.example, gpus: 1}]")
	if w := a.do("POST", "/api/sweeps", spec, nil); w.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	sws, _ := a.db.ListSweeps(context.Background())
	w := a.do("GET", "/api/sweeps/"+jsonInt(sws[0].ID), "", nil)
	var j SweepDetailJSON
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &j) != nil {
		t.Fatalf("GET sweep: %d %s", w.Code, w.Body)
	}
	want := []HostJSON{{Name: "big", GPUs: 4}, {Name: "small", GPUs: 1}}
	if len(j.Hosts) != len(want) || j.Hosts[0] != want[0] || j.Hosts[1] != want[1] {
		t.Errorf("hosts %+v, want %+v", j.Hosts, want)
	}
}
