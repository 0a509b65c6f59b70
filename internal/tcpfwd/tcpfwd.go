// Package tcpfwd is a byte-counting TCP forwarder on loopback for tests: it
// stands where a NAT port forward or the benchmark's delaying proxy would,
// so a test can prove that traffic to an advertised address really went
// through it.
package tcpfwd

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Forwarder accepts TCP connections on a loopback port and copies each one,
// both ways, to a target address set with Start. It is safe for concurrent
// use.
type Forwarder struct {
	ln     net.Listener
	target atomic.Pointer[string]

	// Inbound counts bytes copied from accepted connections to the target;
	// Outbound the replies copied back. Conns counts accepted connections.
	Inbound, Outbound, Conns atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen binds a forwarder to a free port on 127.0.0.1. It accepts nothing
// until Start names the target, so the target may be created after the
// forwarder's address is known (as an agent must know its advertised
// address before it starts).
func Listen() (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpfwd: listen: %w", err)
	}
	return &Forwarder{ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// Port returns the forwarder's TCP port.
func (f *Forwarder) Port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// Start begins forwarding every accepted connection to target (host:port).
// Call it once.
func (f *Forwarder) Start(target string) {
	f.target.Store(&target)
	f.wg.Add(1)
	go f.accept()
}

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.Conns.Add(1)
		up, err := net.Dial("tcp", *f.target.Load())
		if err != nil {
			_ = c.Close()
			continue
		}
		if !f.track(c, up) {
			return
		}
		f.wg.Add(2)
		go f.pipe(up, c, &f.Inbound)
		go f.pipe(c, up, &f.Outbound)
	}
}

// track registers both ends so Close can cut them; false once closed.
func (f *Forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, counting bytes, and closes both when either side
// ends: a half-open proxied connection would only hide a peer's failure.
func (f *Forwarder) pipe(dst, src net.Conn, n *atomic.Uint64) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n.Add(uint64(k))
			if _, werr := dst.Write(buf[:k]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			break // EOF, a reset or Close: the same end for a test proxy
		}
	}
	_ = src.Close()
	_ = dst.Close()
}

// Close stops accepting, cuts every forwarded connection and waits for the
// forwarder's goroutines.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcpfwd: close: %w", err)
	}
	return nil
}
