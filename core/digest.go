package core

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/conclave-agent/conclave/protocols"
)

// The settings digest (docs/voters.md, "Disagreement is caught"): what
// must agree cluster-wide, published in gossip metadata as
//
//	SETTINGS|TERM.INDEX|VOTERS
//
// SETTINGS names the protocol and the settings whose mismatch breaks its
// guarantees (majority: the election timeout, on which the lease rests;
// ring: the algorithm); TERM.INDEX and VOTERS are the newest voter
// configuration (majority; VOTERS is "#" and a hash when the list is too
// long for the metadata budget).

// The digest's extension (membership.SetDigest's ext) holds the settings
// whose mismatch does not break the protocol's guarantees but lets one
// agent disrupt the others, as space-separated KEY=VALUE words (at most
// membership.MaxDigestExtLen bytes). A key is compared only when both
// agents publish it: an older agent publishes no extension, and a later
// one may add keys, so neither gives a mismatch where the settings both
// know agree. They are not in SETTINGS because an agent from before them
// compares SETTINGS as a whole and ignores the election messages of a
// member whose SETTINGS differ: during a rolling upgrade it would shut
// every upgraded agent out of the election.

// maxDigestVoters is the longest voter list published as is in the
// digest; a longer one is published as a hash, so the digest stays within
// membership.MaxDigestLen.
const maxDigestVoters = 48

// seenDigest is a member's digest and its extension, and this agent's
// digest, when they were last compared.
type seenDigest struct{ theirs, theirsExt, ours string }

// digestConflict is one member's disagreement with this agent.
type digestConflict struct {
	settings bool // the settings differ: its election messages are dropped
	// bootstrap: this agent is at its bootstrap configuration and the
	// member showed another list or a formed cluster; the protocol is not
	// told the member is down while it stays so (memberDown).
	bootstrap bool
	line      string // "" when there is nothing to report
	// ext reports the settings of the digest's extension that differ
	// ("" when none): reported, never a reason to drop messages.
	ext string
}

// digestExtKeys names the extension's keys: the config key each stands
// for and what a mismatch does.
var digestExtKeys = []struct{ key, setting, harm string }{
	{"pv", "election.prevote", "a voter without pre-vote raises its term while cut off and deposes a healthy leader when it comes back"},
	{"cq", "election.check_quorum", "a leader without check-quorum does not step down when it loses the majority, and the voters it still reaches refuse to elect another"},
}

// digestExt is the extension for this node's election ("" for none).
func (n *Node) digestExt() string { return traitsOf(n.cfg.Election.Protocol).ext(n.cfg.Election) }

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// showExtValue prints an extension value for people.
func showExtValue(v string) string {
	switch v {
	case "1":
		return "true"
	case "0":
		return "false"
	}
	return strconv.Quote(v)
}

// extValue returns key's value in extension ext, and whether ext has it.
// ext is bounded by membership.MaxDigestExtLen: the walk is short.
func extValue(ext, key string) (string, bool) {
	for w := range strings.FieldsSeq(ext) {
		if k, v, ok := strings.Cut(w, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// compareExt describes how member name's extension differs from ours in
// the keys both publish ("" when it does not).
func compareExt(name, ours, theirs string) string {
	if ours == theirs || ours == "" || theirs == "" {
		return ""
	}
	var diffs []string
	for _, k := range digestExtKeys {
		a, okA := extValue(ours, k.key)
		b, okB := extValue(theirs, k.key)
		if okA && okB && a != b {
			diffs = append(diffs, fmt.Sprintf("%s is %s there, %s here (%s)", k.setting, showExtValue(b), showExtValue(a), k.harm))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s runs with other election settings: %s; set them the same on every agent", name, strings.Join(diffs, "; "))
}

// digestSettings is the SETTINGS part for this node's election.
func (n *Node) digestSettings() string {
	return traitsOf(n.cfg.Election.Protocol).settings(n.cfg.Election)
}

// makeDigest builds the digest of settings and configuration c.
func makeDigest(settings string, c protocols.Configuration) string {
	if c.IsZero() {
		return settings
	}
	vs := c.Voters
	if len(vs) > maxDigestVoters {
		h := fnv.New64a()
		_, _ = h.Write([]byte(vs))
		vs = fmt.Sprintf("#%016x", h.Sum64())
	}
	return fmt.Sprintf("%s|%d.%d|%s", settings, c.Term, c.Index, vs)
}

// splitDigest returns a digest's parts; version and voters are "" when it
// carries no configuration.
func splitDigest(d string) (settings, version, voters string) {
	settings, rest, _ := strings.Cut(d, "|")
	version, voters, _ = strings.Cut(rest, "|")
	return settings, version, voters
}

// showVoters prints a digest's voter list for people.
func showVoters(v string) string {
	if strings.HasPrefix(v, "#") {
		return "a list too long to publish (hash " + v[1:] + ")"
	}
	return "[" + strings.ReplaceAll(v, ",", " ") + "]"
}

// checkDigest remakes this node's digest when the configuration changed
// (Ready.Digest hands it out) and compares every live member's with it.
// It runs after every input; the work is a string comparison per member
// unless something changed.
func (n *Node) checkDigest(now protocols.Time) {
	t := &n.vt
	if n.named() {
		// Gossip metadata has room for one digest, the default
		// election's: a named election's settings are not compared
		// (docs/elections.md says to keep them the same on every agent).
		t.published = true
		return
	}
	conf := protocols.Configuration{}
	if _, ok := n.voterChanger(); ok {
		conf = n.proto.Status(now).Config
	}
	if t.digest == "" || conf != t.digestConf {
		t.digestConf = conf
		t.digest = makeDigest(n.digestSettings(), conf)
		t.digestExt = n.digestExt()
		t.published = false
		t.membersSeen = false
		if conf.Index > 0 && len(t.heldDown) > 0 {
			n.releaseHeldDown(now)
		}
	}
	if t.membersSeen {
		return
	}
	t.membersSeen = true
	if t.seen == nil {
		t.seen = make(map[string]seenDigest)
		t.conflicts = make(map[string]digestConflict)
	}
	var changed []string // almost always empty: no allocation
	for name, m := range n.members {
		if !isLive(m) || m.Digest == "" {
			if _, ok := t.seen[name]; ok {
				delete(t.seen, name)
				delete(t.conflicts, name)
			}
			continue
		}
		if seen, ok := t.seen[name]; !ok || seen.theirs != m.Digest || seen.theirsExt != m.DigestExt || seen.ours != t.digest {
			changed = append(changed, name)
		}
	}
	// Compared in name order, not map order: a comparison may tell the
	// protocol a member is down or up, and the simulator replays a seed
	// exactly.
	slices.Sort(changed)
	for _, name := range changed {
		m := n.members[name]
		t.seen[name] = seenDigest{theirs: m.Digest, theirsExt: m.DigestExt, ours: t.digest}
		n.compareDigest(now, name, m.Digest, m.DigestExt)
	}
	for name := range t.seen {
		if _, ok := n.members[name]; !ok {
			delete(t.seen, name)
			delete(t.conflicts, name)
		}
	}
}

// compareDigest records (and logs, once per change) how member name's
// digest and its extension disagree with this node's, or forgets a
// disagreement that ended.
func (n *Node) compareDigest(now protocols.Time, name, theirs, theirsExt string) {
	t := &n.vt
	ourSet, ourVer, ourVoters := splitDigest(t.digest)
	set, ver, voters := splitDigest(theirs)
	prev, was := t.conflicts[name]
	var c digestConflict
	agree := false
	switch {
	case set != ourSet:
		c = digestConflict{settings: true, line: fmt.Sprintf("%s runs with other settings (%q; this agent %q): its election messages are ignored until they agree", name, set, ourSet)}
		n.log.Warnw("a member runs with settings that must be the same on every agent; ignoring its election messages",
			"member", name, "theirs", set, "ours", ourSet)
		if !prev.settings {
			// Out of the election altogether, not only unheard: the
			// bootstrap would otherwise wait for its answer for ever.
			if m, ok := n.members[name]; ok && n.byID[m.ID] == name {
				n.proto.MemberDown(now, m.ID)
			}
		}
	case ver != "" && ver == ourVer && voters != ourVoters && versionIndex(ver) == 0:
		c = digestConflict{bootstrap: true, line: fmt.Sprintf("%s bootstraps with voters %s, this agent with %s: fix the config files' election.voters so they agree; until one of them joins a formed cluster neither elects without the other", name, showVoters(voters), showVoters(ourVoters))}
		n.log.Warnw("a member bootstraps with another voter list; neither elects without the other until the lists agree",
			"member", name, "theirs", showVoters(voters), "ours", showVoters(ourVoters))
	case ver != "" && versionIndex(ourVer) == 0 && versionIndex(ver) > 0:
		// A formed cluster exists: this agent must join it, never form
		// another, even once that member is gone.
		c = digestConflict{bootstrap: true}
		if versionIndex(ver) > versionIndex(t.formedVer) {
			t.formedVer, t.formedVoters = ver, voters
		}
		switch {
		case digestHas(voters, n.self.Name):
		case digestHas(ourVoters, n.self.Name):
			// Started as a voter of a list the cluster never formed
			// with: a mistake to name, with the command that fixes it.
			// The line names no member, so every member showing the
			// same cluster gives one line (problems drops repeats).
			c.line = n.leftOutLine(voters, ver)
			if !was || prev.line != c.line {
				n.log.Warnw("this agent's voter list names it, but the cluster it joined leaves it out; observing, not forming another",
					"member", name, "version", ver, "theirs", showVoters(voters), "ours", showVoters(ourVoters), "fix", "agent voters add "+n.self.Name)
			}
		case !t.observerNoted:
			// A plain observer: nothing is wrong.
			t.observerNoted = true
			n.log.Infow("observing a formed cluster; this agent is not a voter ('agent voters add' on any member makes it one)",
				"voters", showVoters(voters), "version", ver)
		}
	case ver != "" && versionIndex(ver) == 0 && versionIndex(ourVer) > 0 && voters != ourVoters && !digestHas(ourVoters, name):
		c = digestConflict{line: fmt.Sprintf("%s has not joined this cluster: it holds the bootstrap list %s, not a voter of %s; add it with 'agent voters add %s' if it should vote, or fix its election.voters", name, showVoters(voters), showVoters(ourVoters), name)}
	case ver != "" && versionIndex(ourVer) > 0 && versionIndex(ver) > versionIndex(ourVer) &&
		digestHas(ourVoters, n.self.Name) && !strings.HasPrefix(voters, "#") && !digestHas(voters, n.self.Name):
		// A voter removed while it was away (or cut off as the change
		// committed) gets no more heartbeats, so nothing tells it: say so.
		// The line names no member, so every member that shows the same
		// configuration gives one line (problems drops repeats).
		c = digestConflict{line: fmt.Sprintf("the cluster is at voter configuration %s with voters %s, which leaves this agent out: it was removed from the voters (perhaps while it was away) and still holds configuration %s; to make it vote again run 'agent voters add %s' on any member, otherwise run it as an observer (election.voters without it)", ver, showVoters(voters), ourVer, n.self.Name)}
	case ver != "" && ver == ourVer && voters != ourVoters:
		c = digestConflict{line: fmt.Sprintf("%s holds voters %s at configuration %s, this agent %s: neither counts the other's vote until one of them adopts a newer configuration", name, showVoters(voters), ver, showVoters(ourVoters))}
		n.log.Warnw("a member holds another voter list at the same configuration version; votes between the two are refused",
			"member", name, "version", ver, "theirs", showVoters(voters), "ours", showVoters(ourVoters))
	default:
		agree = true
	}
	// Reported, not acted on: neither setting is needed for one leader
	// per term or for the lease, and ignoring the member would cost the
	// cluster a voter, or its quorum while half the agents have been
	// changed, for a disruption at most.
	if c.ext = compareExt(name, t.digestExt, theirsExt); c.ext != "" && c.ext != prev.ext {
		n.log.Warnw("a member runs with other election settings; set them the same on every agent",
			"member", name, "theirs", theirsExt, "ours", t.digestExt)
	}
	if prev.settings && !c.settings {
		// Back in the election, whatever else still differs.
		if m, ok := n.members[name]; ok && n.byID[m.ID] == name && isLive(m) {
			n.proto.MemberUp(now, n.protoMember(m))
		}
	}
	if agree && c.ext == "" {
		if was {
			if prev.line != "" || prev.ext != "" {
				n.log.Infow("a member agrees again", "member", name, "digest", theirs)
			}
			delete(t.conflicts, name)
		}
		return
	}
	t.conflicts[name] = c
}

// versionIndex is the index of a digest's TERM.INDEX.
func versionIndex(ver string) uint64 {
	_, idx, _ := strings.Cut(ver, ".")
	v, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// digestHas reports whether a digest's voter list names name (false for a
// hashed list: unknown).
func digestHas(voters, name string) bool {
	for v := range strings.SplitSeq(voters, ",") {
		if v == name {
			return true
		}
	}
	return false
}

func splitVersion(d string) string {
	_, v, _ := splitDigest(d)
	return v
}

// settingsConflict reports whether the member with id runs with settings
// that disagree with this node's: its election messages are dropped, so
// neither votes for nor counts the other.
func (n *Node) settingsConflict(id protocols.ID) bool {
	if len(n.vt.conflicts) == 0 {
		return false
	}
	return n.vt.conflicts[n.byID[id]].settings
}
