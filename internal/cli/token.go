package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tokenBytes is the size of a generated API token (hex-encoded in its file).
const tokenBytes = 32

// apiToken returns the bearer token the daemon's API requires and the file it is in: tokenFile when
// given, else DB.token beside the database, created at the first start and reused after.
func apiToken(dbFile, tokenFile string) (token, path string, err error) {
	if tokenFile != "" {
		tok, err := readTokenFile(tokenFile)
		return tok, tokenFile, err
	}
	path = dbFile + ".token"
	tok, err := readTokenFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, path, err
	}
	switch err := createTokenFile(path); {
	case errors.Is(err, fs.ErrExist):
		// Another daemon made it first: use its token.
	case err != nil:
		return "", path, err
	}
	tok, err = readTokenFile(path)
	return tok, path, err
}

// readTokenFile reads a token file, refusing one that group or others may read or write.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if m := fi.Mode().Perm(); m&0o066 != 0 {
		return "", fmt.Errorf("token file %s is readable or writable by group or others (mode %04o): "+
			"anyone who reads it controls the daemon; run `chmod 600 %s` (and replace the token if others read it)", path, m, path)
	}
	// Another user's file: its owner can read the token and swap it at will.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("token file %s belongs to uid %d, not to the daemon's user (uid %d): whoever owns it controls "+
			"the daemon; `chown %d %s` or let the daemon create its own", path, st.Uid, os.Geteuid(), os.Geteuid(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("token file %s: want one non-empty line", path)
	}
	return tok, nil
}

// createTokenFile writes a new random token to path, mode 0600 from the start: it is written to a
// temporary file created with O_EXCL and 0600, then hard-linked into place, so the token is never
// readable by others nor visible half-written; an existing path is left alone (fs.ErrExist).
func createTokenFile(path string) error {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("token file %s: generating a token: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("token file %s: writing: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("token file %s: writing: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("token file %s: writing: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("token file %s: creating: %w", path, err)
	}
	return nil
}
