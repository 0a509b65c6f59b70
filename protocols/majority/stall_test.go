package majority

import (
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// leaderless returns a network of four voters whose leader has just
// crashed without anyone being told, its three survivors, and the first
// one's election deadline (the time its driver would wake it).
func leaderless(t *testing.T) (*testNet, []*Node, protocols.Time) {
	t.Helper()
	tn := newTestNet(4, 0, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	tn.crash(l)
	var live []*Node
	for _, id := range tn.Live() {
		live = append(live, tn.Nodes[id])
	}
	due, ok := live[0].NextDeadline(tn.Now)
	if !ok {
		t.Fatal("no election deadline")
	}
	return tn, live, due
}

// sent reports whether n had a message of kind waiting to be sent.
func sent(n *Node, kind protocols.MessageKind) bool {
	for _, m := range take(n) {
		if m.Kind == kind {
			return true
		}
	}
	return false
}

// TestStalledTimerDrawsApart: a follower woken long after its election
// deadline (a process stall) does not campaign at that tick but draws a
// new deadline within an election timeout; one woken a little late
// campaigns at once; and a driver that is always late still campaigns
// after maxRedraws draws.
func TestStalledTimerDrawsApart(t *testing.T) {
	et := baseConfig().ElectionTimeout

	_, live, due := leaderless(t)
	n := live[0]
	n.Tick(due.Add(et / 5))
	if !sent(n, protocols.MsgPreVote) {
		t.Fatalf("a tick %v late did not pre-campaign", et/5)
	}

	_, live, due = leaderless(t)
	n = live[0]
	now := due.Add(3 * et)
	for i := range maxRedraws {
		n.Tick(now)
		if sent(n, protocols.MsgPreVote) || n.state != stateFollower {
			t.Fatalf("stall %d: campaigned at once on waking", i+1)
		}
		next, ok := n.NextDeadline(now)
		if !ok || next < now || next >= now.Add(et) {
			t.Fatalf("stall %d: next deadline %v after waking, want within [0, %v)", i+1, next.Sub(now), et)
		}
		now = next.Add(3 * et) // stalled again before it came
	}
	n.Tick(now)
	if !sent(n, protocols.MsgPreVote) {
		t.Fatalf("still no campaign after %d stalls in a row", maxRedraws+1)
	}
}

// TestSoleVoterStartsLate: a sole voter's first deadline is its start;
// a driver that ticks it long after (a slow start) must not delay its
// election, since nobody can split the vote with it.
func TestSoleVoterStartsLate(t *testing.T) {
	tn := newTestNet(1, 0, 1, baseConfig())
	n := tn.Nodes[1]
	n.Tick(tn.Now.Add(baseConfig().ElectionTimeout))
	tn.Drain(1)
	if st := n.Status(tn.Now.Add(baseConfig().ElectionTimeout)); st.Role != protocols.Leader {
		t.Fatalf("a sole voter ticked late reports %+v, want leader", st)
	}
}

// TestStalledFollowerKeepsLiveLeader: a follower whose process stalls
// while its leader lives wakes with its timer expired and the leader's
// heartbeats queued. Whichever its driver handles first, it must not
// pre-campaign on the stale timer: it keeps its leader.
func TestStalledFollowerKeepsLiveLeader(t *testing.T) {
	tn := newTestNet(3, 0, 1, baseConfig())
	l, _ := tn.runUntilLeader(10 * time.Second)
	if l == protocols.None {
		t.Fatal("no leader")
	}
	f := l%3 + 1
	term := tn.Nodes[f].Status(tn.Now).Term
	tn.TakeEvents()
	tn.TraceSends = true
	tn.stall(3*baseConfig().ElectionTimeout, []protocols.ID{f})
	tn.Advance(100 * time.Millisecond)
	for _, e := range tn.Events {
		if strings.Contains(e, "PreVote") || strings.Contains(e, "candidate") {
			t.Fatalf("the stalled follower campaigned on waking: %s\n%s", e, strings.Join(tn.Events, "\n"))
		}
	}
	if st := tn.Nodes[f].Status(tn.Now); st.Leader != l || st.Term != term {
		t.Fatalf("after the stall n%d reports %+v, want leader n%d in term %d", f, st, l, term)
	}
}

// TestContestedPreVoteWaits: a pre-candidate that won its pre-vote after
// granting a rival's pre-vote for the same term does not campaign at once
// (the rival may be winning at the same moment); it campaigns at its
// deadline, within an election timeout, unless the rival's vote request
// comes first, which it grants.
func TestContestedPreVoteWaits(t *testing.T) {
	et := baseConfig().ElectionTimeout
	for _, rivalFirst := range []bool{false, true} {
		_, live, due := leaderless(t)
		a, b, c := live[0], live[1], live[2]
		db := mustDeadline(t, b, due)
		now := max(due, db)
		a.Tick(due) // both pre-campaign, each at its own deadline
		b.Tick(db)
		var aReq, bReq protocols.Message
		for _, m := range take(a) {
			if m.Kind == protocols.MsgPreVote && m.To == b.id {
				aReq = m
			}
		}
		for _, m := range take(b) {
			if m.Kind == protocols.MsgPreVote && m.To == a.id {
				bReq = m
			}
		}
		if aReq.Kind != protocols.MsgPreVote || bReq.Kind != protocols.MsgPreVote {
			t.Fatalf("no pre-votes exchanged: %v %v", aReq, bReq)
		}
		// Each grants the other's pre-vote, as pre-candidates of the same
		// term do.
		step(t, b, now, aReq)
		step(t, a, now, bReq)
		for _, m := range take(a) {
			if m.To == b.id {
				step(t, b, now, m)
			}
		}
		for _, m := range take(b) {
			if m.To == a.id {
				step(t, a, now, m)
			}
		}
		take(a)
		take(b)
		// c, the voter both waited on, answers both at once.
		grant := protocols.Message{Kind: protocols.MsgPreVoteResp, From: c.id, Term: aReq.Term}
		grant.To = a.id
		step(t, a, now, grant)
		grant.To = b.id
		step(t, b, now, grant)
		if a.state != statePreCandidate || b.state != statePreCandidate {
			t.Fatalf("a pre-candidate that knew of its rival campaigned at once: states %v %v", a.state, b.state)
		}
		da, _ := a.NextDeadline(now)
		db, _ = b.NextDeadline(now)
		if da >= now.Add(et) || db >= now.Add(et) || da == db {
			t.Fatalf("campaign deadlines %v and %v, want distinct and within %v", da.Sub(now), db.Sub(now), et)
		}
		first, second := a, b
		if db < da {
			first, second = b, a
		}
		first.Tick(min(da, db))
		var vote protocols.Message
		for _, m := range take(first) {
			if m.Kind == protocols.MsgVote && m.To == second.id {
				vote = m
			}
		}
		if first.state != stateCandidate || vote.Kind != protocols.MsgVote {
			t.Fatalf("no campaign at the deadline: state %v", first.state)
		}
		if rivalFirst {
			step(t, second, min(da, db), vote)
			resp := take(second)
			if second.state != stateFollower || len(resp) != 1 || resp[0].Reject {
				t.Fatalf("the waiting pre-candidate refused its rival's vote request: state %v, answers %v", second.state, resp)
			}
		}
	}
}

func mustDeadline(t *testing.T, n *Node, now protocols.Time) protocols.Time {
	t.Helper()
	d, ok := n.NextDeadline(now)
	if !ok {
		t.Fatal("no deadline")
	}
	return d
}

func take(n *Node) []protocols.Message {
	var out []protocols.Message
	for n.HasReady() {
		rd := n.Ready()
		out = append(out, rd.Messages...)
		n.Advance(rd)
	}
	return out
}

func step(t *testing.T, n *Node, now protocols.Time, m protocols.Message) {
	t.Helper()
	if err := n.Step(now, m); err != nil {
		t.Fatalf("n%d step %v: %v", n.id, m, err)
	}
}

// TestFollowerGrantIsNoRival: a follower that granted someone's pre-vote
// and then wins its own campaigns at once. The one it granted
// pre-campaigned first and may already campaign; waiting would only let
// more pre-candidates in.
func TestFollowerGrantIsNoRival(t *testing.T) {
	_, live, due := leaderless(t)
	a, b, c := live[0], live[1], live[2]
	a.Tick(due)
	var req protocols.Message
	for _, m := range take(a) {
		if m.Kind == protocols.MsgPreVote && m.To == b.id {
			req = m
		}
	}
	step(t, b, due, req) // b, a follower, grants
	take(b)
	db := mustDeadline(t, b, due)
	b.Tick(db)
	var preVotes int
	for _, m := range take(b) {
		if m.Kind == protocols.MsgPreVote {
			preVotes++
		}
	}
	if preVotes == 0 {
		t.Fatal("b did not pre-campaign at its deadline")
	}
	for _, from := range []*Node{a, c} {
		step(t, b, db, protocols.Message{Kind: protocols.MsgPreVoteResp, From: from.id, To: b.id, Term: req.Term})
	}
	if b.state != stateCandidate {
		t.Fatalf("b won its pre-vote but is in state %v, not campaigning", b.state)
	}
}
