package sim_test

import (
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/sim"
)

// toyFlaws are deliberate bugs, each of which one invariant must catch.
type toyFlaws struct {
	forgetEpoch  bool // the epoch is not restored on restart
	sharedEpochs bool // new epoch = max+1, not an epoch this node owns
	wrongLeader  bool // followers assume node 1 leads whatever epoch they hear
	muteRestart  bool // after a restart, leads without ever heartbeating
}

// toy is a small "lowest id that is heard leads" protocol with epochs that
// each belong to one node (epoch ≡ id mod n), so it is safe in every
// invariant but the lease. Leaders heartbeat everyone; every heartbeat is
// answered with the responder's highest epoch so a leader that fell behind
// takes a higher one.
type toy struct {
	self     protocols.ID
	peers    []protocols.ID
	n        uint64
	hs       protocols.HardState
	role     protocols.Role
	leader   protocols.ID
	epoch    uint64
	timeout  time.Duration
	hb       time.Duration
	heard    protocols.Time // last heartbeat from a lower id (or start)
	lastHB   protocols.Time
	dirty    bool
	msgs     []protocols.Message
	soft     protocols.SoftState
	softSent protocols.SoftState
	flaws    toyFlaws
	mute     bool
}

func toyFactory(f toyFlaws) sim.Factory {
	return func(c sim.NodeConfig) (protocols.Protocol, error) {
		t := &toy{
			self:    c.Self.ID,
			n:       uint64(len(c.Members)),
			timeout: c.ElectionTimeout + time.Duration(c.Rand.Int64N(int64(c.ElectionTimeout))),
			hb:      c.HeartbeatInterval,
			heard:   c.Now,
			flaws:   f,
			mute:    f.muteRestart && !c.HardState.IsZero(),
		}
		for _, m := range c.Members {
			if m.ID != c.Self.ID {
				t.peers = append(t.peers, m.ID)
			}
		}
		if !f.forgetEpoch {
			t.hs = c.HardState
		}
		t.epoch = t.hs.Epoch
		return t, nil
	}
}

func (t *toy) setEpoch(e uint64) {
	t.epoch = e
	if e > t.hs.Epoch {
		t.hs.Epoch = e
		t.dirty = true
	}
}

func (t *toy) lead(now protocols.Time) {
	e := t.hs.Epoch + 1
	if !t.flaws.sharedEpochs {
		for e%t.n != uint64(t.self)%t.n {
			e++
		}
	}
	t.setEpoch(e)
	t.role, t.leader = protocols.Leader, t.self
	t.heartbeat(now)
}

func (t *toy) heartbeat(now protocols.Time) {
	t.lastHB = now
	if t.mute {
		return
	}
	for _, p := range t.peers {
		t.msgs = append(t.msgs, protocols.Message{Kind: protocols.MsgHeartbeat, From: t.self, To: p, Epoch: t.epoch})
	}
}

func (t *toy) Step(now protocols.Time, m protocols.Message) error {
	switch m.Kind {
	case protocols.MsgHeartbeat:
		if m.From < t.self {
			t.heard = now
		}
		t.msgs = append(t.msgs, protocols.Message{Kind: protocols.MsgHeartbeatResp, From: t.self, To: m.From, Epoch: max(t.hs.Epoch, m.Epoch)})
		switch {
		case m.Epoch < t.epoch:
			if m.From < t.self && t.role == protocols.Leader {
				t.role, t.leader = protocols.Follower, protocols.None
			}
		case t.role == protocols.Leader && m.From > t.self:
			t.lead(now) // outbid the higher id
		default:
			t.setEpoch(m.Epoch)
			t.role, t.leader = protocols.Follower, m.From
			if t.flaws.wrongLeader {
				t.leader = 1
			}
		}
	case protocols.MsgHeartbeatResp:
		if m.Epoch > t.hs.Epoch {
			t.hs.Epoch = m.Epoch
			t.dirty = true
		}
		if t.role == protocols.Leader && m.Epoch > t.epoch {
			t.lead(now)
		}
	default:
		return protocols.ErrUnknownKind
	}
	return nil
}

func (t *toy) Tick(now protocols.Time) {
	if t.role == protocols.Leader {
		if now.Sub(t.lastHB) >= t.hb {
			t.heartbeat(now)
		}
		return
	}
	if now.Sub(t.heard) >= t.timeout {
		t.lead(now)
	}
}

func (t *toy) MemberUp(protocols.Time, protocols.Member)  {}
func (t *toy) MemberDown(protocols.Time, protocols.ID)    {}
func (t *toy) Suspect(protocols.Time, protocols.ID, bool) {}

func (t *toy) Resign(now protocols.Time) error {
	if t.role != protocols.Leader {
		return protocols.ErrNotLeader
	}
	t.role, t.leader = protocols.Follower, protocols.None
	t.heard = now
	return nil
}

func (t *toy) Status(protocols.Time) protocols.Status {
	return protocols.Status{Role: t.role, Leader: t.leader, Epoch: t.epoch, Term: t.epoch}
}

func (t *toy) HasReady() bool {
	t.soft = protocols.SoftState{Role: t.role, Leader: t.leader, Epoch: t.epoch}
	return t.dirty || len(t.msgs) > 0 || t.soft != t.softSent
}

func (t *toy) Ready() protocols.Ready {
	var rd protocols.Ready
	if t.dirty {
		hs := t.hs
		rd.HardState = &hs
	}
	rd.Messages = t.msgs
	if t.soft != t.softSent {
		ss := t.soft
		rd.SoftState = &ss
	}
	return rd
}

func (t *toy) Advance(rd protocols.Ready) {
	if rd.HardState != nil {
		t.dirty = false
	}
	if rd.SoftState != nil {
		t.softSent = *rd.SoftState
	}
	t.msgs = t.msgs[len(rd.Messages):]
	if len(t.msgs) == 0 {
		t.msgs = nil
	}
}
