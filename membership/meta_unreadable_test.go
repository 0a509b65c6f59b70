package membership

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A member whose metadata stops decoding used to stay "alive" for ever
// (record ignored it). It must be reported dead, with a warning, and come
// back with its next readable metadata.
func TestUnreadableMetadataMakesMemberUnusable(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	m := &Membership{log: zap.New(core), events: newEventQueue(16), members: map[string]Member{}}
	defer m.events.close()
	good, err := encodeMeta(nodeMeta{ID: 7, Version: ProtocolVersion, PeerID: "p", PeerAddr: "/ip4/127.0.0.1/tcp/1"})
	if err != nil {
		t.Fatal(err)
	}
	node := func(meta []byte) *memberlist.Node {
		return &memberlist.Node{Name: "n7", Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: meta}
	}
	next := func() Event {
		t.Helper()
		select {
		case ev := <-m.Events():
			return ev
		case <-time.After(waitLimit):
			t.Fatal("no event")
		}
		return Event{}
	}
	m.record(EventAlive, node(good), StateAlive)
	if ev := next(); ev.Kind != EventAlive || ev.Member.ID != 7 {
		t.Fatalf("first event %+v", ev)
	}
	m.record(EventUpdate, node([]byte{1}), StateAlive)
	if ev := next(); ev.Kind != EventDead || ev.Member.Name != "n7" {
		t.Fatalf("after unreadable metadata: event %+v, want n7 dead", ev)
	}
	if mb := m.members["n7"]; mb.State != StateDead {
		t.Fatalf("n7 is %v, want dead", mb.State)
	}
	if logs.FilterMessageSnippet("treating it as down").Len() != 1 {
		t.Fatalf("no warning that says so: %v", logs.All())
	}
	m.record(EventUpdate, node(good), StateAlive)
	if ev := next(); ev.Kind != EventUpdate || ev.Member.State != StateAlive {
		t.Fatalf("after readable metadata again: event %+v, want n7 alive", ev)
	}
}
