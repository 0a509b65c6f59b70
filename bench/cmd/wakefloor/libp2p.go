package main

// The libp2p floor (-libp2p): the same heartbeat pattern over go-libp2p
// streams (TCP, Noise, yamux), the stack the agent's election traffic must
// ride, with nothing of the agent above it. Beside the plain-TCP floor it
// says how much of an agent's cost above that floor is the transport's
// own, and beside the agent how much is the agent's.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// floorProtocol names the echo stream.
const floorProtocol = protocol.ID("/wakefloor/echo/1")

// newFloorHost starts a libp2p host on loopback with only TCP, Noise and
// yamux: no relay, no NAT service, no resource accounting.
func newFloorHost() (host.Host, error) {
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
		libp2p.ResourceManager(&network.NullResourceManager{}),
	)
	if err != nil {
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	return h, nil
}

// listenEchoLibp2p is listenEcho over a libp2p stream: the address it
// returns is the host's full multiaddr with its peer id.
func listenEchoLibp2p(every int) (string, func() error, error) {
	h, err := newFloorHost()
	if err != nil {
		return "", nil, err
	}
	streams := make(chan network.Stream, 1)
	h.SetStreamHandler(floorProtocol, func(s network.Stream) { streams <- s })
	addr := fmt.Sprintf("%s/p2p/%s", h.Addrs()[0], h.ID())
	return addr, func() error {
		defer h.Close()
		return echo(<-streams, every)
	}, nil
}

// leadLibp2p is lead over libp2p streams, one per follower.
func leadLibp2p(interval time.Duration, peers []string) error {
	h, err := newFloorHost()
	if err != nil {
		return err
	}
	defer h.Close()
	var streams []io.ReadWriter
	for _, a := range peers {
		info, err := peer.AddrInfoFromString(a)
		if err != nil {
			return fmt.Errorf("follower address %q: %w", a, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = h.Connect(ctx, *info)
		var s network.Stream
		if err == nil {
			s, err = h.NewStream(ctx, info.ID, floorProtocol)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("open a stream to %s: %w", a, err)
		}
		streams = append(streams, s)
	}
	return drive(streams, interval)
}
