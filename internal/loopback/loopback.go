// Package loopback finds free ports on 127.0.0.1 for local clusters: `agent
// dev`, the chaos harness and the tests. It only asks the kernel; it must
// never bind anything for longer than the question takes.
package loopback

import (
	"errors"
	"fmt"
	"net"
)

// FreePort returns a loopback port that is free for both TCP and UDP at the
// time of asking: memberlist needs both on one number. Another process may
// still take it before the caller binds it; callers start at once.
func FreePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("loopback: free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("loopback: no port free for both TCP and UDP")
}
