package cli

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// portHolderOf names who listens on addr's TCP port on this machine ("uid 65534 (nobody), pid 4242
// (python3)"), for a loopback or wildcard addr; "" when unknown. Best effort, from /proc: the uid
// of a listening socket is in /proc/net/tcp{,6} for everyone, its process only where this process
// may read other processes' fds.
func portHolderOf(addr string) string {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host != "" && host != "localhost" && (ip == nil || !(ip.IsLoopback() || ip.IsUnspecified())) {
		return ""
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return ""
	}
	return portHolder(port)
}

// portHolder names who listens on TCP port on this machine, "" when nobody is found.
func portHolder(port int) string {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, inode, ok := listener(f, port)
		if !ok {
			continue
		}
		who := "uid " + uid
		if u, err := user.LookupId(uid); err == nil {
			who += " (" + u.Username + ")"
		}
		if pid, comm := socketProcess(inode); pid != "" {
			who += fmt.Sprintf(", pid %s (%s)", pid, comm)
		}
		return who
	}
	return ""
}

// listener finds a socket listening on port in a /proc/net/tcp-format file: its uid and inode.
func listener(file string, port int) (uid, inode string, ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
			continue
		}
		return fs[7], fs[9], true
	}
	return "", "", false
}

// socketProcess finds the process holding the socket with this inode: its pid and command name.
func socketProcess(inode string) (pid, comm string) {
	link := "socket:[" + inode + "]"
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == link {
			pid = strings.Split(fd, "/")[2]
			b, _ := os.ReadFile("/proc/" + pid + "/comm")
			return pid, strings.TrimSpace(string(b))
		}
	}
	return "", ""
}
