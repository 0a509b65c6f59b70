package agent

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/membership"
	"github.com/conclave-agent/conclave/transport"
)

// versionsSeen is the in-memory transport, remembering what the agent
// tells it of each peer's protocol version.
type versionsSeen struct {
	*transport.MemTransport
	mu   sync.Mutex
	seen map[string]uint16
}

func (v *versionsSeen) SetPeerVersion(peerID string, version uint16) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen[peerID] = version
}

func (v *versionsSeen) version(peerID string) (uint16, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ver, ok := v.seen[peerID]
	return ver, ok
}

// The agent hands each member's peer protocol version from gossip to the
// transport, which dials v0.1.0 agents of a keyed cluster under pnet:
// without it the first dial to one would go in the clear and fail.
func TestMemberVersionsReachTheTransport(t *testing.T) {
	gossip := membership.NewMemNetwork()
	wire := transport.NewMemNetwork()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.Node = config.Node{Name: "n1", ID: 1, DataDir: filepath.Join(dir, "n1")}
	cfg.Election.Voters = []string{"n1", "n2", "n3"}
	cfg.API.Socket = filepath.Join(dir, "n1", "agent.sock")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	self, err := gossip.Join(membership.Member{Name: "n1", ID: 1, PeerID: transport.MemPeerID(1), Version: membership.ProtocolVersion}, 64)
	if err != nil {
		t.Fatal(err)
	}
	tr := &versionsSeen{MemTransport: wire.Node(1, 64), seen: map[string]uint16{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := New(ctx, cfg, Options{Transport: tr, Cluster: self})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	old, tree := transport.MemPeerID(2), transport.MemPeerID(3)
	for _, m := range []membership.Member{
		{Name: "n2", ID: 2, PeerID: old, PeerAddr: "/mem/2", Version: transport.LegacyPnetVersion},
		{Name: "n3", ID: 3, PeerID: tree, PeerAddr: "/mem/3", Version: membership.ProtocolVersion},
	} {
		n, err := gossip.Join(m, 64)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Shutdown()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		vOld, okOld := tr.version(old)
		vTree, okTree := tr.version(tree)
		if okOld && okTree {
			if vOld != transport.LegacyPnetVersion || vTree != membership.ProtocolVersion {
				t.Fatalf("the transport was told version %d for the v0.1.0 member and %d for the tree's, want %d and %d",
					vOld, vTree, transport.LegacyPnetVersion, membership.ProtocolVersion)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transport was not told every member's version: %v", tr.seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
