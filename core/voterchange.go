package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/protocols"
)

// A voter change from the socket, from proposal to commit: the core's
// checks, the protocol's, a bounded retry while a member being added has
// not answered yet, and the wait for the commit. The shell only carries
// the request in (ProposeVoters) and the outcome out (Ready.VoterResults);
// no wall-clock poll decides anything.

// addRetryETs is how long, in election timeouts, a change adding a member
// is retried while the protocol says it would lose the quorum: the member
// being added answers the leader's first heartbeats within a round or
// two, after which the protocol counts it (adding a second voter to a
// cluster of one needs that answer).
const addRetryETs = 2

// addRetryMin is the least an add waits, whatever the election timeout:
// no voter probes an observer (probe.go), so the leader reaches the
// member being added once it answers those heartbeats, over a connection
// it may have to dial first.
const addRetryMin = time.Second

// maxVoterRequests bounds the changes waiting at once. The protocol takes
// one change at a time, so more than a few are callers retrying.
const maxVoterRequests = 8

// ErrTooManyVoterRequests refuses a change while maxVoterRequests wait.
var ErrTooManyVoterRequests = errors.New("too many voter changes waiting; wait until 'agent voters' shows no pending change, then retry")

// VoterResult settles a voter change started by ProposeVoters.
type VoterResult struct {
	Token uint64
	// Voters is the committed configuration when Err is nil.
	Voters api.Voters
	// Err is the protocol's refusal (protocols.ErrWouldLoseQuorum,
	// ErrChangeInFlight, ErrNotLeader, …) or ErrReplaced or
	// ErrNotLeading when the proposed configuration will not commit here.
	Err error
}

// voterRequest is a change waiting to be proposed (target zero) or to
// commit.
type voterRequest struct {
	token      uint64
	change     protocols.VoterChange
	target     protocols.Configuration
	retryUntil protocols.Time
}

// ProposeVoters starts voter change c on this node, which must lead. The
// core's own checks run first: a member to be added must be alive, and
// reachable before it is proposed, since a voter that cannot answer
// weakens the quorum from the moment it is added (it is probed, and sent
// heartbeats, while the change waits; unreached by the retry's end, the
// change is refused). Their refusal, and a protocol refusal that no
// retry can cure, come back at once as err. Otherwise the outcome arrives
// as a VoterResult with the returned token in a later Ready: committed,
// or why not.
func (n *Node) ProposeVoters(now protocols.Time, c protocols.VoterChange) (token uint64, err error) {
	defer n.settle(now)
	if err := n.admitVoterChange(c); err != nil {
		return 0, err
	}
	if len(n.voterReqs) >= maxVoterRequests {
		return 0, ErrTooManyVoterRequests
	}
	if c.Add != "" && c.Add != n.self.Name {
		// A member being added gets the leader's heartbeats from now on:
		// the protocol counts it towards the new set's quorum only once
		// it answered them.
		n.heartbeatExtra(c.Add, now.Add(RemovedGrace))
	}
	n.voterSeq++
	r := voterRequest{token: n.voterSeq, change: c, retryUntil: now.Add(max(addRetryETs*n.cfg.Election.ElectionTimeout, addRetryMin))}
	done, res := n.tryPropose(now, &r)
	if done {
		if res.Err != nil {
			return 0, res.Err
		}
		n.voterDone = append(n.voterDone, res)
		return r.token, nil
	}
	n.voterReqs = append(n.voterReqs, r)
	n.refreshProbe(c.Add)
	return r.token, nil
}

// admitVoterChange is the core's check of c before the protocol's. It
// reads state only.
func (n *Node) admitVoterChange(c protocols.VoterChange) error {
	if _, ok := n.voterChanger(); !ok {
		return ErrNoVoters
	}
	if c.Add == "" || c.Add == n.self.Name {
		return nil
	}
	m, ok := n.members[c.Add]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q is not a member this leader (%s) knows: start its agent and check 'agent members' lists it", ErrChangeRefused, c.Add, n.self.Name)
	case !isLive(m):
		return fmt.Errorf("%w: %q is %s: start its agent first", ErrChangeRefused, c.Add, m.State)
	case !n.reached(m) && !n.probe.off[m.ID]:
		// Probed and still not reached: no need to wait.
		return n.unreachedErr(c.Add)
	}
	return nil
}

// unreachedErr refuses adding name, which the transport does not reach.
func (n *Node) unreachedErr(name string) error {
	return fmt.Errorf("%w: %q is not reachable from the leader (%s) over the election transport: check its [transport] address and the cluster key", ErrChangeRefused, name, n.self.Name)
}

// waitsForReach reports whether r adds a member the transport has not
// reached yet, and with done, that the wait is over: the change is
// refused.
func (n *Node) waitsForReach(now protocols.Time, r *voterRequest) (waits, done bool) {
	add := r.change.Add
	if add == "" || add == n.self.Name {
		return false, false
	}
	if m, ok := n.members[add]; ok && n.reached(m) {
		return false, false
	}
	return true, now >= r.retryUntil
}

// tryPropose hands r's change to the protocol once more. done with a
// result when it ended (refused for good); not done when it waits for a
// retry or, once proposed (r.target set), for its commit.
func (n *Node) tryPropose(now protocols.Time, r *voterRequest) (done bool, res VoterResult) {
	res.Token = r.token
	if waits, over := n.waitsForReach(now, r); waits {
		if over {
			res.Err = n.unreachedErr(r.change.Add)
		}
		return over, res
	}
	vc, _ := n.voterChanger()
	err := vc.ChangeVoters(now, r.change)
	switch {
	case err == nil:
		r.target = n.proto.Status(now).Config
		n.log.Infow("voter change proposed", "add", r.change.Add, "remove", r.change.Remove, "index", r.target.Index, "voters", r.target.VoterList())
		return false, res
	case r.change.Add != "" && errors.Is(err, protocols.ErrWouldLoseQuorum) && now < r.retryUntil:
		return false, res
	}
	res.Err = err
	return true, res
}

// checkVoterRequests moves every waiting change on after an input: a
// retry for one not proposed yet, the commit check for one that was.
func (n *Node) checkVoterRequests(now protocols.Time) {
	if len(n.voterReqs) == 0 {
		return
	}
	kept := n.voterReqs[:0]
	var ended []string
	for _, r := range n.voterReqs {
		var (
			done bool
			res  VoterResult
		)
		if r.target.IsZero() {
			done, res = n.tryPropose(now, &r)
		}
		if !done && !r.target.IsZero() {
			res.Token = r.token
			done, res.Voters, res.Err = n.commitState(now, r.target)
		}
		if done {
			n.voterDone = append(n.voterDone, res)
			ended = append(ended, r.change.Add)
		} else {
			kept = append(kept, r)
		}
	}
	n.voterReqs = kept
	for _, name := range ended {
		n.refreshProbe(name) // its probe may stop now
	}
}

// voterDeadline is the earliest time a waiting change must be looked at
// without any input: a retry's end.
func (n *Node) voterDeadline() (protocols.Time, bool) {
	var (
		t  protocols.Time
		ok bool
	)
	for _, r := range n.voterReqs {
		if r.target.IsZero() && (!ok || r.retryUntil < t) {
			t, ok = r.retryUntil, true
		}
	}
	return t, ok
}

// commitState says whether the wait for target is over: committed (err
// nil, v the voters), or failed with ErrReplaced or ErrNotLeading.
func (n *Node) commitState(now protocols.Time, target protocols.Configuration) (done bool, v api.Voters, err error) {
	st := n.proto.Status(now)
	switch {
	case st.Committed == target:
		v, err = n.Voters(now)
		n.log.Infow("voter change committed", "index", target.Index, "voters", target.VoterList())
		return true, v, err
	case st.Committed.Compare(target) > 0 || st.Config.Compare(target) > 0 && st.Config.Voters != target.Voters:
		return true, v, fmt.Errorf("%w: %s was replaced by %s; check 'agent voters'", ErrReplaced, target, st.Config)
	case st.Role != protocols.Leader:
		return true, v, fmt.Errorf("%w: %s may still commit under the next leader: check 'agent voters'", ErrNotLeading, target)
	}
	return false, v, nil
}
