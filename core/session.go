package core

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// Sessions (docs/elections.md, "Candidacy held by local processes"): an
// election configured with candidacy = "session" has this agent stand
// only while a local process holds a session, as a Consul lock holds a
// session and an etcd campaign a lease. With a TTL the holder must also
// check in: a session not renewed within it ends, and with the last one
// the candidacy; a leader then hands over. That ties leadership to the
// holder's work loop, not only to its process being alive.
//
// The shell opens, renews and closes sessions for the processes it
// serves; the core decides when one ends and what candidacy follows.

// SessionPolicy is an election's candidacy mode.
type SessionPolicy struct {
	// Required: this agent is a candidate only while a session is open.
	Required bool
	// TTL, when not zero, is how long a session lives without a
	// check-in (Node.KeepSession).
	TTL time.Duration
}

// MaxSessions bounds the sessions open at once on one election: each is
// a local process's request, and a runaway client must not grow the
// core's state without end.
const MaxSessions = 64

// Session errors.
var (
	// ErrNoSessions: the election's candidacy is not held by sessions.
	ErrNoSessions = errors.New("this election's candidacy is not held by sessions (candidacy = \"always\")")
	// ErrNotCandidate: this agent can never lead the election (majority:
	// it is not a voter), so a session would hold nothing.
	ErrNotCandidate = errors.New("this agent is not a voter of the election, so it can never lead it")
	// ErrSessionEnded: the session is unknown, closed or expired.
	ErrSessionEnded = errors.New("no such session: it was closed or missed its check-in")
	// ErrTooManySessions: MaxSessions are open.
	ErrTooManySessions = fmt.Errorf("too many sessions open (at most %d)", MaxSessions)
)

// SessionEnd tells the shell that the core ended a session: its holder
// missed a check-in (Expired) or the election stopped.
type SessionEnd struct {
	ID      uint64
	Expired bool
}

type session struct {
	id       uint64
	deadline protocols.Time // zero: no TTL
}

type sessions struct {
	open  []session
	next  uint64
	ended []SessionEnd
}

// OpenSession opens a session for a local process: while one is open (and
// renewed within the TTL) this agent stands in the election. It returns
// the session's id, for KeepSession and CloseSession.
func (n *Node) OpenSession(now protocols.Time) (uint64, error) {
	defer n.settle(now)
	if !n.cfg.Session.Required {
		return 0, ErrNoSessions
	}
	// Under a protocol with replicated voters (majority) only a voter
	// can stand: a session cannot make anyone else eligible.
	if _, ok := n.voterChanger(); ok {
		if st := n.proto.Status(now); !st.Config.IsZero() && !st.Config.Has(n.self.Name) && !st.Committed.Has(n.self.Name) {
			return 0, fmt.Errorf("%w (voters: %s)", ErrNotCandidate, st.Config.Voters)
		}
	}
	if len(n.sess.open) >= MaxSessions {
		return 0, ErrTooManySessions
	}
	n.sess.next++
	s := session{id: n.sess.next}
	if ttl := n.cfg.Session.TTL; ttl > 0 {
		s.deadline = now.Add(ttl)
	}
	n.sess.open = append(n.sess.open, s)
	n.log.Infow("session opened", "session", s.id, "open", len(n.sess.open))
	n.applyCandidacy(now)
	return s.id, nil
}

// KeepSession is a holder's check-in: the session lives another TTL.
func (n *Node) KeepSession(now protocols.Time, id uint64) error {
	defer n.settle(now)
	i := n.sessionIndex(id)
	if i < 0 {
		return ErrSessionEnded
	}
	if ttl := n.cfg.Session.TTL; ttl > 0 {
		n.sess.open[i].deadline = now.Add(ttl)
	}
	return nil
}

// CloseSession ends a session at its holder's request (it exited, or
// closed its connection). Closing one already ended changes nothing.
func (n *Node) CloseSession(now protocols.Time, id uint64) {
	defer n.settle(now)
	i := n.sessionIndex(id)
	if i < 0 {
		return
	}
	n.sess.open = slices.Delete(n.sess.open, i, i+1)
	n.log.Infow("session closed", "session", id, "open", len(n.sess.open))
	n.applyCandidacy(now)
}

// Sessions returns how many sessions are open.
func (n *Node) Sessions() int { return len(n.sess.open) }

func (n *Node) sessionIndex(id uint64) int {
	return slices.IndexFunc(n.sess.open, func(s session) bool { return s.id == id })
}

// expireSessions ends the sessions whose holder missed its check-in.
func (n *Node) expireSessions(now protocols.Time) {
	if len(n.sess.open) == 0 || n.cfg.Session.TTL <= 0 {
		return
	}
	kept := n.sess.open[:0]
	expired := false
	for _, s := range n.sess.open {
		if s.deadline != 0 && now >= s.deadline {
			n.log.Warnw("session expired: its holder missed its check-in", "session", s.id, "ttl", n.cfg.Session.TTL)
			n.sess.ended = append(n.sess.ended, SessionEnd{ID: s.id, Expired: true})
			expired = true
			continue
		}
		kept = append(kept, s)
	}
	n.sess.open = kept
	if expired {
		n.applyCandidacy(now)
	}
}

// sessionDeadline is the earliest check-in due, for NextWake.
func (n *Node) sessionDeadline() (protocols.Time, bool) {
	var next protocols.Time
	ok := false
	for _, s := range n.sess.open {
		if s.deadline != 0 && (!ok || s.deadline < next) {
			next, ok = s.deadline, true
		}
	}
	return next, ok
}

// noSession reports whether the election needs a session and has none.
func (n *Node) noSession() bool { return n.cfg.Session.Required && len(n.sess.open) == 0 }
