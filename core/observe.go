package core

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// observers is the core's side of the observers' slow path
// (protocols/observe): with majority and a cluster that gossips, the
// leader heartbeats only voters and announces itself by gossip; observers
// report what the announcements say. Without gossip (the in-memory
// cluster of tests) every member keeps getting heartbeats.
type observers struct {
	on        bool
	voters    map[string]bool
	knowledge observe.Knowledge
	announcer *observe.Announcer
	// floor is the highest epoch reported from gossip, or handed back at
	// start (Config.ObservedEpoch): the reported epoch never goes below
	// it, and older announcements are ignored. persist, when not zero, is
	// a raised floor the next Ready asks the shell to make durable.
	floor   uint64
	persist uint64
}

func (n *Node) initObservers() {
	n.obs.floor = n.cfg.ObservedEpoch
	if !n.cfg.Gossip || !traitsOf(n.cfg.Election.Protocol).gossipObservers {
		return
	}
	n.obs.on = true
	n.obs.voters = make(map[string]bool, len(n.cfg.Election.Voters))
	for _, v := range n.cfg.Election.Voters {
		n.obs.voters[v] = true
	}
	n.obs.announcer = observe.NewAnnouncer(n.self.ID, observe.RefreshInterval)
}

// newcomerGap is how often at most observers that appear hasten a leader's
// announcement (observe.Announcer.Hasten): a fleet starting up costs the
// leader four announcements a second, not one per agent.
const newcomerGap = 250 * time.Millisecond

// greet brings the leader's next announcement forward for an observer
// that just appeared: it was not there for the last one, and would
// otherwise wait up to observe.RefreshInterval to learn who leads.
func (n *Node) greet(now protocols.Time, name string) {
	if n.obs.announcer == nil || n.obs.voters[name] || n.currentVoter(now, name) {
		return
	}
	n.obs.announcer.Hasten(now, newcomerGap)
}

// fastPath reports whether m goes over the transport (observe.FastPath).
func (n *Node) fastPath(m protocols.Message) bool {
	if !n.obs.on {
		return true
	}
	name, known := n.byID[m.To]
	return observe.FastPath(m, !known || n.obs.voters[name] || n.currentVoter(n.now, name))
}

// Gossiped takes a message another member gossiped: a newer announcement
// is kept and relayed. Anything else is refused with the decoder's error.
func (n *Node) Gossiped(now protocols.Time, b []byte) error {
	if !n.obs.on {
		return nil
	}
	defer n.settle(now)
	ann, err := observe.Decode(b)
	if err != nil {
		return err
	}
	if ann.Election != n.wire {
		return fmt.Errorf("core: announcement of election %q handed to election %q", ann.Election, n.wire)
	}
	if ann.Leader == n.self.ID {
		return nil // our own, relayed back
	}
	if own := n.knownEpoch(now); !protocols.AdmitTerm(ann.Epoch, own) || ann.Term > protocols.Ceiling {
		// Majority's epoch is its term. Reporting such an epoch would
		// have to persist it, which the store refuses above the ceiling.
		n.stats.StepErrors++
		n.stats.BeyondCeiling++
		return fmt.Errorf("core: announcement of epoch %d, term %d refused at epoch %d: %w", ann.Epoch, ann.Term, own, protocols.ErrBeyondCeiling)
	}
	if ann.Epoch < n.obs.floor {
		// This agent already reported a later epoch, perhaps before a
		// restart: the claim is stale, and relaying it helps no one.
		return nil
	}
	if n.obs.knowledge.Learn(now, ann) {
		if cur, ok := n.obs.knowledge.Current(now); ok {
			n.announce = append(n.announce, cur)
		}
	}
	return nil
}

// knownEpoch is the highest epoch this node knows: its protocol's, the
// newest announcement's, the floor.
func (n *Node) knownEpoch(now protocols.Time) uint64 {
	own := max(n.proto.Status(now).Epoch, n.obs.floor)
	if cur, ok := n.obs.knowledge.Current(now); ok {
		own = max(own, cur.Epoch)
	}
	return own
}

// announceDue queues this leader's announcement when one is due and some
// member observes (a cluster of voters only needs none).
func (n *Node) announceDue(now protocols.Time) {
	if n.obs.announcer == nil {
		return
	}
	n.obs.announcer.Observe(now, n.proto.Status(now))
	ann, ok := n.obs.announcer.Due(now)
	if !ok || !n.hasObservers() {
		// Due re-armed the timer either way, so the loop does not spin.
		return
	}
	n.announce = append(n.announce, ann)
}

// announceDeadline is when the next announcement is due, for NextWake.
func (n *Node) announceDeadline() (protocols.Time, bool) {
	if n.obs.announcer == nil {
		return 0, false
	}
	return n.obs.announcer.NextDeadline()
}

func (n *Node) hasObservers() bool {
	for name, m := range n.members {
		if !n.obs.voters[name] && isLive(m) {
			return true
		}
	}
	return false
}

// electionStatus is the status this agent reports: the protocol's, with
// an observer's leader, epoch and term taken from the newest announcement
// when that is newer than what the protocol knows, and never an epoch below
// the floor. It returns when the leader made a learned claim.
func (n *Node) electionStatus(now protocols.Time) (protocols.Status, protocols.Time, bool) {
	st, origin, learned, _ := n.reported(now)
	return st, origin, learned
}

// reported is electionStatus, also saying whether the floor replaced the
// status: the protocol's epoch is below what this agent reported before
// (an observer restarted before any new announcement, say). It then
// reports the floor epoch and no leader: it knows that epoch existed, not
// who leads now, and claiming the old leader without an age to show would
// be more than it knows (docs/design.md §1.4).
func (n *Node) reported(now protocols.Time) (st protocols.Status, origin protocols.Time, learned, floored bool) {
	st, origin, learned = n.learnedStatus(now)
	if st.Epoch >= n.obs.floor {
		return st, origin, learned, false
	}
	st.Epoch, st.Leader, st.LeaderName, st.LeaseUntil = n.obs.floor, protocols.None, "", 0
	if st.Role == protocols.Leader {
		// A leader of an epoch older than one this agent reported is
		// stale; it may not say it leads (§1.4).
		st.Role = protocols.Follower
	}
	return st, 0, false, true
}

// learnedStatus is the protocol's status with an observer's knowledge
// merged in, before the floor.
func (n *Node) learnedStatus(now protocols.Time) (protocols.Status, protocols.Time, bool) {
	st := n.proto.Status(now)
	if !n.obs.on || st.Role != protocols.Observer {
		return st, 0, false
	}
	cur, ok := n.obs.knowledge.Current(now)
	if !ok || cur.Epoch < st.Epoch {
		return st, 0, false
	}
	st.Leader, st.Epoch, st.Term, st.LeaderName = cur.Leader, cur.Epoch, cur.Term, ""
	origin, _ := n.obs.knowledge.Origin()
	return st, origin, true
}

// raiseFloor runs in settle, before the status is computed: an epoch
// about to be reported from gossip above the floor raises it, and the
// next Ready asks the shell to persist it before the status is published
// (the same "persist before acting" order as HardState).
func (n *Node) raiseFloor(now protocols.Time) {
	st, _, learned := n.learnedStatus(now)
	if !learned || st.Epoch <= n.obs.floor {
		return
	}
	n.obs.floor = st.Epoch
	if !n.cfg.Unsafe.ForgetObserved {
		n.obs.persist = st.Epoch
	}
}
