// Package membership tells the agent who is in the cluster. It runs
// hashicorp/memberlist (gossip, SWIM failure detection), publishes this
// node's metadata — numeric id, voter or observer, libp2p peer id and
// multiaddr, protocol version — and turns members' state changes into
// events on a bounded channel.
//
// Memberlist's failure detection is the agent's second, slower signal (5–9 s
// with the lan profile); the leader's heartbeats and the phi detector are the
// first. Membership decides nothing about elections: in majority mode quorum
// is counted over the configured voters, never over whoever gossip sees.
//
// The package must never block memberlist's goroutines (its callbacks run
// under memberlist's locks, so a slow consumer would stall gossip and make
// healthy nodes look dead), never panic on a peer's metadata or on its own
// (memberlist panics on metadata above 512 bytes, so the size is checked
// before memberlist sees it), and never let memberlist write to stderr: its
// log lines are routed into zap with their levels.
//
// Cluster is the interface the agent depends on; *Membership implements it
// over the real network and MemNetwork provides an in-memory twin for tests.
package membership
