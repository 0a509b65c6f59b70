package loopback

import (
	"fmt"
	"net"
	"testing"
)

func TestFreePortIsFreeForTCPAndUDP(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("TCP %s: %v", addr, err)
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("UDP %s: %v", addr, err)
	}
	u.Close()
}

// TestFreePortNeverRepeats: ports handed out in one process are distinct
// even though each question's listener is closed before the next.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}

// TestFreePortBelowEphemeralRange: a handed-out port is one the kernel
// never picks for an outgoing connection or a bind to port 0.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-portFloor < 1000 {
		t.Skipf("the ephemeral range starts at %d: no room below it", low)
	}
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < portFloor || port >= low {
			t.Fatalf("port %d outside [%d, %d), below the ephemeral range", port, portFloor, low)
		}
	}
}
