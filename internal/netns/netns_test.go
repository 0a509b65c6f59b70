package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestOwnedBy(t *testing.T) {
	for ns, want := range map[string]int{
		"cvmh-123-n1":    123,
		"cvmh-123-hub":   123,
		"cvmh-x-n1":      0,
		"cvmh-123":       0,
		"cvchaos-123-n1": 0, // another prefix
		"other":          0,
	} {
		if got := ownedBy("cvmh", ns); got != want {
			t.Errorf("ownedBy(cvmh, %q) = %d, want %d", ns, got, want)
		}
	}
}

func TestSetupRefusesBadInput(t *testing.T) {
	for _, prefix := range []string{"", "a-b"} {
		if _, err := Setup(context.Background(), prefix, "192.168.77", []string{"n1"}); err == nil {
			t.Errorf("Setup accepted prefix %q", prefix)
		}
	}
	many := make([]string, 251)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if _, err := Setup(context.Background(), "cvtest", "192.168.77", many); err == nil {
		t.Error("Setup accepted 251 hosts on a /24")
	}
}

// TestSetupAndClose builds two hosts, checks their addresses, unplugs and
// plugs one, and checks that Close leaves nothing. Needs root and ip.
func TestSetupAndClose(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	ctx := context.Background()
	n, err := Setup(ctx, "cvtest", "192.168.79", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = n.Close()
		}
	}()
	for i, h := range n.Hosts() {
		out, err := exec.Command("ip", "-n", h.NS, "-br", "addr", "show", "eth0").CombinedOutput()
		want := fmt.Sprintf("192.168.79.%d/24", i+1)
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %q, %v; want %s", h.Name, out, err, want)
		}
	}
	if err := n.Unplug(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := n.Plug(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range n.Hosts() {
		if _, err := os.Stat("/run/netns/" + h.NS); err == nil {
			t.Errorf("namespace %s left behind", h.NS)
		}
	}
}
