package core

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// confirmWait is a consistent read waiting for its quorum round.
type confirmWait struct {
	token    uint64
	deadline protocols.Time
	timeout  time.Duration
}

// ConfirmLeadership starts a consistent read: a fresh quorum round that
// proves this node still leads (majority only). wait is false when there
// is nothing to wait for — this node does not lead, so its status makes no
// claim to confirm — and the caller answers with Status at once. Otherwise
// a Confirmation with the returned token arrives in a later Ready, within
// Config.ConfirmTimeout.
func (n *Node) ConfirmLeadership(now protocols.Time) (token uint64, wait bool, err error) {
	confirmer, ok := n.proto.(protocols.Confirmer)
	if !ok {
		return 0, false, ErrConfirmUnsupported
	}
	defer n.settle(now)
	if n.proto.Status(now).Role != protocols.Leader {
		return 0, false, nil
	}
	token, err = confirmer.ConfirmLeadership(now)
	if err != nil {
		// The lease ran out between the two questions: not leader.
		return 0, false, nil
	}
	timeout := n.cfg.ConfirmTimeout
	if timeout <= 0 {
		timeout = n.cfg.Election.ElectionTimeout
	}
	n.confirms = append(n.confirms, confirmWait{token: token, deadline: now.Add(timeout), timeout: timeout})
	return token, true, nil
}

// checkConfirms settles consistent reads after each input.
func (n *Node) checkConfirms(now protocols.Time) {
	if len(n.confirms) == 0 {
		return
	}
	confirmer := n.proto.(protocols.Confirmer)
	kept := n.confirms[:0]
	for _, w := range n.confirms {
		switch {
		case confirmer.Confirmed(w.token):
			n.settled = append(n.settled, Confirmation{Token: w.token})
		case now >= w.deadline:
			n.settled = append(n.settled, Confirmation{Token: w.token, Err: fmt.Errorf("%w within %v", ErrConfirmTimeout, w.timeout)})
		case n.proto.Status(now).Role != protocols.Leader:
			n.settled = append(n.settled, Confirmation{Token: w.token, Err: ErrLostLeadership})
		default:
			kept = append(kept, w)
		}
	}
	n.confirms = kept
}
