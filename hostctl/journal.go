package hostctl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// journalReadCap bounds one read of the journal on the host (head -c), below
// the 1 MiB a remote command's output is kept to, so the read is never cut
// anywhere but where this code knows.
const journalReadCap = 1<<20 - 16<<10

// journalRead is the shell command printing the journal entries of match
// after cursor (all of them when cursor is ""), in journalctl's export
// format, at most journalReadCap bytes. Every entry starts with its own
// __CURSOR= line (systemd's logs-show.c prints it first in every release),
// so a read cut at the cap loses nothing: the next one starts after the last
// whole entry. With -o cat and --show-cursor the cursor came last, and was
// the first thing a cap dropped.
func journalRead(match, cursor string) string {
	j := "journalctl --no-pager -q -o export --output-fields=MESSAGE"
	if cursor != "" {
		j += " --after-cursor=" + ShellQuote(cursor)
	}
	return j + " " + match + " | head -c " + strconv.Itoa(journalReadCap)
}

// journalLast is the shell command printing the newest entry of match: its
// cursor starts a reader at the journal's end.
func journalLast(match string) string {
	return "journalctl --no-pager -q -o export --output-fields=MESSAGE -n 1 " + match + " | head -c " + strconv.Itoa(journalReadCap)
}

// parseJournal reads journalRead's output: the messages (each cut to
// MaxLogLine) and the cursor of the last entry taken ("" when none). When
// cut (the output may end inside an entry), an unfinished last entry is left
// for the next read, unless it is the only one: then what there is of it is
// taken, so that every read moves on.
func parseJournal(out []byte, cut bool) (lines []string, cursor string) {
	for len(out) > 0 {
		e, n, complete := exportEntry(out)
		if !complete && (cut && (len(lines) > 0 || cursor != "")) {
			break
		}
		if e.cursor != "" {
			cursor = e.cursor
			if e.hasMsg {
				msg := e.msg
				switch {
				case !complete:
					msg = trimCutRune(msg[:min(len(msg), MaxLogLine)]) + " [line cut]"
				case len(msg) > MaxLogLine:
					msg = trimCutRune(msg[:MaxLogLine]) + fmt.Sprintf(" [line cut: %d more bytes]", e.msgLen-MaxLogLine)
				}
				lines = append(lines, msg)
			}
		}
		if n == 0 {
			break
		}
		out = out[n:]
	}
	return lines, cursor
}

type journalEntry struct {
	cursor string
	msg    string
	msgLen int // the message's whole length (msg may be cut)
	hasMsg bool
}

// exportEntry decodes the first entry of b in the export format: fields
// "NAME=value\n", or "NAME\n" + 64-bit little-endian size + data + "\n" for
// binary values; an empty line ends the entry. n is the bytes consumed
// (0 when b ends inside the entry).
func exportEntry(b []byte) (e journalEntry, n int, complete bool) {
	i := 0
	for i < len(b) {
		if b[i] == '\n' {
			return e, i + 1, true
		}
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			// Cut inside a text field: keep what there is of MESSAGE.
			if v, ok := bytes.CutPrefix(b[i:], []byte("MESSAGE=")); ok {
				e.msg, e.msgLen, e.hasMsg = strings.ToValidUTF8(string(v), "\uFFFD"), len(v), true
			}
			return e, 0, false
		}
		line := b[i : i+nl]
		if name, v, ok := bytes.Cut(line, []byte("=")); ok {
			switch string(name) {
			case "__CURSOR":
				e.cursor = string(v)
			case "MESSAGE":
				e.msg, e.msgLen, e.hasMsg = strings.ToValidUTF8(string(v), "\uFFFD"), len(v), true
			}
			i += nl + 1
			continue
		}
		// Binary field: NAME, newline, size, data, newline.
		j := i + nl + 1
		if len(b)-j < 8 {
			return e, 0, false
		}
		size := binary.LittleEndian.Uint64(b[j : j+8])
		j += 8
		have := uint64(len(b) - j)
		if string(line) == "MESSAGE" {
			v := b[j : j+int(min(size, have))]
			e.msg, e.msgLen, e.hasMsg = strings.ToValidUTF8(string(v), "\uFFFD"), int(min(size, 1<<40)), true
		}
		if size >= have { // the data and its newline are not all here
			return e, 0, false
		}
		i = j + int(size) + 1
	}
	return e, 0, false
}
