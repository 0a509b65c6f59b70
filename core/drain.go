package core

import (
	"errors"
	"fmt"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// Shell is what Drain needs from the code around a Node: one method per
// step of the driver contract (type Ready), called in its order. The agent
// implements it with the disk, the transport, gossip and the socket; the
// simulator with its network and membership models. A Shell must not call
// back into the Node.
type Shell interface {
	// Persist makes hs (nil: unchanged) and then observed (0: unchanged)
	// durable. An error stops Drain before anything else of the batch.
	Persist(hs *protocols.HardState, observed uint64) error
	// Send hands messages to the transport.
	Send(msgs []protocols.Message)
	// ApplyPeers adds, re-addresses or removes transport peers, in
	// order: a member with a new identity is removed, then added back
	// with the same transport peer id, which the transport refuses while
	// the old id holds it.
	ApplyPeers(peers []PeerChange)
	// Gossip broadcasts leader announcements.
	Gossip(anns []observe.Announcement)
	// PublishDigest puts the settings digest in gossip metadata.
	PublishDigest(digest, ext string)
	// Publish tells local watchers the new status.
	Publish(st api.Status)
	// FireHooks runs the hooks configured for t.On.
	FireHooks(t Transition)
	// Settle answers consistent reads and voter changes, and tells the
	// holders of sessions the core ended.
	Settle(cs []Confirmation, vs []VoterResult, ends []SessionEnd)
}

// maxDrainRounds bounds the Ready/Advance rounds of one Drain: each round
// carries out what the previous inputs produced, and a core that never
// runs dry is a bug, not a load.
const maxDrainRounds = 1000

// ErrDrainLoop is Drain's error for a core still ready after
// maxDrainRounds rounds.
var ErrDrainLoop = errors.New("core: still ready after 1000 Ready/Advance rounds")

// Drain carries out every pending Ready of n through sh, in the contract's
// order, advancing after each. On a failed Persist it returns the error
// with nothing of that batch sent, applied or published, and without
// Advance: the batch stays pending in n.
func Drain(n *Node, sh Shell) error {
	for i := 0; n.HasReady(); i++ {
		if i == maxDrainRounds {
			return ErrDrainLoop
		}
		rd := n.Ready()
		if rd.HardState != nil || rd.ObservedEpoch != 0 {
			if err := sh.Persist(rd.HardState, rd.ObservedEpoch); err != nil {
				n.readyOut = false // the batch stays pending, unacknowledged
				return fmt.Errorf("core: persist before sending: %w", err)
			}
		}
		if len(rd.Peers) > 0 {
			sh.ApplyPeers(rd.Peers)
		}
		if len(rd.Messages) > 0 {
			sh.Send(rd.Messages)
		}
		if len(rd.Announcements) > 0 {
			sh.Gossip(rd.Announcements)
		}
		if rd.Digest != "" {
			sh.PublishDigest(rd.Digest, rd.DigestExt)
		}
		if rd.Status != nil {
			sh.Publish(*rd.Status)
		}
		if rd.Transition != nil {
			sh.FireHooks(*rd.Transition)
		}
		if len(rd.Confirmations) > 0 || len(rd.VoterResults) > 0 || len(rd.SessionsEnded) > 0 {
			sh.Settle(rd.Confirmations, rd.VoterResults, rd.SessionsEnded)
		}
		n.Advance(rd)
	}
	return nil
}
