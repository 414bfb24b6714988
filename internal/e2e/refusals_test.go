package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonLogsRefusalsWithoutFlooding: 3000 requests without the token in a burst, as any local
// user may send them, are refused (401) but logged as one line, not one line each (the summary of
// the rest comes when the minute ends: internal/refusals' tests).
func TestDaemonLogsRefusalsWithoutFlooding(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	d := startDaemon(t, filepath.Join(t.TempDir(), "d.db"))
	cmd, addr, out := d.cmd, d.addr, d.out
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 3000; i++ {
		resp, err := client.Get("http://" + addr + "/api/sweeps")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d: %d, want 401", i, resp.StatusCode)
		}
	}
	signal(t, cmd, syscall.SIGTERM)
	_ = cmd.Wait()
	n := strings.Count(out.String(), "API request refused")
	if n != 1 {
		t.Errorf("3000 refused requests made %d log lines, want 1:\n%s", n, tail(out.String(), 5))
	}
}
