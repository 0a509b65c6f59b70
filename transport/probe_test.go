package transport

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// blackhole forwards TCP connections to a target until hold is set; from
// then on it swallows every byte both ways and closes nothing, as a link
// to a host that lost power does: no FIN, no RST, no answer.
type blackhole struct {
	ln     net.Listener
	target string
	hold   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) addr() string {
	return "/ip4/127.0.0.1/tcp/" + strings.TrimPrefix(b.ln.Addr().String(), "127.0.0.1:")
}

func (b *blackhole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if b.hold.Load() {
			// A vanished host never completes a connection either.
			b.track(c)
			continue
		}
		d, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.track(c, d)
		b.wg.Add(2)
		go b.pipe(d, c)
		go b.pipe(c, d)
	}
}

func (b *blackhole) track(cs ...net.Conn) {
	b.mu.Lock()
	b.conns = append(b.conns, cs...)
	b.mu.Unlock()
}

func (b *blackhole) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if b.hold.Load() {
			continue // swallowed
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (b *blackhole) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// TestHalfOpenConnectionIsClosed: a reaches b through a link that goes
// silent without closing. The transport must see b unreachable and close
// the half-open connection after one unanswered probe, not after TCP's
// retransmission timeout (minutes), and see b again once the link is back.
func TestHalfOpenConnectionIsClosed(t *testing.T) {
	fast := func(c *Config) {
		c.ProbeAfter = 100 * time.Millisecond
		c.ProbeTimeout = 300 * time.Millisecond
	}
	a := newTestHost(t, 1, nil, fast)
	b := newTestHost(t, 2, nil, fast)
	link := newBlackhole(t, hostPortOf(t, b))
	if err := a.SetPeer(2, b.PeerID(), link.addr()); err != nil {
		t.Fatal(err)
	}
	// b can reach a only over the connection a opens: its own dials fail.
	if err := b.SetPeer(1, a.PeerID(), "/ip4/127.0.0.1/tcp/1"); err != nil {
		t.Fatal(err)
	}
	a.Send(2, protocols.Message{Kind: protocols.MsgHeartbeat, From: 1, To: 2})
	waitUntil(t, "b to receive over the link", func() bool { return len(b.Inbound()) > 0 })
	waitUntil(t, "a to reach b", func() bool { return a.Reachable(2) })

	link.hold.Store(true)
	held := time.Now()
	waitUntil(t, "a to close its half-open connection to b", func() bool { return hasLog(a.logs, "closing it as half-open") })
	waitUntil(t, "a to see b unreachable", func() bool { return !a.Reachable(2) })
	t.Logf("half-open connection closed and b unreachable %v after the link went silent", time.Since(held))

	link.hold.Store(false)
	waitUntil(t, "a to reach b again", func() bool { return a.Reachable(2) })
}

// hostPortOf returns h's TCP listen address as host:port.
func hostPortOf(t *testing.T, h *testHost) string {
	t.Helper()
	f := strings.Split(h.Addrs()[0], "/")
	// /ip4/127.0.0.1/tcp/PORT/p2p/ID
	if len(f) < 5 {
		t.Fatalf("address %s", h.Addrs()[0])
	}
	return f[2] + ":" + f[4]
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
