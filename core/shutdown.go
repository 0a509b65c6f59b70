package core

import (
	"errors"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// Shutdown: a leader that is asked to stop hands leadership over first,
// so the cluster does not wait out a failure detection for a planned
// stop. The shell keeps driving the core through its one loop —
// membership, messages, timers and the socket — until Stopping reports
// done.

// handoverETs bounds, in election timeouts, how long a stopping leader
// waits for its successor before it stops anyway: a transfer completes
// within one election round, and ten of them (2 s at the default timeout)
// cover a slow successor without keeping an operator's stop waiting.
const handoverETs = 10

// shutdownState is where a stop is: not asked, handing over, or done.
type shutdownState struct {
	asked, done bool
	until       protocols.Time
}

// Shutdown starts this node's stop. A leader asks the protocol to hand
// leadership over and waits for a successor, at most handoverETs election
// timeouts; any other node is done at once. Calling it again changes
// nothing.
func (n *Node) Shutdown(now protocols.Time) {
	defer n.settle(now)
	if n.stop.asked {
		return
	}
	n.stop.asked = true
	if n.proto.Status(now).Role != protocols.Leader {
		n.stop.done = true
		return
	}
	if err := n.proto.Resign(now); err != nil {
		// The usual reason (a single voter, or no other voter
		// reachable) is not a fault: no error field for it.
		if errors.Is(err, protocols.ErrNoTransferTarget) {
			n.log.Infow("stopping as leader: no other voter is reachable to hand leadership to")
		} else {
			n.log.Warnw("no leadership transfer on shutdown", "error", err)
		}
		n.stop.done = true
		return
	}
	n.log.Infow("handing leadership over before shutdown")
	// A node on its way out must not stand again while it waits for its
	// successor: its own election timer could otherwise win the
	// leadership back.
	n.candidacy.Ineligible = true
	if cs, ok := n.proto.(protocols.CandidacySetter); ok {
		cs.SetCandidacy(now, n.candidacy)
	}
	n.stop.until = now.Add(handoverETs * n.cfg.Election.ElectionTimeout)
}

// Stopping reports whether Shutdown was called (asked) and whether the
// node is done with it (done): the shell may then leave and exit.
func (n *Node) Stopping() (asked, done bool) { return n.stop.asked, n.stop.done }

// checkShutdown ends a handover once another node leads, or once its
// time is up.
func (n *Node) checkShutdown(now protocols.Time) {
	if !n.stop.asked || n.stop.done {
		return
	}
	st := n.proto.Status(now)
	if st.Leader != n.self.ID && st.Leader != protocols.None {
		n.log.Infow("leadership handed over", "leader", n.byID[st.Leader])
		n.stop.done = true
		return
	}
	if now < n.stop.until {
		return
	}
	n.stop.done = true
	if n.othersGone() {
		// Every other member left or failed meanwhile: they are stopping
		// too (a whole cluster stopped at once), so no successor could
		// take over. Nothing is wrong; the next start elects.
		n.log.Infow("stopping without a successor: every other member is stopping or gone")
		return
	}
	n.log.Warnw("leadership handover timed out: no other member took leadership over")
}

// shutdownDeadline is the handover's end, while one runs.
func (n *Node) shutdownDeadline() (protocols.Time, bool) {
	return n.stop.until, n.stop.asked && !n.stop.done
}

// othersGone reports whether gossip knows no other member that is alive
// or only suspected.
func (n *Node) othersGone() bool {
	for name, m := range n.members {
		if name != n.self.Name && (m.State == membership.StateAlive || m.State == membership.StateSuspect) {
			return false
		}
	}
	return true
}
