package localapi

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conclave-agent/conclave/api"
)

// Default bounds of the socket. Every connection holds a file descriptor
// and a goroutine, every watch stream a buffer too: without a bound, 3,000
// watchers took an agent from 29 MB to 120 MB and 3,016 open files, and
// the agent's own gossip and transport share those descriptors.
const (
	DefaultMaxConnections = 512
	DefaultMaxWatchers    = 256
)

// refusedWriteTimeout bounds writing the 503 to a connection over the
// limit, so a client that does not read cannot hold the accept loop.
const refusedWriteTimeout = 100 * time.Millisecond

// LimitStats are the socket's bounds at work, for /metrics.
type LimitStats struct {
	Connections, Watchers               int64  // open now
	RefusedConnections, RefusedWatchers uint64 // refused since start
}

type limits struct {
	maxConns, maxWatchers int64
	conns, watchers       atomic.Int64
	refusedConns          atomic.Uint64
	refusedWatchers       atomic.Uint64
}

// tooManyConnections is the whole answer to a connection over the limit.
var tooManyConnections = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + api.ContentTypeJSON +
	"\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 84\r\n\r\n" +
	`{"error":"too many connections to the agent's socket (api.max_connections); retry"}` + "\n")

// limitListener counts open connections and answers those over the bound
// with a 503 at once, without reading from them, so the accept loop never
// waits on a client.
type limitListener struct {
	net.Listener
	l *limits
}

func (ln *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.l.conns.Add(1) > ln.l.maxConns {
			ln.l.conns.Add(-1)
			ln.l.refusedConns.Add(1)
			_ = c.SetWriteDeadline(time.Now().Add(refusedWriteTimeout))
			_, _ = c.Write(tooManyConnections)
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, l: ln.l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limits
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.conns.Add(-1) })
	return c.Conn.Close()
}

// Unwrap lets connContext reach the Unix connection for peer credentials.
func (c *countedConn) Unwrap() net.Conn { return c.Conn }

// acquireWatcher takes a watcher slot; false when all are taken.
func (l *limits) acquireWatcher() bool {
	if l.watchers.Add(1) > l.maxWatchers {
		l.watchers.Add(-1)
		l.refusedWatchers.Add(1)
		return false
	}
	return true
}

func (l *limits) releaseWatcher() { l.watchers.Add(-1) }

// Limits reports the socket's bounds at work.
func (s *Server) Limits() LimitStats {
	return LimitStats{
		Connections:        s.limits.conns.Load(),
		Watchers:           s.limits.watchers.Load(),
		RefusedConnections: s.limits.refusedConns.Load(),
		RefusedWatchers:    s.limits.refusedWatchers.Load(),
	}
}
