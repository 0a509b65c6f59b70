package protocols

import "fmt"

// MessageKind says what a Message means. ONLY APPEND TO THIS LIST: the
// numbers travel on the wire and peers of different versions must agree.
type MessageKind uint8

// Message kinds. Kinds 1–7 belong to majority, 8–10 to bully, 11–14,
// 15–17 and 18 to ring; heartbeats are shared by every protocol so the
// agent can feed phi.
const (
	MsgInvalid MessageKind = iota
	// MsgPreVote asks whether the sender could win an election in Term
	// (majority, PreVote). Nobody changes term or vote for it.
	MsgPreVote
	// MsgPreVoteResp answers MsgPreVote; Reject says no.
	MsgPreVoteResp
	// MsgVote asks for a vote in Term (majority).
	MsgVote
	// MsgVoteResp answers MsgVote; Reject says no.
	MsgVoteResp
	// MsgHeartbeat is the leader's periodic assertion of leadership in
	// Term/Epoch. Context is an opaque round number echoed in the response.
	MsgHeartbeat
	// MsgHeartbeatResp acknowledges a heartbeat, echoing its Context.
	MsgHeartbeatResp
	// MsgTimeoutNow tells the receiver to campaign at once, skipping PreVote
	// and the lease (majority leadership transfer).
	MsgTimeoutNow
	// MsgElection starts or forwards a bully election to a higher id.
	MsgElection
	// MsgOK tells a bully candidate that a higher id is alive and takes over.
	MsgOK
	// MsgCoordinator announces the bully winner Leader in Epoch.
	MsgCoordinator
	// MsgRingElect carries Candidate around the ring (LCR; HS probes use
	// MsgHSProbe).
	MsgRingElect
	// MsgRingLeader carries the elected Leader and Epoch around the ring.
	MsgRingLeader
	// MsgHSProbe is a Hirschberg-Sinclair probe of Candidate in Phase,
	// travelling in Direction with Hops already made.
	MsgHSProbe
	// MsgHSReply returns a Hirschberg-Sinclair probe to Candidate.
	MsgHSReply
	// MsgPetersonFirst is the first message of a Peterson phase: an active
	// node's temporary id, Candidate, in Phase of election Round.
	MsgPetersonFirst
	// MsgPetersonSecond is the second: the temporary id, Candidate, the
	// sending active node received in the phase's MsgPetersonFirst.
	MsgPetersonSecond
	// MsgPetersonWinner tells Candidate, the highest-ranked candidate of
	// Round, that the last active node found it the winner.
	MsgPetersonWinner
	// MsgRingAck acknowledges a ring election message that asked for one
	// (Context is RingAckRequest): a node whose round stalled asks its
	// successors, so that one that died unsuspected is routed past within
	// an election timeout (docs/bully-ring.md).
	MsgRingAck

	// msgKindEnd must stay last.
	msgKindEnd
)

var kindNames = [...]string{
	MsgInvalid:       "Invalid",
	MsgPreVote:       "PreVote",
	MsgPreVoteResp:   "PreVoteResp",
	MsgVote:          "Vote",
	MsgVoteResp:      "VoteResp",
	MsgHeartbeat:     "Heartbeat",
	MsgHeartbeatResp: "HeartbeatResp",
	MsgTimeoutNow:    "TimeoutNow",
	MsgElection:      "Election",
	MsgOK:            "OK",
	MsgCoordinator:   "Coordinator",
	MsgRingElect:     "RingElect",
	MsgRingLeader:    "RingLeader",
	MsgHSProbe:       "HSProbe",
	MsgHSReply:       "HSReply",

	MsgPetersonFirst:  "PetersonFirst",
	MsgPetersonSecond: "PetersonSecond",
	MsgPetersonWinner: "PetersonWinner",
	MsgRingAck:        "RingAck",
}

// RingAckRequest, in the Context of a ring election message, asks its
// receiver to answer with MsgRingAck. A receiver of an older version
// ignores it and answers nothing.
const RingAckRequest uint64 = 1

// Valid reports whether k is a known kind other than MsgInvalid.
func (k MessageKind) Valid() bool { return k > MsgInvalid && k < msgKindEnd }

// String returns the kind's name.
func (k MessageKind) String() string {
	if k < msgKindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// AllKinds returns every valid kind, in wire order.
func AllKinds() []MessageKind {
	out := make([]MessageKind, 0, msgKindEnd-1)
	for k := MsgInvalid + 1; k < msgKindEnd; k++ {
		out = append(out, k)
	}
	return out
}

// Direction is the way a ring message travels.
type Direction uint8

// Ring directions: clockwise goes to the next higher id (wrapping).
const (
	Clockwise Direction = iota
	CounterClockwise
)

// Message is the one message type of every protocol. Fields a kind does not
// use stay zero, which keeps the encoding small.
type Message struct {
	Kind MessageKind
	From ID
	To   ID
	// Election names the election a message belongs to when an agent runs
	// several; "" is the election named "default". The protocols never
	// read or set it: the core stamps what it sends and routes what it
	// receives by it.
	Election string
	// Term is the sender's term (majority) — the epoch it campaigns or
	// leads in.
	Term uint64
	// Epoch is the fencing epoch a bully or ring message refers to.
	Epoch uint64
	// Reject is a negative answer (vote responses).
	Reject bool
	// Leader is the leader a message announces or the rejecter believes in.
	Leader ID
	// Candidate is the id a ring election message carries.
	Candidate ID
	// Phase and Hops are a Hirschberg-Sinclair probe's phase and distance,
	// and a Peterson message's phase; every ring election message counts
	// its hops.
	Phase uint32
	Hops  uint32
	// Round is the Peterson election round a message belongs to: a node
	// taking part in one round ignores messages of older rounds and leaves
	// its round for a newer one. Zero in every other kind.
	Round uint64
	// Direction is the way a ring message travels.
	Direction Direction
	// Context is opaque to the receiver and echoed in responses (the
	// heartbeat round a response acknowledges).
	Context uint64
	// ConfigTerm, ConfigIndex and Voters are the sender's newest voter
	// configuration (majority): the leader's in heartbeats, the
	// candidate's in (pre-)vote requests, the sender's persisted one in
	// responses. An empty Voters means the sender carries none (a peer
	// from before configurations were replicated).
	ConfigTerm  uint64
	ConfigIndex uint64
	Voters      string
	// Commit is the index of the newest configuration the leader knows to
	// be committed (majority heartbeats).
	Commit uint64
	// Ineligible and Priority are the sender's Candidacy (majority): how a
	// leader learns which voters may take over. Zero — eligible, priority
	// 0 — is what a peer of an older version sends.
	Ineligible bool
	Priority   uint8
}

// Candidacy returns the sender's candidacy m carries.
func (m Message) Candidacy() Candidacy {
	return Candidacy{Ineligible: m.Ineligible, Priority: m.Priority}
}

// Config returns the configuration m carries.
func (m Message) Config() Configuration {
	return Configuration{Term: m.ConfigTerm, Index: m.ConfigIndex, Voters: m.Voters}
}

// String renders m compactly for traces and golden files.
func (m Message) String() string {
	s := fmt.Sprintf("%d->%d %s", m.From, m.To, m.Kind)
	if m.Election != "" {
		s = m.Election + ": " + s
	}
	if m.Term != 0 {
		s += fmt.Sprintf(" term=%d", m.Term)
	}
	if m.Epoch != 0 {
		s += fmt.Sprintf(" epoch=%d", m.Epoch)
	}
	if m.Reject {
		s += " reject"
	}
	if m.Leader != None {
		s += fmt.Sprintf(" leader=%d", m.Leader)
	}
	if m.Candidate != None {
		s += fmt.Sprintf(" cand=%d", m.Candidate)
	}
	if m.Phase != 0 || m.Hops != 0 {
		s += fmt.Sprintf(" phase=%d hops=%d", m.Phase, m.Hops)
	}
	if m.Round != 0 {
		s += fmt.Sprintf(" round=%d", m.Round)
	}
	if m.Direction != Clockwise {
		s += " ccw"
	}
	if m.Context != 0 {
		s += fmt.Sprintf(" ctx=%d", m.Context)
	}
	if m.Voters != "" || m.ConfigIndex != 0 || m.ConfigTerm != 0 {
		s += " cfg=" + m.Config().String()
	}
	if m.Commit != 0 {
		s += fmt.Sprintf(" commit=%d", m.Commit)
	}
	if m.Ineligible {
		s += " ineligible"
	}
	if m.Priority != 0 {
		s += fmt.Sprintf(" prio=%d", m.Priority)
	}
	return s
}
