package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAPIListPages: GET /api/sweeps answers a bounded page, oldest first, with a Link to the next
// one; following the links lists every sweep once; bad parameters are 400.
func TestAPIListPages(t *testing.T) {
	a := newAPIHarness(t, APIConfig{})
	const n = 7
	for i := 0; i < n; i++ {
		spec := strings.Replace(apiSpec(""), "name: api", fmt.Sprintf("name: s%d", i), 1)
		if w := a.do("POST", "/api/sweeps", spec, nil); w.Code != http.StatusCreated {
			t.Fatalf("submit %d: %d %s", i, w.Code, w.Body)
		}
	}
	var seen []int64
	next := "/api/sweeps?limit=3"
	for pages := 0; next != ""; pages++ {
		if pages > n {
			t.Fatal("the links never end")
		}
		w := a.do("GET", next, "", nil)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", next, w.Code, w.Body)
		}
		var page []SweepJSON
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("%s: %d sweeps, want at most 3", next, len(page))
		}
		for _, s := range page {
			seen = append(seen, s.ID)
		}
		next = ""
		if l := w.Header().Get("Link"); l != "" {
			if !strings.HasPrefix(l, "<") || !strings.HasSuffix(l, `>; rel="next"`) {
				t.Fatalf("Link %q", l)
			}
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
			if u, err := url.Parse(next); err != nil || u.Query().Get("limit") != "3" {
				t.Fatalf("next page %q keeps the limit", next)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %v, want %d sweeps", seen, n)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("listed %v: want each once, oldest first", seen)
		}
	}
	// The default page is bounded; a filter by state.
	w := a.do("GET", "/api/sweeps?state=queued,done", "", nil)
	var all []SweepJSON
	if err := json.Unmarshal(w.Body.Bytes(), &all); err != nil || len(all) != n || w.Header().Get("Link") != "" {
		t.Errorf("state filter: %d sweeps, Link %q, %v", len(all), w.Header().Get("Link"), err)
	}
	if w := a.do("GET", "/api/sweeps?state=done", "", nil); strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("no done sweep: %s", w.Body)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=-1", "after=x", "state=bogus"} {
		if w := a.do("GET", "/api/sweeps?"+q, "", nil); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, w.Code)
		}
	}
}
