// Package transport carries election messages between agents: a libp2p host
// (TCP, Noise, and with cluster keys an admission handshake in which each
// side proves an installed key, admit.go, or toward agents of v0.1.0
// libp2p's private network, pnetcompat.go) on which messages travel as
// length-prefixed msgpack frames, over one of two stream protocols:
// /conclave/election/2, whose coalesced frames carry every election's
// messages to a peer at once (batch.go), and /conclave/election/1, one
// default-election message per frame, for peers that know nothing newer.
// It also has an in-memory twin for tests.
//
// The agent's event loop is its only user. Send and SendAll never block
// it: each peer has a bounded queue drained by its own sender goroutine,
// and a full queue drops the messages and counts them. Inbound messages
// arrive on one bounded channel.
//
// This package must never trust the network. Every frame is bounded by
// max_message_bytes before anything is allocated, checked structurally
// before msgpack decodes it, and refused on any doubt (unknown kind,
// trailing bytes, out-of-range field) with a reason that is logged and
// counted, never a panic. A connection is never an authorisation: a message
// is delivered only when the remote peer id belongs to a current member and
// the message's From is that member's ID. The package must also never
// interpret messages or hold election state; that is the protocols' job.
package transport
