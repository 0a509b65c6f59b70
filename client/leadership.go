package client

import (
	"time"

	"github.com/conclave-agent/conclave/api"
)

// Defaults of Leadership's zero fields.
const (
	// DefaultStaleAfter is how long an answer vouches for leadership when
	// there is no lease to go by (bully and ring).
	DefaultStaleAfter = time.Second
	// DefaultLeaseMargin is how long before the lease runs out leadership
	// counts as over, so that a process stopping its work then does so
	// while no other node can lead yet, even when it wakes a little late.
	DefaultLeaseMargin = 25 * time.Millisecond
)

// Leadership answers the question every process that acts as the leader
// must ask: "do I lead now, given the lease and how fresh my answer is?"
// Feed it every answer from the agent — Polled for the answer to a request
// (Status), Watched for a Watch event, Lost when contact fails — and ask
// Leads before acting; Deadline says when the answer may turn to false
// without any new input, so a process can sleep until then.
//
// Only a polled answer can start leadership: the lease counts from the time
// the request was sent, an instant known to come before the agent computed
// the answer, whereas a watch event may have waited in the socket for any
// time. Any answer can end it at once. Answers are ordered by the agent's
// Seq: one computed before a change already seen never undoes it.
//
// The zero Leadership works, with the defaults. It is not safe for
// concurrent use.
type Leadership struct {
	// StaleAfter: with no fresh polled answer for this long, contact with
	// the agent counts as lost. Zero means DefaultStaleAfter.
	StaleAfter time.Duration
	// LeaseMargin: leadership ends this long before the lease runs out.
	// Zero means DefaultLeaseMargin.
	LeaseMargin time.Duration

	st  api.Status
	err error // contact lost, since the last answer
	// lostAt is when contact was last lost: an answer to a request sent
	// before then cannot restore it.
	lostAt time.Time
	// leaseEpoch is the epoch the last poll saw this node lead; leaseUntil
	// when that lease runs out, less the margin (zero: no lease, bully and
	// ring), and freshUntil when the poll is too old to vouch for anything.
	leaseEpoch             uint64
	leaseUntil, freshUntil time.Time
}

// Polled records the agent's answer st to a request sent at sent (read the
// clock before sending, never after the answer).
func (l *Leadership) Polled(st api.Status, sent time.Time) {
	if l.err != nil && sent.Before(l.lostAt) {
		// Asked before contact was lost, answered after: the loss is
		// newer news (the agent may have died since it answered).
		return
	}
	if !l.merge(st) || st.Role != api.RoleLeader {
		return
	}
	stale, margin := l.StaleAfter, l.LeaseMargin
	if stale <= 0 {
		stale = DefaultStaleAfter
	}
	if margin <= 0 {
		margin = DefaultLeaseMargin
	}
	l.leaseEpoch = st.Epoch
	l.freshUntil = sent.Add(stale)
	l.leaseUntil = time.Time{}
	if lease := st.Lease(); lease > 0 {
		// A lease shorter than the margin still counts as a lease, just
		// one already over.
		l.leaseUntil = sent.Add(max(lease-margin, time.Nanosecond))
	}
}

// Watched records st, an event of a Watch stream. It can end leadership at
// once but not start it.
func (l *Leadership) Watched(st api.Status) { l.merge(st) }

// Lost records that contact with the agent failed with err at at (when the
// failed request was sent, or when the broken stream was read): leadership
// is over until a polled answer to a request sent after at. The agent may
// be gone or restarting, and a new agent process counts Seq anew.
func (l *Leadership) Lost(err error, at time.Time) {
	l.err, l.st.Seq, l.lostAt = err, 0, at
}

// merge takes st unless it is older than the newest answer seen.
func (l *Leadership) merge(st api.Status) bool {
	if st.Seq < l.st.Seq {
		return false
	}
	l.st, l.err = st, nil
	return true
}

// Leads reports whether the answers so far vouch for this node's
// leadership at now: contact holds, the newest answer says it leads in the
// epoch the last poll saw it lead, that poll is fresh and its lease (when
// the protocol has one) has not run out.
func (l *Leadership) Leads(now time.Time) bool {
	if l.err != nil || l.st.Role != api.RoleLeader || l.st.Epoch != l.leaseEpoch || !now.Before(l.freshUntil) {
		return false
	}
	return l.leaseUntil.IsZero() || now.Before(l.leaseUntil)
}

// Deadline is when Leads may turn false without any new answer: the end of
// the lease less the margin, or when the last poll goes stale.
func (l *Leadership) Deadline() time.Time {
	if !l.leaseUntil.IsZero() && l.leaseUntil.Before(l.freshUntil) {
		return l.leaseUntil
	}
	return l.freshUntil
}

// Status returns the newest answer recorded.
func (l *Leadership) Status() api.Status { return l.st }

// Err returns why contact was lost, or nil since the last answer.
func (l *Leadership) Err() error { return l.err }
