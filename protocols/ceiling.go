package protocols

import (
	"errors"
	"fmt"
)

// Terms (majority) and epochs (bully, ring) only ever rise, and every node
// adopts the highest one it hears of. Without a bound, one absurd value — a
// buggy build, a restore from the wrong backup, a hostile member — would be
// adopted by the whole cluster and persisted, and the next election would
// wrap the counter to zero: every later message looks stale and nobody is
// ever elected again, restarts included. The ceiling below keeps every term
// and epoch far from the wrap.
//
// The semantics, in full:
//
//   - No term or epoch ever exceeds Ceiling. A node whose next election would
//     pass it does not campaign (it stays a follower and says so), so
//     nothing wraps and nothing goes back. Reaching it takes 2^52 elections
//     after a poisoning, so in practice it is never reached.
//   - A message's value is adopted when it is at most TermSlack elections
//     above the larger of the receiver's own value and MaxAccepted: terms
//     up to max(own, MaxAccepted)+TermSlack, epochs up to TermSlack rounds
//     (TermSlack<<EpochIDBits) above max(own, MaxAccepted). Below
//     MaxAccepted anything goes, so a fresh node joins a cluster that has run
//     for years, and one pushed to MaxAccepted still has 2^52 elections of
//     room. Above it, a sender that keeps pushing gains at most TermSlack per
//     message (each one persisted by its receivers), so passing Ceiling
//     would take some 2^32 messages.
//   - The price: a node that was away while a cluster pushed past
//     MaxAccepted ran more than TermSlack (about a million) elections cannot
//     take the cluster's value and stays out; it logs and counts what it
//     drops, and rejoins once its state record is reset.
//   - Every other message is dropped and Step returns an error wrapping
//     ErrBeyondCeiling, so the driver can count and log it; the protocol's
//     state is unchanged.
//   - A persisted HardState above Ceiling is refused: New returns an error,
//     and the store refuses to load it (see store.Load).
//
// Ceiling is 2^53−1, the largest integer a JSON number (an IEEE double)
// carries exactly, so every client of the socket API reads terms and epochs
// exactly too.

// Ceiling is the largest term or epoch any node will ever hold.
const Ceiling uint64 = 1<<53 - 1

// MaxAccepted is the largest term or epoch a node adopts from a message
// whatever its own value is.
const MaxAccepted uint64 = 1 << 52

// TermSlack is how many elections above the larger of its own value and
// MaxAccepted a node accepts: terms up to that plus TermSlack, epochs up to
// TermSlack rounds (TermSlack<<EpochIDBits) above it.
const TermSlack uint64 = 1 << 20

// ErrBeyondCeiling is wrapped by the error Step returns for a message whose
// term or epoch the node refuses to adopt (see Ceiling).
var ErrBeyondCeiling = errors.New("protocols: term or epoch beyond the ceiling")

// AdmitTerm reports whether a node whose term is own may adopt term v from
// a message.
func AdmitTerm(v, own uint64) bool {
	return admit(v, own, TermSlack)
}

// AdmitEpoch reports whether a node whose highest seen epoch is own may
// adopt epoch v from a message.
func AdmitEpoch(v, own uint64) bool {
	return admit(v, own, TermSlack<<EpochIDBits)
}

func admit(v, own, slack uint64) bool {
	switch {
	case v <= own:
		return true // not news; the protocol handles stale values
	case v > Ceiling:
		return false
	}
	return v-max(own, MaxAccepted) <= slack || v <= MaxAccepted
}

// CanRaiseTerm reports whether a node at term may start an election in the
// next term without passing Ceiling.
func CanRaiseTerm(term uint64) bool { return term < Ceiling }

// CanCreateEpoch reports whether NextEpoch(seen, id) stays within Ceiling
// for every valid id.
func CanCreateEpoch(seen uint64) bool {
	return seen>>EpochIDBits < Ceiling>>EpochIDBits
}

// CheckHardState reports a persisted state that is above Ceiling. Protocols
// refuse to start from one and the store refuses to load one.
func CheckHardState(hs HardState) error {
	if hs.Term > Ceiling || hs.Epoch > Ceiling {
		return fmt.Errorf("%w: term %d, epoch %d (the ceiling is %d)", ErrBeyondCeiling, hs.Term, hs.Epoch, Ceiling)
	}
	if hs.Config.Term > hs.Term {
		return fmt.Errorf("protocols: configuration of term %d is ahead of the term %d", hs.Config.Term, hs.Term)
	}
	if hs.ConfigCommitted && hs.Config.Index == 0 {
		return fmt.Errorf("protocols: a bootstrap configuration cannot be committed")
	}
	return hs.Config.Check()
}

// BeyondCeiling returns the error Step returns for a message carrying value
// v that a node at own refuses.
func BeyondCeiling(what string, m Message, v, own uint64) error {
	return fmt.Errorf("%w: %s %d from %d (kind %v) refused at %d", ErrBeyondCeiling, what, v, m.From, m.Kind, own)
}
