package core

import (
	"slices"

	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/protocols"
)

// probeScope decides which members the transport probes. Probes keep a
// member's reachability known, which this node needs for its quorum
// health and, on a voter, for voter changes; each probed member costs a
// connection and a probe now and then. In a fleet of observers around a
// few voters, observers probing each other made N agents hold N²
// connections (docs/benchmarks/analysis.md, Fleet), for a reachability
// nothing read.
//
// The rule: in bully and ring, where every member is a candidate, every
// node probes every member; in majority every node probes the voters, and
// the leader also a member it is adding as a voter, while the change
// waits (voterchange.go). A majority voter used to probe every observer
// too, for that one check, and a voter of a fleet of 250 then held 500
// connections and 1,300 goroutines.
type probeScope struct {
	// conf is the voter configuration the current choices were made
	// from; zero for bully and ring, and before the first choice.
	conf protocols.Configuration
	set  bool
	// off are the members handed to the shell with Probe false.
	off map[protocols.ID]bool
}

// wantsProbe reports whether this node should probe the member named name
// under conf.
func (n *Node) wantsProbe(conf protocols.Configuration, name string) bool {
	if conf.IsZero() {
		return true // bully, ring: every member is a candidate
	}
	return conf.Has(name) || n.adding(name)
}

// adding reports whether a voter change waiting on this node adds the
// member named name.
func (n *Node) adding(name string) bool {
	for _, r := range n.voterReqs {
		if r.change.Add == name {
			return true
		}
	}
	return false
}

// refreshProbe hands the shell a new probe choice for the member named
// name if the one it has is no longer this node's (a voter change that
// adds it started or ended).
func (n *Node) refreshProbe(name string) {
	m, ok := n.members[name]
	if !ok || name == n.self.Name || !isLive(m) || m.PeerID == "" || n.byID[m.ID] != name {
		return
	}
	if n.wantsProbe(n.probe.conf, name) == n.probe.off[m.ID] {
		n.peers = append(n.peers, n.peerChange(m))
	}
}

// peerChange is the transport peer for a live member m, with its probe
// choice recorded.
func (n *Node) peerChange(m membership.Member) PeerChange {
	probe := n.wantsProbe(n.probe.conf, m.Name)
	if probe {
		delete(n.probe.off, m.ID)
	} else {
		if n.probe.off == nil {
			n.probe.off = make(map[protocols.ID]bool)
		}
		n.probe.off[m.ID] = true
	}
	return PeerChange{ID: m.ID, PeerID: m.PeerID, PeerAddr: m.PeerAddr, Name: m.Name, Probe: probe}
}

// checkProbeScope hands the shell new probe choices when the voter
// configuration changed: a member promoted to voter is probed by every
// observer, and this node, promoted, probes everyone. It runs after
// checkDigest, which has just read the configuration (zero for protocols
// without one): reading the protocol's status again on every input would
// add to the cost of each message.
func (n *Node) checkProbeScope() {
	conf := n.vt.digestConf
	if n.probe.set && conf == n.probe.conf {
		return
	}
	n.probe.conf, n.probe.set = conf, true
	var names []string
	for name, m := range n.members {
		if name == n.self.Name || !isLive(m) || m.PeerID == "" || n.byID[m.ID] != name {
			continue
		}
		if n.wantsProbe(conf, name) == n.probe.off[m.ID] {
			names = append(names, name)
		}
	}
	// In name order: the simulator records peer changes in its trace.
	slices.Sort(names)
	for _, name := range names {
		n.peers = append(n.peers, n.peerChange(n.members[name]))
	}
}

// forgetProbe drops the probe choice of a member no longer a peer.
func (n *Node) forgetProbe(id protocols.ID) { delete(n.probe.off, id) }
