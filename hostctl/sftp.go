// SFTP: the client (under sudo for a non-root login), atomic and private writes, reads, removes, stat.

package hostctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// sftpClient returns the SFTP client on the current connection; a non-root
// login runs sftp-server under `sudo -n`. Like Run, it reconnects once when
// the connection turns out broken as the client starts (nothing was done on it
// yet): a keepalive left unanswered by a host busy for a few seconds closes the
// connection, and a file operation then failed at once with "sftp: EOF".
func (c *Conn) sftpClient(ctx context.Context) (*sftp.Client, int, error) {
	for attempt := 0; ; attempt++ {
		cl, gen, err := c.Client(ctx)
		if err != nil {
			return nil, 0, err
		}
		c.mu.Lock()
		if c.sftp != nil && c.sftpGen == gen {
			s := c.sftp
			c.mu.Unlock()
			return s, gen, nil
		}
		c.mu.Unlock()
		sc, err := c.startSFTP(cl)
		if err != nil {
			if broken(cl) {
				c.markDead(gen)
				if attempt == 0 && ctx.Err() == nil {
					continue
				}
				return nil, 0, c.unreachable(gen, fmt.Errorf("sftp: %w", err))
			}
			if c.t.user != "root" {
				// sftp-server under sudo died: say why if it is sudo's password.
				if _, serr := c.Run(ctx, Cmd{Args: []string{"true"}, Sudo: true, Timeout: 10 * time.Second}); errors.Is(serr, ErrSudoPassword) {
					return nil, 0, serr
				}
			}
			return nil, 0, &UnreachableError{Addr: c.t.addr, Err: fmt.Errorf("sftp: %w", err)}
		}
		c.mu.Lock()
		if c.sftp != nil {
			c.sftp.Close()
		}
		c.sftp, c.sftpGen = sc, gen
		c.mu.Unlock()
		return sc, gen, nil
	}
}

// startSFTP starts an SFTP client on cl: the server's sftp subsystem for root, sftp-server under
// `sudo -n` for another login.
func (c *Conn) startSFTP(cl *ssh.Client) (*sftp.Client, error) {
	if c.t.user == "root" {
		return sftp.NewClient(cl)
	}
	s, err := c.newSession(cl)
	if err != nil {
		return nil, err
	}
	w, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	r, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Start("sudo -n /usr/lib/openssh/sftp-server"); err != nil {
		s.Close()
		return nil, err
	}
	sc, err := sftp.NewClientPipe(r, w)
	if err != nil {
		s.Close()
	}
	return sc, err
}

// withSFTP runs fn on the SFTP client, bounded by ctx (SFTP calls have no
// context: the client is closed when ctx ends).
func (c *Conn) withSFTP(ctx context.Context, fn func(*sftp.Client) error) error {
	sc, gen, err := c.sftpClient(ctx)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn(sc) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sc.Close()
		c.markDead(gen)
		return ctx.Err()
	}
	if errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, io.EOF) {
		c.mu.Lock()
		if c.sftp == sc {
			c.sftp = nil
		}
		c.mu.Unlock()
		sc.Close()
		return c.unreachable(gen, err)
	}
	return err
}

// WriteFileAtomic writes data to p: a temp file in the same directory,
// written, fsynced, chmodded, closed, then PosixRename'd over p.
func (c *Conn) WriteFileAtomic(ctx context.Context, p string, data []byte, mode os.FileMode) error {
	if mode&0o077 == 0 {
		return c.writePrivateFile(ctx, p, data, mode)
	}
	return c.withSFTP(ctx, func(sc *sftp.Client) error {
		dir := path.Dir(p)
		if err := sc.MkdirAll(dir); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		tmp := path.Join(dir, "."+path.Base(p)+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			return fmt.Errorf("create %s: %w", tmp, err)
		}
		fail := func(err error) error {
			f.Close()
			_ = sc.Remove(tmp)
			return err
		}
		if _, err := f.Write(data); err != nil {
			return fail(fmt.Errorf("write %s: %w", tmp, err))
		}
		if err := f.Sync(); err != nil && !errors.Is(err, sftp.ErrSSHFxOpUnsupported) {
			return fail(fmt.Errorf("fsync %s: %w", tmp, err))
		}
		if err := f.Chmod(mode); err != nil {
			return fail(fmt.Errorf("chmod %s: %w", tmp, err))
		}
		if err := f.Close(); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("close %s: %w", tmp, err)
		}
		if err := sc.PosixRename(tmp, p); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("rename %s: %w", p, err)
		}
		return nil
	})
}

// writePrivateFile is WriteFileAtomic for a file only its owner may read:
// SFTP creates files with the server's default mode and chmods them only
// after the write, and a reader that opened the file in between keeps
// reading; mktemp creates the temporary file 0600 from the start.
func (c *Conn) writePrivateFile(ctx context.Context, p string, data []byte, mode os.FileMode) error {
	script := `umask 077 && mkdir -p -- "$(dirname -- "$1")" && t=$(mktemp -- "$(dirname -- "$1")/.$(basename -- "$1").tmp-XXXXXX") && ` +
		`{ cat >"$t" && chmod ` + strconv.FormatUint(uint64(mode.Perm()), 8) + ` -- "$t" && sync -- "$t" && mv -f -- "$t" "$1" || { rm -f -- "$t"; exit 1; }; }`
	// In the persistent shell (as root), the data as its input: no session of its own.
	if _, err := c.RunShellInput(ctx, "set -- "+ShellQuote(p)+"; "+script, data, 30*time.Second, 1<<16); err != nil {
		return fmt.Errorf("writing %s (mode %o): %w", p, mode.Perm(), err)
	}
	return nil
}

// ReadFile reads a remote file; a missing file gives an error satisfying
// errors.Is(err, os.ErrNotExist).
func (c *Conn) ReadFile(ctx context.Context, p string) ([]byte, error) {
	var out []byte
	err := c.withSFTP(ctx, func(sc *sftp.Client) error {
		f, err := sc.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		out, err = io.ReadAll(io.LimitReader(f, 16<<20))
		return err
	})
	return out, err
}

// readFileMax is ReadFile of a file of at most max bytes: a larger one is an error, never cut (a
// record cut short would decode to nothing, or to a truncated file put back).
func (c *Conn) readFileMax(ctx context.Context, p string, max int64) ([]byte, error) {
	var out []byte
	err := c.withSFTP(ctx, func(sc *sftp.Client) error {
		f, err := sc.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if out, err = io.ReadAll(io.LimitReader(f, max+1)); err != nil {
			return err
		}
		if int64(len(out)) > max {
			return fmt.Errorf("%s is larger than %d bytes", p, max)
		}
		return nil
	})
	return out, err
}

// ReadFileMode is ReadFile and the file's mode, both of the one file opened (fstat: a symlink's
// target's).
func (c *Conn) ReadFileMode(ctx context.Context, p string) ([]byte, os.FileMode, error) {
	var out []byte
	var mode os.FileMode
	err := c.withSFTP(ctx, func(sc *sftp.Client) error {
		f, err := sc.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		mode = fi.Mode()
		out, err = io.ReadAll(io.LimitReader(f, 16<<20))
		return err
	})
	return out, mode, err
}

// Remove removes a remote file; a missing file is not an error.
func (c *Conn) Remove(ctx context.Context, p string) error {
	return c.withSFTP(ctx, func(sc *sftp.Client) error {
		if err := sc.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}

// Stat describes a remote file; a missing file gives an error satisfying
// errors.Is(err, os.ErrNotExist).
func (c *Conn) Stat(ctx context.Context, p string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := c.withSFTP(ctx, func(sc *sftp.Client) (err error) {
		fi, err = sc.Stat(p)
		return err
	})
	return fi, err
}
