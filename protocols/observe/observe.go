// Package observe is the observers' slow path: how members that do not vote
// learn who leads without the leader heartbeating each of them.
//
// A leader heartbeats its voters (and candidates) at the heartbeat rate;
// they need that for the failure detector, the lease and quick failover.
// An observer only needs to know the leader and its epoch. Heartbeating
// every observer twenty times a second makes the leader's cost grow with
// the fleet (22.5 % of a core for 97 observers), so instead the leader
// announces (leader, epoch, term) by gossip: at once when it starts to
// lead, then every RefreshInterval. Every member relays an announcement
// newer than what it knew, so an announcement reaches N members in
// O(log N) gossip rounds and costs every member, the leader included, the
// same small number of packets whatever N is. docs/benchmarks/analysis.md
// compares this with the other options.
//
// An observer reports what it learned and how old that is, never more: the
// age runs from the moment the leader sent the announcement (each relay
// adds the time it held it), so a dead leader's announcement grows old
// until a new leader's replaces it.
//
// Like the rest of protocols/, the package is pure: no goroutines, I/O or
// clock reads; the agent feeds it time and carries out its decisions.
package observe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

// RefreshInterval is how often a leader re-announces itself while it
// keeps leading. It bounds how old an observer's knowledge gets while the
// leader lives (plus the second or so an announcement takes to spread), and
// sets the path's cost: each announcement costs every member about
// 4·⌈log10(N+1)⌉ gossip packets sent and as many received. A new leader
// announces at once, so failover does not wait for it. At 1 s the
// observers of a 100-agent fleet spent about 0.6 % of a core, over the
// 0.5 % target; 2 s halves the gossip (docs/benchmarks/analysis.md).
const RefreshInterval = 2 * time.Second

// Magic is the first byte of an encoded announcement, which tells it from
// other messages sent by gossip.
const Magic byte = 0xA7

// MaxAge bounds the age an announcement may carry; older knowledge is
// worthless and a larger value is a corrupt or hostile message.
const MaxAge = time.Hour

// MaxElectionName bounds the election name an announcement carries (as
// config.MaxElectionName does the configured names).
const MaxElectionName = 32

// MaxEncodedLen is the largest encoding Decode accepts.
const MaxEncodedLen = 1 + 5*binary.MaxVarintLen64 + 1 + MaxElectionName

// Announcement is a leader's claim, spread by gossip: Leader leads in Epoch
// (and majority Term), and this is its Seq-th announcement of that epoch.
// Age is how old the claim was when this copy was sent.
type Announcement struct {
	Leader protocols.ID
	Epoch  uint64
	Term   uint64
	Seq    uint64
	Age    time.Duration
	// Election names the election claimed, "" for the default one. It
	// is encoded after the other fields, so that an agent from before
	// named elections refuses a named election's claim (trailing bytes)
	// instead of taking it for its default election's.
	Election string
}

// newer reports whether a is a later claim than b: a higher epoch, or the
// same epoch announced again.
func (a Announcement) newer(b Announcement) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	return a.Seq > b.Seq
}

// Append appends a's encoding to b: Magic, then Leader, Epoch, Term, Seq
// and Age in milliseconds as unsigned varints, then, for a named
// election, its name's length as an unsigned varint and the name.
func (a Announcement) Append(b []byte) []byte {
	b = append(b, Magic)
	b = binary.AppendUvarint(b, uint64(a.Leader))
	b = binary.AppendUvarint(b, a.Epoch)
	b = binary.AppendUvarint(b, a.Term)
	b = binary.AppendUvarint(b, a.Seq)
	b = binary.AppendUvarint(b, uint64(max(a.Age, 0).Milliseconds()))
	if a.Election != "" {
		b = binary.AppendUvarint(b, uint64(len(a.Election)))
		b = append(b, a.Election...)
	}
	return b
}

// validName reports whether s is an election name as configured: 1 to
// MaxElectionName bytes of [a-z0-9_-], starting with a letter.
func validName(s string) bool {
	if s == "" || len(s) > MaxElectionName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// Errors of Decode.
var (
	ErrNotAnnouncement = errors.New("observe: not an announcement")
	ErrMalformed       = errors.New("observe: malformed announcement")
)

// Decode parses an announcement encoded by Append. Anything else —
// another message, truncation, trailing bytes, no leader, an age beyond
// MaxAge — is an error.
func Decode(b []byte) (Announcement, error) {
	if len(b) == 0 || b[0] != Magic {
		return Announcement{}, ErrNotAnnouncement
	}
	if len(b) > MaxEncodedLen {
		return Announcement{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(b), MaxEncodedLen)
	}
	rest := b[1:]
	var f [5]uint64
	for i := range f {
		v, n := binary.Uvarint(rest)
		if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
			// Non-minimal encodings too: one claim, one encoding.
			return Announcement{}, fmt.Errorf("%w: field %d truncated or not minimal", ErrMalformed, i)
		}
		f[i], rest = v, rest[n:]
	}
	a := Announcement{Leader: protocols.ID(f[0]), Epoch: f[1], Term: f[2], Seq: f[3]}
	if len(rest) != 0 {
		l, n := binary.Uvarint(rest)
		if n <= 0 || n != len(binary.AppendUvarint(nil, l)) || l != uint64(len(rest)-n) {
			return Announcement{}, fmt.Errorf("%w: %d trailing bytes that are not an election name", ErrMalformed, len(rest))
		}
		name := string(rest[n:])
		if name == "default" || !validName(name) {
			return Announcement{}, fmt.Errorf("%w: election name %q", ErrMalformed, name)
		}
		a.Election = name
	}
	if a.Leader == protocols.None {
		return Announcement{}, fmt.Errorf("%w: no leader", ErrMalformed)
	}
	if f[4] > uint64(MaxAge.Milliseconds()) {
		return Announcement{}, fmt.Errorf("%w: age %d ms beyond %v", ErrMalformed, f[4], MaxAge)
	}
	a.Age = time.Duration(f[4]) * time.Millisecond
	return a, nil
}

// Knowledge is what a member learned from announcements: the newest claim
// and when, on the local clock, its leader made it.
type Knowledge struct {
	cur    Announcement
	origin protocols.Time
	ok     bool
}

// Learn takes an announcement received at now and reports whether it was
// news (a newer claim), which the caller relays. Older or repeated claims
// change nothing.
func (k *Knowledge) Learn(now protocols.Time, a Announcement) bool {
	if k.ok && !a.newer(k.cur) {
		return false
	}
	k.cur, k.origin, k.ok = a, now-protocols.Time(a.Age), true
	k.cur.Age = 0
	return true
}

// Current returns the newest claim with its Age at now, and false when
// nothing was learned yet.
func (k *Knowledge) Current(now protocols.Time) (Announcement, bool) {
	if !k.ok {
		return Announcement{}, false
	}
	a := k.cur
	a.Age = max(now.Sub(k.origin), 0)
	return a, true
}

// Origin returns when, on the local clock, the current claim was made
// (now minus its age), and false when nothing was learned yet.
func (k *Knowledge) Origin() (protocols.Time, bool) { return k.origin, k.ok }

// Announcer decides when a leader announces itself: at once when it starts
// leading (a new epoch), then every interval while it keeps leading.
type Announcer struct {
	self     protocols.ID
	interval time.Duration
	leading  bool
	cur      Announcement
	due      protocols.Time
	// last is when Due last returned an announcement.
	last protocols.Time
}

// NewAnnouncer returns the announcer of member self, re-announcing every
// interval (RefreshInterval when zero).
func NewAnnouncer(self protocols.ID, interval time.Duration) *Announcer {
	if interval <= 0 {
		interval = RefreshInterval
	}
	return &Announcer{self: self, interval: interval}
}

// Observe takes this member's protocol status at now. A member that starts
// leading, or leads in a new epoch, is due to announce at once; one that
// stops leading stops announcing.
func (an *Announcer) Observe(now protocols.Time, st protocols.Status) {
	leads := st.Role == protocols.Leader && st.Leader == an.self
	if !leads {
		an.leading = false
		return
	}
	if !an.leading || st.Epoch != an.cur.Epoch || st.Term != an.cur.Term {
		if st.Epoch != an.cur.Epoch {
			an.cur.Seq = 0
		}
		an.leading = true
		an.cur.Leader, an.cur.Epoch, an.cur.Term = an.self, st.Epoch, st.Term
		an.due = now
	}
}

// Due returns the announcement to gossip now, if one is due, and arms the
// next one an interval later.
func (an *Announcer) Due(now protocols.Time) (Announcement, bool) {
	if !an.leading || now < an.due {
		return Announcement{}, false
	}
	an.cur.Seq++
	an.last = now
	an.due = now.Add(an.interval)
	return an.cur, true
}

// Hasten brings the next announcement forward to now, or to minGap after
// the last one when that is later, so a member that appeared after this
// leader announced itself does not wait out the interval to learn of it,
// and a fleet joining at once costs at most one announcement per minGap.
func (an *Announcer) Hasten(now protocols.Time, minGap time.Duration) {
	if !an.leading {
		return
	}
	at := max(now, an.last.Add(minGap))
	if at < an.due {
		an.due = at
	}
}

// NextDeadline returns when Due will next return an announcement, and
// false while this member does not lead.
func (an *Announcer) NextDeadline() (protocols.Time, bool) { return an.due, an.leading }

// FastPath reports whether message m travels over the transport, given
// whether its addressee votes (or may become a candidate). A leader's
// heartbeats go only to voters; observers learn the leader by gossip. Every
// other message goes as the protocol asked.
func FastPath(m protocols.Message, toVoter bool) bool {
	return toVoter || m.Kind != protocols.MsgHeartbeat
}
