package main

// The Noise floor (-noise): the same heartbeat pattern over one plain TCP
// connection per follower secured with libp2p's Noise handshake and
// framing, and no stream multiplexer. Beside the libp2p floor it says how
// much of the transport's cost is yamux's and how much encryption's: what
// a framed connection per peer, without per-message streams, would cost.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
)

// newNoise returns a Noise transport with a fresh Ed25519 identity.
func newNoise() (*noise.Transport, peer.ID, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("noise identity: %w", err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", fmt.Errorf("noise identity: %w", err)
	}
	tpt, err := noise.New(noise.ID, key, nil)
	if err != nil {
		return nil, "", fmt.Errorf("noise transport: %w", err)
	}
	return tpt, id, nil
}

// listenEchoNoise is listenEcho over a Noise-secured TCP connection; the
// address it returns is HOST:PORT/PEERID.
func listenEchoNoise(every int) (string, func() error, error) {
	tpt, id, err := newNoise()
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return ln.Addr().String() + "/" + id.String(), func() error {
		raw, err := ln.Accept()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := tpt.SecureInbound(ctx, raw, "")
		cancel()
		if err != nil {
			return fmt.Errorf("noise handshake: %w", err)
		}
		return echo(c, every)
	}, nil
}

// leadNoise is lead over Noise-secured TCP connections.
func leadNoise(interval time.Duration, peers []string) error {
	tpt, _, err := newNoise()
	if err != nil {
		return err
	}
	var conns []io.ReadWriter
	for _, a := range peers {
		hostPort, pid, ok := strings.Cut(a, "/")
		if !ok {
			return fmt.Errorf("follower address %q: want HOST:PORT/PEERID", a)
		}
		id, err := peer.Decode(pid)
		if err != nil {
			return fmt.Errorf("follower address %q: %w", a, err)
		}
		raw, err := net.Dial("tcp", hostPort)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := tpt.SecureOutbound(ctx, raw, id)
		cancel()
		if err != nil {
			return fmt.Errorf("noise handshake with %s: %w", a, err)
		}
		conns = append(conns, c)
	}
	return drive(conns, interval)
}
