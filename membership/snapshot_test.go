package membership

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/conclave-agent/conclave/protocols"
)

func TestSnapshotRoundTrip(t *testing.T) {
	in := []SnapshotMember{{"n2", "192.168.77.2:7946"}, {"n1", "192.168.77.1:7946"}, {"n3", "[fd00::3]:7946"}, {"n4", "n4.example:7946"}}
	out, err := decodeSnapshot(encodeSnapshot(in))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != "[{n1 192.168.77.1:7946} {n2 192.168.77.2:7946} {n3 [fd00::3]:7946} {n4 n4.example:7946}]" {
		t.Fatalf("round trip: %v", out)
	}
	if out, err := decodeSnapshot(encodeSnapshot(nil)); err != nil || len(out) != 0 {
		t.Fatalf("empty snapshot: %v, %v", out, err)
	}
}

func TestSnapshotEncodeIsBounded(t *testing.T) {
	var ms []SnapshotMember
	for i := range 3 * MaxSnapshotMembers {
		ms = append(ms, SnapshotMember{fmt.Sprintf("%0200d", i), "192.168.77.1:7946"})
	}
	b := encodeSnapshot(ms)
	if len(b) > MaxSnapshotBytes {
		t.Fatalf("encoded %d bytes, limit %d", len(b), MaxSnapshotBytes)
	}
	out, err := decodeSnapshot(b)
	if err != nil || len(out) > MaxSnapshotMembers {
		t.Fatalf("decode of a bounded encoding: %d members, %v", len(out), err)
	}
}

func TestSnapshotDecodeRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          "",
		"other header":   "conclave-members 2\n",
		"truncated":      snapshotHeader + "\nn1 192.168.77.1:79",
		"no address":     snapshotHeader + "\nn1\n",
		"bad port":       snapshotHeader + "\nn1 192.168.77.1:0\n",
		"port too large": snapshotHeader + "\nn1 192.168.77.1:70000\n",
		"no port":        snapshotHeader + "\nn1 192.168.77.1\n",
		"space in addr":  snapshotHeader + "\nn1 192.168.77.1:79 46\n",
		"control char":   snapshotHeader + "\nn\x01 192.168.77.1:7946\n",
		"twice":          snapshotHeader + "\nn1 192.168.77.1:7946\nn1 192.168.77.2:7946\n",
		"blank line":     snapshotHeader + "\n\n",
		"too many":       snapshotHeader + "\n" + strings.Repeat("n 1.2.3.4:5\n", MaxSnapshotMembers+1),
		"too large":      snapshotHeader + "\n" + strings.Repeat("x", MaxSnapshotBytes),
	} {
		if out, err := decodeSnapshot([]byte(in)); !errors.Is(err, errBadSnapshot) {
			t.Errorf("%s: decode = %v, %v; want errBadSnapshot", name, out, err)
		}
	}
}

func TestSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SnapshotFile)
	if ms, err := ReadSnapshot(path); err != nil || ms != nil {
		t.Fatalf("missing snapshot: %v, %v", ms, err)
	}
	want := []SnapshotMember{{"n1", "192.168.77.1:7946"}}
	if err := writeSnapshot(path, want); err != nil {
		t.Fatal(err)
	}
	if ms, err := ReadSnapshot(path); err != nil || fmt.Sprint(ms) != fmt.Sprint(want) {
		t.Fatalf("read back %v, %v", ms, err)
	}
	// A symbolic link is neither read through nor written through.
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte(snapshotHeader+"\nevil 10.0.0.1:7946\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if ms, err := ReadSnapshot(path); err == nil {
		t.Fatalf("read through a symbolic link: %v", ms)
	}
	if err := writeSnapshot(path, want); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), "evil") {
		t.Fatalf("the link's target was overwritten: %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("after the write the snapshot is not a regular file: %v, %v", fi, err)
	}
	// A corrupt file is an error naming it.
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshot(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(encodeSnapshot([]SnapshotMember{{"n1", "192.168.77.1:7946"}, {"n2", "[::1]:7946"}}))
	f.Add([]byte(snapshotHeader + "\n"))
	f.Add([]byte(snapshotHeader + "\nn1 192.168.77.1:7946"))
	f.Add([]byte(snapshotHeader + "\nn1 h:1\nn1 h:2\n"))
	f.Add([]byte("conclave-members 1\r\nn1 a:1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		if len(ms) > MaxSnapshotMembers {
			t.Fatalf("%d members decoded", len(ms))
		}
		// What decodes re-encodes to the same members.
		again, err := decodeSnapshot(encodeSnapshot(ms))
		if err != nil || len(again) != len(ms) {
			t.Fatalf("re-encoding %v: %v, %v", ms, again, err)
		}
	})
}

// TestRestartRejoinsFromSnapshot is the first multi-host field failure at the
// membership level: the seed (no join list) is killed and restarted on its
// address before anyone notices, so nobody pushes state to it and it has
// nobody to join. Push-pull and probes are slowed to a minute so that only
// the snapshot can bring it back; before the snapshot it stayed alone.
func TestRestartRejoinsFromSnapshot(t *testing.T) {
	slow := func(mc *memberlist.Config) {
		fast(mc)
		mc.PushPullInterval = time.Minute
		mc.ProbeInterval = time.Minute
	}
	dir := t.TempDir()
	c1 := testConfig("n1", 1)
	c1.Bind = freePort(t)
	c1.tune = slow
	c1.SnapshotPath = filepath.Join(dir, SnapshotFile)
	n1 := start(t, c1)
	var others []*node
	for i, name := range []string{"n2", "n3"} {
		c := testConfig(name, protocols.ID(i+2), n1.LocalAddr())
		c.tune = slow
		others = append(others, start(t, c))
	}
	n1.w.until(t, "n1 to see n2 and n3", func(v map[string]Member) bool { return isAlive(v, "n2") && isAlive(v, "n3") })
	waitFor(t, "the snapshot to list n2 and n3", func() bool {
		ms, err := ReadSnapshot(c1.SnapshotPath)
		return err == nil && len(ms) == 2
	})
	if err := n1.Shutdown(); err != nil { // no Leave: a crash
		t.Fatal(err)
	}
	again := start(t, c1)
	again.w.until(t, "the restarted n1 to see n2 and n3", func(v map[string]Member) bool {
		return isAlive(v, "n2") && isAlive(v, "n3")
	})
	for _, o := range others {
		if s := o.Members(); len(s) != 3 {
			t.Errorf("%s sees %v", o.name, s)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
