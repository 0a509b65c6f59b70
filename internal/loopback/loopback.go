// Package loopback finds free ports on 127.0.0.1 for local clusters: `agent
// dev`, the chaos harness and the tests. It only asks the kernel; it must
// never bind anything for longer than the question takes.
package loopback

import (
	"errors"
	"fmt"
	"net"
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

// FreePort returns a loopback port that is free for both TCP and UDP at the
// time of asking: memberlist needs both on one number, and that this process
// was never given before. Another process may still take it before the
// caller binds it; callers start at once.
func FreePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("loopback: free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
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
