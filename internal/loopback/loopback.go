// Package loopback finds free ports on 127.0.0.1 for local clusters: `agent
// dev`, the chaos harness and the tests. It only asks the kernel; it must
// never bind anything for longer than the question takes.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut holds every port FreePort returned in this process. The kernel
// may offer a port again as soon as the question's listener closes, and a
// cluster asks for several before any agent binds them: the test harness
// once gave one number to n2's transport and to n3's gossip, and n3 could
// not start. A process never gets the same port twice.
var (
	handedMu  sync.Mutex
	handedOut = map[int]bool{}
)

// Ports handed out lie below the kernel's ephemeral range (Linux's
// net.ipv4.ip_local_port_range), from portFloor up. A port from inside it,
// as binding port 0 gives, stays free only until the kernel picks it for
// some process's outgoing connection or another bind to port 0, which
// happens all the time on a machine running tests: a test's forwarder,
// bound to port 0, once took the number just chosen for an agent's
// transport. Below the range, only a process that names the port can
// take it.
const (
	portFloor        = 10000
	defaultEphemeral = 32768 // Linux's default lower bound
)

// ephemeralLow is the lowest port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeral
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return defaultEphemeral
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return defaultEphemeral
	}
	return low
}

// FreePort returns a loopback port that is free for both TCP and UDP at the
// time of asking (memberlist needs both on one number), that this process
// was never given before, and that the kernel does not hand out by itself
// (below its ephemeral range, when that range leaves room). Another process
// may still name it before the caller binds it; callers start at once.
func FreePort() (int, error) {
	low := ephemeralLow()
	for range 200 {
		port := 0
		if low-portFloor >= 1000 {
			port = portFloor + rand.IntN(low-portFloor)
		}
		port, ok := tryPort(port)
		if !ok {
			continue
		}
		handedMu.Lock()
		dup := handedOut[port]
		handedOut[port] = true
		handedMu.Unlock()
		if !dup {
			return port, nil
		}
	}
	return 0, errors.New("loopback: no port free for both TCP and UDP")
}

// tryPort binds port (0: one the kernel picks) for TCP and then UDP on
// 127.0.0.1, closes both, and returns the number if both binds worked.
func tryPort(port int) (int, bool) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, false
	}
	port = l.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	l.Close()
	if err != nil {
		return 0, false
	}
	u.Close()
	return port, true
}
