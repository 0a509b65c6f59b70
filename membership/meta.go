package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/hashicorp/memberlist"
)

// ProtocolVersion is the version of conclave's peer protocol this build
// speaks. It travels in node metadata so peers can tell old agents apart.
// Version 2 runs named elections (core.NamedElectionsVersion); agents up
// to v0.1.0 publish 1.
const ProtocolVersion uint16 = 2

// MaxMetaSize is the largest node metadata memberlist accepts. Memberlist
// panics above it, so encodeMeta refuses instead.
const MaxMetaSize = memberlist.MetaMaxSize

// ErrMetaTooLarge is wrapped by the error Start returns when this node's
// metadata (mostly the libp2p peer id and multiaddr) exceeds MaxMetaSize.
var ErrMetaTooLarge = errors.New("node metadata too large")

// errBadMeta is wrapped by every error decodeMeta returns.
var errBadMeta = errors.New("bad node metadata")

// Metadata layout, version 1:
//
//	byte    format version (1)
//	byte    flags: bit 0 = voter, bit 1 = leaving
//	uvarint id
//	uvarint protocol version
//	uvarint len, bytes  libp2p peer id
//	uvarint len, bytes  libp2p multiaddr
//	uvarint len, bytes  settings digest (absent from older agents; written,
//	                    maybe empty, whenever a later field is)
//	uvarint len, bytes  the node's published map (node.meta, a JSON
//	                    object; opaque here), only when not empty or a
//	                    later field is written
//	uvarint priority    node.priority (0–255), only when not 0 or a later
//	                    field is written; absent from older agents, whose
//	                    priority is then 0
//	uvarint len, bytes  the settings digest's extension (SetDigest's ext:
//	                    settings compared key by key), only when not
//	                    empty or a later field is written; absent from
//	                    older agents
//	uvarint len, bytes  per-election priorities: "NAME=P,NAME=P" in name
//	                    order, the named elections whose priority differs
//	                    from node.priority; only when not empty or a later
//	                    field is written, absent from older agents
//	uvarint elections   the named elections the node runs, as a bitmap
//	                    (ElectionsBitmap); only when it runs any, absent
//	                    from older agents (which run none, or did not say)
//
// ONLY APPEND fields: a decoder reads the fields it knows and ignores the
// rest, so newer agents can add fields that older ones skip.
const (
	metaFormat = 1
	// Bit 0 is retired: agents up to v0.1.0 set it when their own
	// election.voters named them. It went stale after a runtime voter
	// change and nothing decided on it (majority's replicated
	// configuration says who votes), so it is neither set nor read; do
	// not reuse it while such agents may still be around.

	// metaFlagLeaving is set by a node about to leave gracefully. Memberlist
	// tells its event delegate that a node is gone without saying whether
	// it left or failed (the node's State field it passes is never
	// updated), so the node's last metadata carries the intent.
	metaFlagLeaving = 1 << 1
)

// nodeMeta is what a node publishes about itself.
type nodeMeta struct {
	ID       protocols.ID
	Leaving  bool
	Version  uint16
	PeerID   string
	PeerAddr string
	// Digest is what must agree cluster-wide (SetDigest); opaque here.
	Digest string
	// User is node.meta, encoded by the agent; "" for none.
	User string
	// Priority is node.priority: bully and ring rank members by
	// (priority, id), and must know it before they hear from a member.
	Priority uint8
	// DigestExt is the settings digest's extension (SetDigest); opaque
	// here.
	DigestExt string
	// Priorities is the per-election priorities field, in its encoded
	// form (EncodeElectionPriorities).
	Priorities string
	// Elections is the bitmap of the named elections the node runs
	// (ElectionsBitmap); 0 when it does not say.
	Elections uint64
}

// electionsKnown is set in every bitmap a node publishes, so that a node
// running no named election says so (a bitmap of that bit alone) rather
// than saying nothing.
const electionsKnown = 1 << 63

// ElectionsBitmap folds the names of the named elections a node runs into
// the bitmap its metadata publishes: one of 63 bits per name (an FNV-1a
// hash), so two names may share a bit. A member whose bitmap lacks an
// election's bit does not run it; one whose bit is set probably does.
func ElectionsBitmap(names []string) uint64 {
	b := uint64(electionsKnown)
	for _, name := range names {
		b |= electionBit(name)
	}
	return b
}

func electionBit(name string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return 1 << (h.Sum32() % 63)
}

// MaxElectionPrioritiesLen bounds the per-election priorities a node
// publishes: with the other fields at their usual sizes the metadata
// still fits MaxMetaSize; Start refuses a node whose metadata does not.
const MaxElectionPrioritiesLen = 200

// EncodeElectionPriorities encodes per-election priorities as node
// metadata carries them, in name order. Names must not hold '=' or ','
// (election names never do).
func EncodeElectionPriorities(p map[string]uint8) (string, error) {
	names := make([]string, 0, len(p))
	for name := range p {
		if name == "" || strings.ContainsAny(name, "=,") {
			return "", fmt.Errorf("election name %q cannot be published with a priority", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", name, p[name])
	}
	if b.Len() > MaxElectionPrioritiesLen {
		return "", fmt.Errorf("%w: per-election priorities take %d bytes, at most %d: set node.priority to the most common one, or shorten the elections' names", ErrMetaTooLarge, b.Len(), MaxElectionPrioritiesLen)
	}
	return b.String(), nil
}

// electionPriority finds election's priority in an encoded
// per-election priorities field.
func electionPriority(enc, election string) (uint8, bool) {
	for enc != "" {
		var item string
		item, enc, _ = strings.Cut(enc, ",")
		name, v, ok := strings.Cut(item, "=")
		if !ok || name != election {
			continue
		}
		p, err := strconv.ParseUint(v, 10, 8)
		return uint8(p), err == nil
	}
	return 0, false
}

// validElectionPriorities reports whether enc is a well-formed
// per-election priorities field.
func validElectionPriorities(enc string) bool {
	if len(enc) > MaxElectionPrioritiesLen {
		return false
	}
	for enc != "" {
		var item string
		item, enc, _ = strings.Cut(enc, ",")
		name, v, ok := strings.Cut(item, "=")
		if !ok || name == "" {
			return false
		}
		if _, err := strconv.ParseUint(v, 10, 8); err != nil {
			return false
		}
	}
	return true
}

// MaxDigestLen bounds the settings digest a node publishes, so that with
// the longest peer id and address the metadata still fits MaxMetaSize.
const MaxDigestLen = 100

// MaxDigestExtLen bounds the settings digest's extension. With it the
// metadata still fits MaxMetaSize beside the longest digest, node.meta,
// priority, an IPv6 peer address and a node id below 2^28; when it does
// not (a larger id), SetDigest publishes the digest without it.
const MaxDigestExtLen = 24

func encodeMeta(m nodeMeta) ([]byte, error) {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+len(m.PeerID)+len(m.PeerAddr))
	var flags byte
	if m.Leaving {
		flags |= metaFlagLeaving
	}
	b = append(b, metaFormat, flags)
	b = binary.AppendUvarint(b, uint64(m.ID))
	b = binary.AppendUvarint(b, uint64(m.Version))
	b = binary.AppendUvarint(b, uint64(len(m.PeerID)))
	b = append(b, m.PeerID...)
	b = binary.AppendUvarint(b, uint64(len(m.PeerAddr)))
	b = append(b, m.PeerAddr...)
	if len(m.DigestExt) > MaxDigestExtLen {
		return nil, fmt.Errorf("%w: settings digest extension of %d bytes, at most %d", ErrMetaTooLarge, len(m.DigestExt), MaxDigestExtLen)
	}
	if !validElectionPriorities(m.Priorities) {
		return nil, fmt.Errorf("%w: per-election priorities %q are malformed or longer than %d bytes", ErrMetaTooLarge, m.Priorities, MaxElectionPrioritiesLen)
	}
	ext := m.DigestExt != "" || m.Priorities != "" || m.Elections != 0
	if m.Digest != "" || m.User != "" || m.Priority != 0 || ext {
		if len(m.Digest) > MaxDigestLen {
			return nil, fmt.Errorf("%w: settings digest of %d bytes, at most %d", ErrMetaTooLarge, len(m.Digest), MaxDigestLen)
		}
		b = binary.AppendUvarint(b, uint64(len(m.Digest)))
		b = append(b, m.Digest...)
	}
	if m.User != "" || m.Priority != 0 || ext {
		b = binary.AppendUvarint(b, uint64(len(m.User)))
		b = append(b, m.User...)
	}
	if m.Priority != 0 || ext {
		b = binary.AppendUvarint(b, uint64(m.Priority))
	}
	if ext {
		b = binary.AppendUvarint(b, uint64(len(m.DigestExt)))
		b = append(b, m.DigestExt...)
	}
	if m.Priorities != "" || m.Elections != 0 {
		b = binary.AppendUvarint(b, uint64(len(m.Priorities)))
		b = append(b, m.Priorities...)
	}
	if m.Elections != 0 {
		b = binary.AppendUvarint(b, m.Elections)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, memberlist allows %d (peer id %d bytes, peer address %d bytes)",
			ErrMetaTooLarge, len(b), MaxMetaSize, len(m.PeerID), len(m.PeerAddr))
	}
	return b, nil
}

// decodeMeta parses a peer's metadata. It never panics and never allocates
// more than the input's size: every length is checked against what remains.
func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) > MaxMetaSize {
		return m, fmt.Errorf("%w: %d bytes, limit %d", errBadMeta, len(b), MaxMetaSize)
	}
	if len(b) < 2 {
		return m, fmt.Errorf("%w: %d bytes, too short", errBadMeta, len(b))
	}
	if b[0] < metaFormat {
		return m, fmt.Errorf("%w: unknown format %d", errBadMeta, b[0])
	}
	m.Leaving = b[1]&metaFlagLeaving != 0
	r := metaReader{b: b[2:]}
	m.ID = protocols.ID(r.uvarint("id"))
	v := r.uvarint("version")
	if r.err == nil && v > 0xffff {
		r.err = fmt.Errorf("version %d out of range", v)
	}
	m.Version = uint16(v)
	m.PeerID = r.str("peer id")
	m.PeerAddr = r.str("peer address")
	if r.err == nil && len(r.b) > 0 {
		// Both are absent from older agents. They are optional and
		// never steer an election alone, so a field that does not parse
		// is left out, like an unknown trailing field, rather than making
		// the member unusable.
		d := metaReader{b: r.b}
		if s := d.str("settings digest"); d.err == nil && len(s) <= MaxDigestLen {
			m.Digest = s
			if len(d.b) > 0 {
				u := metaReader{b: d.b}
				if s := u.str("user meta"); u.err == nil {
					m.User = s
					if len(u.b) > 0 {
						// Priority 0 when it does not parse or is out of
						// range, as from an agent that publishes none.
						p := metaReader{b: u.b}
						if v := p.uvarint("priority"); p.err == nil && v <= 0xff {
							m.Priority = uint8(v)
							if len(p.b) > 0 {
								// Absent (older agents) or unreadable:
								// nothing is compared.
								x := metaReader{b: p.b}
								if s := x.str("settings digest extension"); x.err == nil && len(s) <= MaxDigestExtLen {
									m.DigestExt = s
									if len(x.b) > 0 {
										// Unreadable: the member ranks
										// by node.priority everywhere.
										e := metaReader{b: x.b}
										if s := e.str("election priorities"); e.err == nil && validElectionPriorities(s) {
											m.Priorities = s
											if len(e.b) > 0 {
												// Unreadable: as from an
												// agent that does not say.
												if v := e.uvarint("elections"); e.err == nil && v&electionsKnown != 0 {
													m.Elections = v
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if r.err != nil {
		return nodeMeta{}, fmt.Errorf("%w: %w", errBadMeta, r.err)
	}
	if m.ID == protocols.None {
		return nodeMeta{}, fmt.Errorf("%w: id is 0", errBadMeta)
	}
	return m, nil
}

type metaReader struct {
	b   []byte
	err error
}

func (r *metaReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%s: truncated or overlong varint", field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) str(field string) string {
	n := r.uvarint(field + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%s: length %d exceeds the %d bytes left", field, n, len(r.b))
		return ""
	}
	s := r.b[:n]
	r.b = r.b[n:]
	if !utf8.Valid(s) {
		r.err = fmt.Errorf("%s: not valid UTF-8", field)
		return ""
	}
	return string(s)
}

// unreadable handles a member whose metadata does not decode. A member we
// cannot identify cannot take part in elections: a new one stays out of the
// list rather than entering with a made-up id, and a known one — whose
// metadata stopped decoding, or whose departure arrives with unreadable
// metadata — is reported dead, not left "alive" for ever. It comes back with
// its next readable update. The warning is rate-limited: the metadata
// travels in every gossip round.
func (m *Membership) unreadable(n *memberlist.Node, err error) {
	m.mu.Lock()
	prev, known := m.members[n.Name]
	usable := known && prev.State != StateDead && prev.State != StateLeft
	if usable {
		prev.State = StateDead
		m.members[n.Name] = prev
	}
	m.mu.Unlock()
	problemLines.Add(1)
	if ok, suppressed := remoteLogs.Load().Allow("unreadable metadata "+n.Name, time.Now()); ok {
		what := "ignoring a member whose metadata cannot be read"
		if known {
			what = "a member's metadata cannot be read: treating it as down until it can"
		}
		m.log.Warn(what, zap.String("member", n.Name), zap.String("addr", n.Address()), zap.Error(err),
			zap.Uint64("suppressed_since_last", suppressed))
	}
	if usable {
		m.events.push(Event{Kind: EventDead, Member: prev})
	}
}
