package observe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

func at(ms int) protocols.Time { return protocols.Time(time.Duration(ms) * time.Millisecond) }

func TestAnnouncementRoundTrip(t *testing.T) {
	for _, a := range []Announcement{
		{Leader: 1, Epoch: 1, Term: 1, Seq: 1},
		{Leader: protocols.MaxEpochID, Epoch: 1<<64 - 1, Term: 1<<64 - 1, Seq: 1<<64 - 1, Age: MaxAge},
		{Leader: 3, Epoch: 7 << 20, Term: 0, Seq: 42, Age: 1500 * time.Millisecond},
	} {
		b := a.Append(nil)
		if len(b) > MaxEncodedLen {
			t.Fatalf("%+v: %d bytes, more than MaxEncodedLen", a, len(b))
		}
		got, err := Decode(b)
		if err != nil || got != a {
			t.Fatalf("Decode(Append(%+v)) = %+v, %v", a, got, err)
		}
	}
}

func TestNamedAnnouncement(t *testing.T) {
	a := Announcement{Leader: 7, Epoch: 4, Term: 4, Seq: 3, Age: 20 * time.Millisecond, Election: "reports-2"}
	b := a.Append(nil)
	got, err := Decode(b)
	if err != nil || got != a {
		t.Fatalf("Decode(Append(%+v)) = %+v, %v", a, got, err)
	}
	// An agent from before named elections stops after the age and
	// refuses what follows: cut the name off and the rest is the default
	// election's encoding, byte for byte.
	def := a
	def.Election = ""
	if enc := def.Append(nil); string(b[:len(enc)]) != string(enc) {
		t.Fatalf("a named announcement does not start with the default encoding")
	}
	for _, bad := range []string{"default", "Upper", "9lives", "a b", strings.Repeat("x", MaxElectionName+1)} {
		raw := def.Append(nil)
		raw = append(raw, byte(len(bad)))
		raw = append(raw, bad...)
		if _, err := Decode(raw); err == nil {
			t.Errorf("Decode with election %q = nil error, want refused", bad)
		}
	}
	short := append(def.Append(nil), 5, 'a', 'b')
	if _, err := Decode(short); err == nil {
		t.Error("Decode of a truncated name = nil error")
	}
}

func TestDecodeRefusesBadInput(t *testing.T) {
	good := Announcement{Leader: 2, Epoch: 5, Term: 5, Seq: 3, Age: time.Second}.Append(nil)
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":       {nil, ErrNotAnnouncement},
		"other magic": {[]byte{0x01, 1, 1, 1, 1, 1}, ErrNotAnnouncement},
		"truncated":   {good[:len(good)-1], ErrMalformed},
		"trailing":    {append(append([]byte{}, good...), 0), ErrMalformed},
		"no leader":   {Announcement{Epoch: 1, Seq: 1}.Append(nil), ErrMalformed},
		"too old":     {Announcement{Leader: 1, Age: MaxAge + time.Millisecond}.Append(nil), ErrMalformed},
		"too long":    {append([]byte{Magic}, make([]byte, MaxEncodedLen)...), ErrMalformed},
	}
	for name, c := range cases {
		if _, err := Decode(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: Decode error %v, want %v", name, err, c.want)
		}
	}
}

// TestKnowledgeKeepsNewestAndAges: an observer keeps the newest claim by
// (epoch, seq), ignores older and repeated ones (so relays stop), and
// reports an age that runs from when the leader made the claim.
func TestKnowledgeKeepsNewestAndAges(t *testing.T) {
	var k Knowledge
	if _, ok := k.Current(at(0)); ok {
		t.Fatal("knowledge before any announcement")
	}
	if !k.Learn(at(1000), Announcement{Leader: 2, Epoch: 10, Term: 10, Seq: 1, Age: 300 * time.Millisecond}) {
		t.Fatal("first announcement not news")
	}
	cur, _ := k.Current(at(1200))
	if cur.Leader != 2 || cur.Epoch != 10 || cur.Age != 500*time.Millisecond {
		t.Fatalf("current %+v, want leader 2 epoch 10 age 500ms", cur)
	}
	if k.Learn(at(1300), Announcement{Leader: 2, Epoch: 10, Term: 10, Seq: 1}) {
		t.Fatal("a repeated announcement was news: relays would never stop")
	}
	if k.Learn(at(1300), Announcement{Leader: 1, Epoch: 9, Term: 9, Seq: 50}) {
		t.Fatal("an older epoch replaced a newer one")
	}
	if !k.Learn(at(2000), Announcement{Leader: 2, Epoch: 10, Term: 10, Seq: 2, Age: 100 * time.Millisecond}) {
		t.Fatal("a refresh was not news")
	}
	if cur, _ := k.Current(at(2000)); cur.Age != 100*time.Millisecond {
		t.Fatalf("age after refresh %v, want 100ms", cur.Age)
	}
	if !k.Learn(at(2100), Announcement{Leader: 3, Epoch: 11, Term: 11, Seq: 1}) {
		t.Fatal("a new epoch was not news")
	}
	if cur, _ := k.Current(at(2100)); cur.Leader != 3 || cur.Epoch != 11 {
		t.Fatalf("current %+v after a new epoch", cur)
	}
}

// TestAnnouncerAnnouncesOnChangeThenPeriodically: at once on taking the
// lead or a new epoch, then every interval, never while not leading.
func TestAnnouncerAnnouncesOnChangeThenPeriodically(t *testing.T) {
	an := NewAnnouncer(4, time.Second)
	follower := protocols.Status{Role: protocols.Follower, Leader: 2, Epoch: 3, Term: 3}
	an.Observe(at(0), follower)
	if _, ok := an.Due(at(0)); ok {
		t.Fatal("a follower announced")
	}
	if _, ok := an.NextDeadline(); ok {
		t.Fatal("a follower armed a deadline")
	}
	leader := protocols.Status{Role: protocols.Leader, Leader: 4, Epoch: 4, Term: 4}
	an.Observe(at(100), leader)
	a, ok := an.Due(at(100))
	if !ok || a != (Announcement{Leader: 4, Epoch: 4, Term: 4, Seq: 1}) {
		t.Fatalf("on taking the lead: %+v %v", a, ok)
	}
	an.Observe(at(500), leader)
	if _, ok := an.Due(at(500)); ok {
		t.Fatal("announced again before the interval")
	}
	if d, ok := an.NextDeadline(); !ok || d != at(1100) {
		t.Fatalf("next deadline %v %v, want 1.1s", d, ok)
	}
	if a, ok := an.Due(at(1100)); !ok || a.Seq != 2 {
		t.Fatalf("refresh %+v %v, want seq 2", a, ok)
	}
	an.Observe(at(1200), protocols.Status{Role: protocols.Leader, Leader: 4, Epoch: 6, Term: 6})
	if a, ok := an.Due(at(1200)); !ok || a.Epoch != 6 || a.Seq != 1 {
		t.Fatalf("new epoch %+v %v, want epoch 6 seq 1 at once", a, ok)
	}
	an.Observe(at(1300), follower)
	if _, ok := an.Due(at(5000)); ok {
		t.Fatal("announced after stepping down")
	}
}

// TestHastenBringsTheNextAnnouncementForward: a newcomer is told at once,
// but not more often than minGap, and a node that does not lead is never
// made to announce.
func TestHastenBringsTheNextAnnouncementForward(t *testing.T) {
	an := NewAnnouncer(4, 2*time.Second)
	an.Hasten(at(0), 100*time.Millisecond)
	if _, ok := an.Due(at(0)); ok {
		t.Fatal("a node that does not lead announced")
	}
	leader := protocols.Status{Role: protocols.Leader, Leader: 4, Epoch: 4, Term: 4}
	an.Observe(at(0), leader)
	if a, ok := an.Due(at(0)); !ok || a.Seq != 1 {
		t.Fatalf("on taking the lead: %+v %v", a, ok)
	}
	// 50 ms after the last announcement: not before 100 ms.
	an.Hasten(at(50), 100*time.Millisecond)
	if d, _ := an.NextDeadline(); d != at(100) {
		t.Fatalf("hastened at 50 ms to %v, want 100 ms", d)
	}
	if a, ok := an.Due(at(100)); !ok || a.Seq != 2 {
		t.Fatalf("hastened announcement %+v %v", a, ok)
	}
	// Long after: at once; then the interval runs from there.
	an.Hasten(at(900), 100*time.Millisecond)
	if a, ok := an.Due(at(900)); !ok || a.Seq != 3 {
		t.Fatalf("hastened announcement %+v %v", a, ok)
	}
	if d, _ := an.NextDeadline(); d != at(2900) {
		t.Fatalf("next refresh %v, want 2.9 s", d)
	}
	// Two newcomers in a row: the second does not bring forward what the
	// first already brought forward.
	an.Hasten(at(950), 100*time.Millisecond)
	an.Hasten(at(960), 100*time.Millisecond)
	if d, _ := an.NextDeadline(); d != at(1000) {
		t.Fatalf("hastened twice to %v, want 1 s (100 ms after the last)", d)
	}
}

func TestFastPathKeepsHeartbeatsForVoters(t *testing.T) {
	hb := protocols.Message{Kind: protocols.MsgHeartbeat}
	if !FastPath(hb, true) || FastPath(hb, false) {
		t.Fatal("heartbeats must go to voters only")
	}
	for _, k := range []protocols.MessageKind{protocols.MsgVote, protocols.MsgHeartbeatResp, protocols.MsgTimeoutNow} {
		if !FastPath(protocols.Message{Kind: k}, false) {
			t.Fatalf("%v to an observer was held back", k)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Announcement{Leader: 1, Epoch: 2, Term: 2, Seq: 1, Age: time.Second}.Append(nil))
	f.Add([]byte{Magic})
	f.Add(Announcement{Leader: 3, Epoch: 9, Term: 9, Seq: 2, Election: "scheduler"}.Append(nil))
	f.Add([]byte{Magic, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if got := a.Append(nil); string(got) != string(b) {
			t.Fatalf("Decode(%x) = %+v re-encodes to %x", b, a, got)
		}
	})
}
