package core

import (
	"errors"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/protocols/observe"
)

// recShell is a core.Drain shell that records what it was asked to do and
// fails Persist while failPersist is set.
type recShell struct {
	failPersist bool
	persisted   []protocols.HardState
	sent        []protocols.Message
	order       []string
}

func (s *recShell) Persist(hs *protocols.HardState, observed uint64) error {
	if s.failPersist {
		return errors.New("disk full")
	}
	if hs != nil {
		s.persisted = append(s.persisted, *hs)
	}
	s.order = append(s.order, "persist")
	return nil
}
func (s *recShell) Send(msgs []protocols.Message) {
	s.sent = append(s.sent, msgs...)
	s.order = append(s.order, "send")
}
func (s *recShell) ApplyPeers([]PeerChange)       { s.order = append(s.order, "peers") }
func (s *recShell) Gossip([]observe.Announcement) { s.order = append(s.order, "gossip") }
func (s *recShell) PublishDigest(string, string)  { s.order = append(s.order, "digest") }
func (s *recShell) Publish(api.Status)            { s.order = append(s.order, "status") }
func (s *recShell) Settle([]Confirmation, []VoterResult, []SessionEnd) {
	s.order = append(s.order, "settle")
}
func (s *recShell) FireHooks(Transition)  { s.order = append(s.order, "hooks") }
func (s *recShell) index(step string) int { return indexOf(s.order, step) }
func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// voteRequest is a term-5 vote request from member a (id 2), which the
// test node grants: the grant must be persisted before it is sent.
func voteRequest() protocols.Message {
	return protocols.Message{Kind: protocols.MsgVote, From: 2, To: 1, Term: 5}
}

func grantingNode(t *testing.T) *testNode {
	t.Helper()
	tn, _ := newTestNode(t, ProtocolMajority)
	tn.applyMember(member("a", 2, membership.StateAlive))
	tn.at(2 * time.Second) // past the start-up refusal
	return tn
}

// TestFailedPersistSendsNothing: a vote whose persist fails must not be
// sent, nor anything else of its batch, and the batch must stay pending:
// the next Drain with a working disk persists and sends it.
func TestFailedPersistSendsNothing(t *testing.T) {
	tn := grantingNode(t)
	if err := tn.Step(tn.now, voteRequest()); err != nil {
		t.Fatal(err)
	}
	sh := &recShell{failPersist: true}
	if err := Drain(tn.Node, sh); err == nil {
		t.Fatal("Drain with a failing persist returned nil")
	}
	if len(sh.order) != 0 || len(sh.sent) != 0 {
		t.Fatalf("with the persist failed the shell was asked to %v (sent %v), want nothing", sh.order, sh.sent)
	}
	if !tn.HasReady() {
		t.Fatal("the failed batch was dropped: HasReady is false")
	}
	sh.failPersist = false
	if err := Drain(tn.Node, sh); err != nil {
		t.Fatal(err)
	}
	if len(sh.persisted) == 0 || sh.persisted[0].Vote != 2 || sh.persisted[0].Term != 5 {
		t.Fatalf("persisted %+v, want the vote for 2 in term 5", sh.persisted)
	}
	granted := false
	for _, m := range sh.sent {
		granted = granted || (m.Kind == protocols.MsgVoteResp && !m.Reject && m.To == 2)
	}
	if !granted {
		t.Fatalf("sent %v after the retry, want the vote grant to 2", sh.sent)
	}
	if p, s := sh.index("persist"), sh.index("send"); p < 0 || s < p {
		t.Fatalf("order %v: persist must come before send", sh.order)
	}
}

// TestSecondReadyBeforeAdvancePanics: the contract forbids a second Ready
// before Advance, and the core enforces it.
func TestSecondReadyBeforeAdvancePanics(t *testing.T) {
	tn := grantingNode(t)
	if err := tn.Step(tn.now, voteRequest()); err != nil {
		t.Fatal(err)
	}
	rd := tn.Ready()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Ready before Advance did not panic")
			}
		}()
		tn.Ready()
	}()
	tn.Advance(rd)
	if tn.HasReady() {
		tn.drain() // the batch and anything after it
	}
	tn.Ready() // allowed again after Advance
}

// TestAdvanceAcknowledges: what a Ready handed out stays pending until
// Advance, and Advance drops exactly that.
func TestAdvanceAcknowledges(t *testing.T) {
	tn := grantingNode(t)
	if err := tn.Step(tn.now, voteRequest()); err != nil {
		t.Fatal(err)
	}
	sent := tn.stats.Sent[protocols.MsgVoteResp]
	rd := tn.Ready()
	if rd.HardState == nil || len(rd.Messages) == 0 {
		t.Fatalf("Ready %+v, want the vote and its grant", rd)
	}
	if tn.stats.Sent[protocols.MsgVoteResp] != sent {
		t.Fatal("messages counted as sent before Advance")
	}
	tn.Advance(rd)
	if tn.stats.Sent[protocols.MsgVoteResp] != sent+1 {
		t.Fatalf("sent count %d after Advance, want %d", tn.stats.Sent[protocols.MsgVoteResp], sent+1)
	}
}
