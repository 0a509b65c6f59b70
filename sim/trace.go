package sim

import (
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

type recKind uint8

const (
	recDeliver recKind = iota // msg stepped into node
	recTick                   // node ticked
	recSend                   // msg put on the network (a = copies)
	recDrop                   // msg lost (a = dropReason)
	recQueue                  // msg buffered for a paused node
	recStepErr                // Step returned err
	recPersist                // HardState persisted (a, b, c = term, vote, epoch)
	recSoft                   // SoftState announced (a, b, c = role, leader, epoch)
	recFault                  // fault injected (a = kind, b = target or -1)
	recUndo                   // fault undone (a = kind, b = target or -1)
	recHeal                   // all faults healed
	recInput                  // membership input (a = inputKind, b = peer)
	recWrite                  // fenced write (a = epoch, b = accepted)
	recLeader                 // checker saw a new leader (a = epoch)
	recLive                   // liveness reached (a = epoch)
)

const (
	dropRandom    = iota // the network lost it
	dropPartition        // the link is cut
	dropCrashed          // destination crashed (or restarted) meanwhile
	dropBadDest          // no such node
	// Core mode (coremode.go).
	dropNoPeer      // the sender's transport has no peer for To
	dropStalePeer   // the peer's id is not the destination's current one
	dropUnknownPeer // the receiver's transport has not admitted the sender
	dropGossip      // a gossip message lost to a crash or pause
	dropElection    // the receiver runs no election by the message's name
)

var dropNames = [...]string{"random", "partition", "crashed", "bad-destination",
	"no-peer", "stale-peer-id", "unknown-sender", "gossip-lost", "no-such-election"}

const (
	inputUp = iota
	inputDown
	inputSuspect
	inputUnsuspect
	// Core mode: a transport peer change (c = removed), a gossip delivery,
	// a membership event (c = membership.State).
	inputPeer
	inputGossip
	inputMember
	// A join that taught something (b = the node joined, c = how many
	// addresses the two learned; rejoin.go).
	inputJoin
	// An address heard of in gossip (b = the member, c = from whom).
	inputHeard
)

var inputNames = [...]string{"MemberUp", "MemberDown", "Suspect", "Unsuspect", "Peer", "Gossiped", "Member", "Join", "Heard"}

// traceRec is one line of a run's trace, kept unformatted: formatting only
// happens when a trace is printed.
type traceRec struct {
	at      time.Duration
	kind    recKind
	node    int32
	a, b, c uint64
	local   protocols.Time
	msg     protocols.Message
	err     error
	// el names the named election the record is about ("" for the
	// default one or none).
	el string
}

func (r *traceRec) String() string {
	prefix := fmt.Sprintf("%12.6fs", r.at.Seconds())
	node := fmt.Sprintf("n%d", r.node+1)
	if r.el != "" {
		prefix += " [" + r.el + "]"
	}
	switch r.kind {
	case recDeliver:
		return fmt.Sprintf("%s %-3s recv  %s", prefix, node, r.msg)
	case recTick:
		return fmt.Sprintf("%s %-3s tick  local=%d", prefix, node, r.local)
	case recSend:
		s := fmt.Sprintf("%s %-3s send  %s", prefix, node, r.msg)
		if r.a > 1 {
			s += " (duplicated)"
		}
		return s
	case recDrop:
		return fmt.Sprintf("%s %-3s drop  %s (%s)", prefix, node, r.msg, dropNames[r.a])
	case recQueue:
		return fmt.Sprintf("%s %-3s queue %s (paused)", prefix, node, r.msg)
	case recStepErr:
		return fmt.Sprintf("%s %-3s step error on %s: %v", prefix, node, r.msg, r.err)
	case recPersist:
		return fmt.Sprintf("%s %-3s persist term=%d vote=%d epoch=%d", prefix, node, r.a, r.b, r.c)
	case recSoft:
		return fmt.Sprintf("%s %-3s soft  role=%s leader=%d epoch=%d", prefix, node, protocols.Role(r.a), r.b, r.c)
	case recFault, recUndo:
		verb := "FAULT"
		if r.kind == recUndo {
			verb = "UNDO "
		}
		s := fmt.Sprintf("%s %s %s", prefix, verb, FaultKind(r.a))
		if int64(r.b) >= 0 {
			s += fmt.Sprintf(" n%d", r.b+1)
		}
		if FaultKind(r.a) == FaultPoison {
			s += fmt.Sprintf(" value=%d", r.c)
		}
		if FaultKind(r.a) == FaultSeedSplit && r.kind == recFault {
			s += fmt.Sprintf(" (the seed; n%d and n%d join it)", r.c>>8+1, r.c&0xff+1)
		}
		if FaultKind(r.a) == FaultSession && r.kind == recFault {
			s += " " + sessionOps[r.c]
		}
		return s
	case recHeal:
		return prefix + " HEAL  all faults removed"
	case recInput:
		switch r.a {
		case inputPeer:
			return fmt.Sprintf("%s %-3s peer  id %d removed=%d", prefix, node, r.b, r.c)
		case inputGossip:
			return fmt.Sprintf("%s %-3s gossiped announcement #%d", prefix, node, r.b)
		case inputMember:
			return fmt.Sprintf("%s %-3s member n%d %s", prefix, node, r.b+1, membership.State(r.c))
		case inputHeard:
			return fmt.Sprintf("%s %-3s heard of n%d from n%d", prefix, node, r.b+1, r.c+1)
		case inputJoin:
			return fmt.Sprintf("%s %-3s join  n%d: %d addresses learned", prefix, node, r.b+1, r.c)
		}
		return fmt.Sprintf("%s %-3s input %s n%d", prefix, node, inputNames[r.a], r.b+1)
	case recWrite:
		res := "rejected"
		if r.b != 0 {
			res = "accepted"
		}
		return fmt.Sprintf("%s %-3s fenced write epoch=%d %s", prefix, node, r.a, res)
	case recLeader:
		return fmt.Sprintf("%s %-3s LEADER epoch=%d", prefix, node, r.a)
	case recLive:
		return fmt.Sprintf("%s %-3s LIVE  every node follows it in epoch %d", prefix, node, r.a)
	}
	return fmt.Sprintf("%s %-3s record(%d)", prefix, node, r.kind)
}

// traceRing keeps the last len(buf) records and a running hash of all.
type traceRing struct {
	buf  []traceRec
	next int
	n    int
	hash uint64
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (t *traceRing) mix(v uint64) {
	// FNV-1a over 64-bit words: cheap, deterministic, good enough to tell
	// two traces apart.
	t.hash ^= v
	t.hash *= fnvPrime
}

func (t *traceRing) add(r traceRec) {
	t.mix(uint64(r.at))
	t.mix(uint64(r.kind)<<32 | uint64(uint32(r.node)))
	t.mix(r.a)
	t.mix(r.b)
	t.mix(r.c)
	t.mix(uint64(r.local))
	m := &r.msg
	t.mix(uint64(m.Kind) | uint64(m.Direction)<<8 | uint64(m.Phase)<<16)
	if m.Reject {
		t.mix(1)
	}
	t.mix(uint64(m.From)<<32 ^ uint64(m.To))
	t.mix(m.Term)
	t.mix(m.Epoch)
	t.mix(uint64(m.Leader)<<32 ^ uint64(m.Candidate) ^ uint64(m.Hops)<<48)
	t.mix(m.Context)
	// Mixed only when set, so that runs of the default election alone
	// keep the hashes they had before named elections.
	for _, c := range []byte(r.el) {
		t.mix(uint64(c))
	}
	if r.err != nil {
		for _, c := range []byte(r.err.Error()) {
			t.mix(uint64(c))
		}
	}
	t.buf[t.next] = r
	t.next = (t.next + 1) % len(t.buf)
	t.n++
}

// lines returns the kept records, oldest first.
func (t *traceRing) lines() []string {
	k := min(t.n, len(t.buf))
	out := make([]string, 0, k)
	start := (t.next - k + len(t.buf)) % len(t.buf)
	for i := range k {
		out = append(out, t.buf[(start+i)%len(t.buf)].String())
	}
	return out
}
