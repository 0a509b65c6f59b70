package membership

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/internal/atomicfile"
)

// SnapshotFile is the name of the member snapshot in the data directory.
const SnapshotFile = "members"

// Snapshot bounds: a snapshot holds at most MaxSnapshotMembers entries and
// MaxSnapshotBytes bytes. The decoder refuses anything larger before
// allocating for it.
const (
	MaxSnapshotMembers = 1024
	MaxSnapshotBytes   = 128 << 10
)

// snapshotHeader is the first line of a snapshot, version 1:
//
//	conclave-members 1
//	<name> <host:port>
//	…
//
// One member per line, name and gossip address separated by one space.
const snapshotHeader = "conclave-members 1"

// snapshotWriteEvery bounds how often the snapshot is rewritten: changes
// within it are written together.
const snapshotWriteEvery = 200 * time.Millisecond

// SnapshotMember is one member of a snapshot.
type SnapshotMember struct {
	Name string
	Addr string
}

// errBadSnapshot is wrapped by every error decodeSnapshot returns.
var errBadSnapshot = errors.New("bad member snapshot")

// encodeSnapshot writes members (sorted by name, at most
// MaxSnapshotMembers) in the snapshot format.
func encodeSnapshot(ms []SnapshotMember) []byte {
	ms = append([]SnapshotMember(nil), ms...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	var b bytes.Buffer
	b.WriteString(snapshotHeader)
	b.WriteByte('\n')
	n := 0
	for _, m := range ms {
		if n == MaxSnapshotMembers || checkSnapshotMember(m) != nil {
			continue
		}
		line := m.Name + " " + m.Addr + "\n"
		if b.Len()+len(line) > MaxSnapshotBytes {
			break
		}
		b.WriteString(line)
		n++
	}
	return b.Bytes()
}

// decodeSnapshot parses a snapshot. It never panics, refuses more than
// MaxSnapshotBytes or MaxSnapshotMembers, and checks every name and address.
func decodeSnapshot(b []byte) ([]SnapshotMember, error) {
	if len(b) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errBadSnapshot, len(b), MaxSnapshotBytes)
	}
	header, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || string(header) != snapshotHeader {
		return nil, fmt.Errorf("%w: first line is not %q", errBadSnapshot, snapshotHeader)
	}
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		return nil, fmt.Errorf("%w: truncated (no newline at the end)", errBadSnapshot)
	}
	if n := bytes.Count(rest, []byte("\n")); n > MaxSnapshotMembers {
		return nil, fmt.Errorf("%w: %d members, limit %d", errBadSnapshot, n, MaxSnapshotMembers)
	}
	var out []SnapshotMember
	seen := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n") {
		if line == "" && len(rest) == 0 {
			break
		}
		name, addr, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%w: line %d: want \"name host:port\"", errBadSnapshot, i+2)
		}
		m := SnapshotMember{Name: name, Addr: addr}
		if err := checkSnapshotMember(m); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", errBadSnapshot, i+2, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: line %d: %q listed twice", errBadSnapshot, i+2, name)
		}
		seen[name] = true
		out = append(out, m)
	}
	return out, nil
}

// checkSnapshotMember checks a name (1–255 bytes, printable, no spaces)
// and a host:port address (an IP or a host name, a port 1–65535).
func checkSnapshotMember(m SnapshotMember) error {
	if m.Name == "" || len(m.Name) > 255 {
		return fmt.Errorf("name of %d bytes", len(m.Name))
	}
	for _, r := range m.Name {
		if r == unicode.ReplacementChar || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("name %q has a space or an unprintable character", m.Name)
		}
	}
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", m.Addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("address %q: bad port", m.Addr)
	}
	if host == "" || len(host) > 253 || strings.ContainsAny(host, " \t\r\n/") {
		return fmt.Errorf("address %q: bad host", m.Addr)
	}
	return nil
}

// ReadSnapshot reads the member snapshot at path. A missing file is no
// members and no error. It does not follow a symbolic link (the data
// directory may be shared with less trusted processes' files).
func ReadSnapshot(path string) ([]SnapshotMember, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("membership: member snapshot %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("membership: member snapshot %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("membership: member snapshot %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("membership: member snapshot %s: %w", path, err)
	}
	ms, err := decodeSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("membership: member snapshot %s: %w", path, err)
	}
	return ms, nil
}

// writeSnapshot replaces the snapshot atomically: a reader, or an agent
// restarted after a crash mid-write, sees the old list or the new one. The
// temporary file is created with O_EXCL (so never through a symbolic
// link) and renamed over path (which replaces a link rather than
// following it).
func writeSnapshot(path string, ms []SnapshotMember) error {
	if err := atomicfile.WriteFile(path, encodeSnapshot(ms), "."+SnapshotFile+".tmp*"); err != nil {
		return fmt.Errorf("membership: write member snapshot: %w", err)
	}
	return nil
}

// snapshotMembers is what goes into the snapshot: every member that has not
// left, with the last address it was alive on, this node excluded. Dead
// members stay: after a restart of the whole cluster, the members this
// node saw die last are the ones to try.
func (m *Membership) snapshotMembers() []SnapshotMember {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SnapshotMember, 0, len(m.members))
	for _, mb := range m.members {
		if mb.Name == m.name || mb.State == StateLeft {
			continue
		}
		out = append(out, SnapshotMember{Name: mb.Name, Addr: mb.Addr})
	}
	return out
}

// markSnapshot asks the snapshot writer to write; it never blocks.
func (m *Membership) markSnapshot() {
	if m.snapshotPath == "" {
		return
	}
	select {
	case m.snapshotDirty <- struct{}{}:
	default:
	}
}

// runSnapshot rewrites the snapshot after changes, at most every
// snapshotWriteEvery, and once more on shutdown.
func (m *Membership) runSnapshot() {
	defer m.joinDone.Done()
	var last []byte
	write := func() {
		ms := m.snapshotMembers()
		b := encodeSnapshot(ms)
		if bytes.Equal(b, last) {
			return
		}
		if err := writeSnapshot(m.snapshotPath, ms); err != nil {
			m.log.Warn("cannot save the member snapshot; a restart may not find the cluster without gossip.join", zap.Error(err))
			return
		}
		last = b
	}
	for {
		select {
		case <-m.stopJoin:
			write()
			return
		case <-m.snapshotDirty:
		}
		write()
		select {
		case <-m.stopJoin:
			write()
			return
		case <-time.After(snapshotWriteEvery):
		}
	}
}
