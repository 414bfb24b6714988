package cli

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAPITokenIsCreatedPrivateAndReused: without --token-file the daemon makes DB.token (32 random
// bytes, hex, newline), mode 0600 whatever the umask, and reads the same token at the next start.
func TestAPITokenIsCreatedPrivateAndReused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	old := syscall.Umask(0) // a umask must not be what keeps the file private
	tok, path, err := apiToken(db, "")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if path != db+".token" {
		t.Errorf("token file %s, want %s", path, db+".token")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("token file mode %04o, want 0600", m)
	}
	b, _ := os.ReadFile(path)
	if raw, err := hex.DecodeString(strings.TrimSuffix(string(b), "\n")); err != nil || len(raw) != 32 || string(b) != tok+"\n" {
		t.Errorf("token file holds %q (token %q), want 64 hex digits and a newline", b, tok)
	}
	again, _, err := apiToken(db, "")
	if err != nil || again != tok {
		t.Errorf("second start: %q %v, want the same token", again, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left beside the database: %v", ents)
	}
	other, _, err := apiToken(filepath.Join(dir, "other.db"), "")
	if err != nil || other == tok {
		t.Errorf("another database's token: %q %v, want a new one", other, err)
	}
}

// TestAPITokenRefusesFilesOthersMayReadOrWrite: a token file (given or default) that group or
// others may read or write is refused, naming the file and the fix.
func TestAPITokenRefusesFilesOthersMayReadOrWrite(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o644, 0o640, 0o620, 0o604, 0o602, 0o666} {
		f := filepath.Join(dir, "given")
		if err := os.WriteFile(f, []byte("s3cret-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := apiToken(filepath.Join(dir, "x.db"), f); err == nil || !strings.Contains(err.Error(), f) ||
			!strings.Contains(err.Error(), "chmod 600 "+f) {
			t.Errorf("--token-file mode %04o: %v, want a refusal naming the file and chmod 600", mode, err)
		}
		db := filepath.Join(dir, "d.db")
		if err := os.WriteFile(db+".token", []byte("s3cret-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(db+".token", mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := apiToken(db, ""); err == nil || !strings.Contains(err.Error(), "chmod 600 "+db+".token") {
			t.Errorf("default token file mode %04o: %v, want a refusal", mode, err)
		}
		if b, _ := os.ReadFile(db + ".token"); string(b) != "s3cret-token\n" {
			t.Errorf("the refused token file was changed: %q", b)
		}
	}
	f := filepath.Join(dir, "ok")
	if err := os.WriteFile(f, []byte("  s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, path, err := apiToken(filepath.Join(dir, "x.db"), f); err != nil || tok != "s3cret-token" || path != f {
		t.Errorf("--token-file 0600: %q %q %v", tok, path, err)
	}
	for _, bad := range []string{"", "\n\n", "a\nb\n"} {
		if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := apiToken(filepath.Join(dir, "x.db"), f); err == nil {
			t.Errorf("token file %q accepted", bad)
		}
	}
}

// TestDaemonRefusesAnOpenTokenFile: the daemon does not start with a token file others may read.
func TestDaemonRefusesAnOpenTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret-token\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runMain(t, nil, "daemon", "--db", filepath.Join(dir, "d.db"), "--listen", "127.0.0.1:0", "--token-file", tok)
	if code != ExitFailure || !strings.Contains(errs, "chmod 600 "+tok) {
		t.Errorf("daemon with a 0644 token file: code %d, stderr:\n%s", code, errs)
	}
}

// TestAPITokenRefusesAnotherUsersFile: a token file owned by another user is refused (its owner could
// read and replace the token); root only (chown).
func TestAPITokenRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, _, err := apiToken(filepath.Join(t.TempDir(), "x.db"), f); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("a token file of uid 65534: %v, want a refusal", err)
	}
}
