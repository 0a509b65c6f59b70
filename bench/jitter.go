package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// jitterOptions shape the delay a jitterProxy adds to every chunk of bytes
// it forwards. The kernel here has no netem, so the bench injects jitter
// in user space, in front of each agent's libp2p port: every election
// message INTO an agent crosses its proxy.
type jitterOptions struct {
	// Max is the upper bound of the uniform delay every chunk gets.
	Max time.Duration `json:"max"`
	// SpikeEvery is the chance (0…1) that a chunk is held SpikeDelay
	// instead, like a retransmission or a descheduled router.
	SpikeEvery float64 `json:"spike_probability"`
	// SpikeDelay is how long a spiking chunk is held.
	SpikeDelay time.Duration `json:"spike_delay"`
}

// String describes the options for the report.
func (o jitterOptions) String() string {
	return fmt.Sprintf("uniform 0–%v per chunk, %.1f%% of chunks held %v", o.Max, 100*o.SpikeEvery, o.SpikeDelay)
}

// jitterProxy forwards TCP connections from its own loopback port to a
// target, delaying each chunk read in either direction while keeping the
// byte order (a later chunk never overtakes an earlier one, as in TCP).
type jitterProxy struct {
	ln     net.Listener
	target string
	opts   jitterOptions
	seed   int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	bytes  int64
}

// startJitterProxy listens on a fresh loopback port and forwards to target.
func startJitterProxy(ctx context.Context, target string, opts jitterOptions, seed int64) (*jitterProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("jitter proxy: %w", err)
	}
	p := &jitterProxy{ln: ln, target: target, opts: opts, seed: seed, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	go func() {
		<-ctx.Done()
		p.close()
	}()
	return p, nil
}

// port is the proxy's listening port.
func (p *jitterProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// forwarded is how many bytes crossed the proxy so far.
func (p *jitterProxy) forwarded() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

func (p *jitterProxy) accept() {
	defer p.wg.Done()
	var n uint64
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		n++
		p.wg.Add(2)
		go p.pipe(in, out, rand.New(rand.NewPCG(uint64(p.seed), 2*n)))
		go p.pipe(out, in, rand.New(rand.NewPCG(uint64(p.seed), 2*n+1)))
	}
}

// track registers conns for close; it reports false (and closes them)
// once the proxy is closed.
func (p *jitterProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// untrack forgets closed conns, so reconnecting agents do not grow the set.
func (p *jitterProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, holding each chunk for its drawn delay.
func (p *jitterProxy) pipe(src, dst net.Conn, rng *rand.Rand) {
	defer p.wg.Done()
	queue := make(chan chunk, 4096)
	go func() {
		for c := range queue {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				break
			}
		}
		// Closing both ends wakes the reader; draining keeps it from
		// blocking on a writer that gave up.
		src.Close()
		dst.Close()
		p.untrack(src, dst)
		for range queue {
		}
	}()
	defer close(queue)
	var lastDue time.Time
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay := time.Duration(rng.Int64N(int64(p.opts.Max) + 1))
			if p.opts.SpikeEvery > 0 && rng.Float64() < p.opts.SpikeEvery {
				delay = p.opts.SpikeDelay
			}
			due := time.Now().Add(delay)
			if due.Before(lastDue) {
				due = lastDue
			}
			lastDue = due
			p.mu.Lock()
			p.bytes += int64(n)
			p.mu.Unlock()
			queue <- chunk{data: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting, cuts every connection and waits for the pipes.
func (p *jitterProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
