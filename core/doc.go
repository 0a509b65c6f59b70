// Package core is the agent's pure driver: everything between two I/O calls
// that decides election or liveness, the equivalent of etcd-raft's RawNode
// under etcd's server loop (docs/design.md §3).
//
// A Node owns, for one agent: the election protocol instance (built by
// NewProtocol, the one factory the agent and the simulator share), the
// phi-accrual detectors and the policy that decides which member is
// watched and when a detector is forgotten, the translation of membership
// events into protocol input and transport peer changes, the observers'
// gossip path, the status view (who leads, in which epoch, quorum health
// as the protocol counts it) and consistent-read waiters. It consumes
// inputs — a message, a membership event, a gossiped announcement, a
// request, the passing of time — and returns one Ready: the state to
// persist, the messages to send, the transport peers to add or remove, the
// announcements to gossip, the status to publish and the answers to
// pending requests. The driver contract — the order, what a failed
// persist means, that only Advance acknowledges — is written once, on type
// Ready; Drain carries it out through a Shell, for the agent and the
// simulator alike.
//
// Like protocols/ and phi/, the package must never start a goroutine, do
// I/O, read a clock or draw from global randomness: time is an input and
// randomness comes from the Config. The one question it asks its shell is
// whether the transport reaches a member (Config.Reachable), a read of
// state that the simulator answers from its network model. That is what
// lets sim/ run the same core under thousands of seeded schedules.
package core
