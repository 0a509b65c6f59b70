package main

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestJitterProxyKeepsOrderAndDelays sends numbered chunks through a
// proxy to an echo-less sink and checks they arrive complete, in order,
// and no earlier than the smallest possible delay allows.
func TestJitterProxyKeepsOrderAndDelays(t *testing.T) {
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := sink.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := jitterOptions{Max: 5 * time.Millisecond, SpikeEvery: 1, SpikeDelay: 30 * time.Millisecond}
	p, err := startJitterProxy(ctx, sink.Addr().String(), opts, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var want []byte
	for i := range 200 {
		b := []byte{byte(i), byte(i >> 8)}
		want = append(want, b...)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	b := <-got
	// Every chunk spikes, so nothing can arrive before SpikeDelay.
	if el := time.Since(start); el < opts.SpikeDelay {
		t.Fatalf("bytes arrived after %v, before the %v every chunk is held", el, opts.SpikeDelay)
	}
	if string(b) != string(want) {
		t.Fatalf("proxy delivered %d bytes out of order or incomplete (want %d)", len(b), len(want))
	}
	if p.forwarded() != int64(len(want)) {
		t.Fatalf("proxy counted %d bytes, want %d", p.forwarded(), len(want))
	}
	c.Close()
}
