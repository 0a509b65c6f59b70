package membership

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []nodeMeta{
		{ID: 1, Version: 1},
		{ID: 1<<64 - 1, Leaving: true, Version: 0xffff, PeerID: "12D3KooWabc", PeerAddr: "/ip4/10.0.0.1/tcp/7947"},
		{ID: 2, Version: 1, PeerID: "p", PeerAddr: "a", User: `{"addr":"10.0.0.5:5432"}`},
		{ID: 3, Version: 1, PeerID: "p", PeerAddr: "a", Priority: 255},
		{ID: 4, Version: 1, Digest: "d", User: `{"a":"b"}`, Priority: 10},
		{ID: 5, Version: 1, DigestExt: "pv=1 cq=1"},
		{ID: 6, Version: 1, Digest: "majority et=1s|1.1|a", User: `{"a":"b"}`, Priority: 3, DigestExt: "pv=0 cq=1"},
		{ID: 7, Version: 2, Priorities: "jobs=9,reports=0"},
		{ID: 8, Version: 2, Digest: "d", Priority: 4, DigestExt: "pv=1", Priorities: "db=200"},
		{ID: 9, Version: 2, Elections: ElectionsBitmap([]string{"jobs", "db"})},
		{ID: 10, Version: 2, Priorities: "jobs=1", Elections: ElectionsBitmap(nil)},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("decode(%x): %v", b, err)
		}
		if got != m {
			t.Fatalf("round trip %+v -> %+v", m, got)
		}
	}
}

func TestMetaSizeLimit(t *testing.T) {
	// The largest peer address that fits: 2 header bytes, id 1 byte,
	// version 1 byte, empty peer id 1 byte, a 2-byte length.
	fits := nodeMeta{ID: 1, Version: 1, PeerAddr: strings.Repeat("a", MaxMetaSize-7)}
	b, err := encodeMeta(fits)
	if err != nil || len(b) != MaxMetaSize {
		t.Fatalf("encode of %d-byte metadata: len %d, %v", MaxMetaSize, len(b), err)
	}
	fits.PeerAddr += "a"
	if _, err := encodeMeta(fits); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("encode of %d-byte metadata: %v, want ErrMetaTooLarge", MaxMetaSize+1, err)
	}
}

func TestMetaDecodeRejects(t *testing.T) {
	good, err := encodeMeta(nodeMeta{ID: 300, Version: 1, PeerID: "p", PeerAddr: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"format 0":      append([]byte{0}, good[1:]...),
		"id 0":          {1, 0, 0, 1, 0, 0},
		"huge length":   {1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"overlong":      {1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"bad utf8":      {1, 0, 1, 1, 1, 0xff, 0},
		"version range": {1, 0, 1, 0x80, 0x80, 0x04, 0, 0},
		"too large":     make([]byte, MaxMetaSize+1),
	} {
		if _, err := decodeMeta(b); !errors.Is(err, errBadMeta) {
			t.Errorf("%s: decode(%x) = %v, want errBadMeta", name, b, err)
		}
	}
	for n := range len(good) {
		if _, err := decodeMeta(good[:n]); err == nil {
			t.Errorf("truncated to %d bytes: decoded", n)
		}
	}
	// A newer agent's extra fields are skipped.
	got, err := decodeMeta(append(bytes.Clone(good), 9, 9, 9))
	if err != nil || got.ID != 300 {
		t.Errorf("metadata with appended fields: %+v, %v", got, err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	good, _ := encodeMeta(nodeMeta{ID: 7, Version: 1, PeerID: "12D3KooW", PeerAddr: "/ip4/127.0.0.1/tcp/1"})
	f.Add(good)
	prio, _ := encodeMeta(nodeMeta{ID: 7, Version: 1, PeerID: "p", PeerAddr: "a", Priority: 10})
	f.Add(prio)
	f.Add([]byte{1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	ext, _ := encodeMeta(nodeMeta{ID: 7, Version: 1, PeerID: "p", PeerAddr: "a", Digest: "majority et=1s", DigestExt: "pv=1 cq=0"})
	f.Add(ext)
	prios, _ := encodeMeta(nodeMeta{ID: 7, Version: 2, PeerID: "p", PeerAddr: "a", Priority: 1, Priorities: "jobs=9,web=250"})
	f.Add(prios)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if len(m.PeerID)+len(m.PeerAddr) > len(b) {
			t.Fatalf("decoded %d string bytes from %d input bytes", len(m.PeerID)+len(m.PeerAddr), len(b))
		}
		again, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("re-encode of decoded %+v: %v", m, err)
		}
		if back, err := decodeMeta(again); err != nil || back != m {
			t.Fatalf("re-decode: %+v, %v; want %+v", back, err, m)
		}
	})
}

func TestKeys(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseKey(k)
	if err != nil || len(b) != KeySize {
		t.Fatalf("ParseKey(GenerateKey()) = %d bytes, %v", len(b), err)
	}
	k2, _ := GenerateKey()
	if k == k2 {
		t.Fatal("two generated keys are equal")
	}
	for _, n := range []int{16, 24, 32} {
		if _, err := ParseKey(base64.StdEncoding.EncodeToString(make([]byte, n))); err != nil {
			t.Errorf("%d-byte key: %v", n, err)
		}
	}
	for s, want := range map[string]string{
		"":          "empty",
		"not b64!":  "not valid base64",
		"AAAAAAAA=": "not valid base64",
		base64.StdEncoding.EncodeToString(make([]byte, 20)): "decodes to 20 bytes",
	} {
		if _, err := ParseKey(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKey(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

func TestLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var suspects []string
	w := &zapWriter{log: zap.New(core), onSuspect: func(n string) { suspects = append(suspects, n) }}
	lg := newStdLogger(w)
	lg.Printf("[DEBUG] memberlist: chatter")
	lg.Printf("[INFO] memberlist: Suspect n2 has failed, no acks received")
	lg.Printf("[WARN] memberlist: warned")
	lg.Printf("[ERR] memberlist: broken")
	lg.Printf("unprefixed")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+":"+e.Message)
	}
	want := "info:Suspect n2 has failed, no acks received warn:warned error:broken info:unprefixed"
	if strings.Join(got, " ") != want {
		t.Errorf("logged %q, want %q", strings.Join(got, " "), want)
	}
	if len(suspects) != 1 || suspects[0] != "n2" {
		t.Errorf("suspects = %v, want [n2]", suspects)
	}
}

func TestEventQueueOverflowBecomesResync(t *testing.T) {
	eq := newEventQueue(2)
	defer eq.close()
	for i := range 10 {
		eq.push(Event{Kind: EventAlive, Member: Member{Name: string(rune('a' + i))}})
	}
	// The dispatcher may already hold one event; after it, the overflow
	// must show up as a resync, and no more than the buffer survives.
	timeout := time.After(waitLimit)
	for n := 0; ; n++ {
		select {
		case ev := <-eq.out:
			if ev.Kind == EventResync {
				if n > 1 {
					t.Fatalf("resync after %d events, want at most 1 before it", n)
				}
				return
			}
		case <-timeout:
			t.Fatal("no resync after overflow")
		}
	}
}

func TestEventQueuePreservesOrder(t *testing.T) {
	eq := newEventQueue(100)
	for i := range 50 {
		eq.push(Event{Member: Member{ID: protocols.ID(i)}})
	}
	for i := range 50 {
		if ev := <-eq.out; ev.Member.ID != protocols.ID(i) || ev.Kind != EventAlive {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	eq.close()
	if _, ok := <-eq.out; ok {
		t.Fatal("channel open after close")
	}
	eq.push(Event{}) // after close: dropped, no panic
	eq.close()
}

func TestMemNetwork(t *testing.T) {
	net := NewMemNetwork()
	a, err := net.Join(Member{Name: "a", ID: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := net.Join(Member{Name: "b", ID: 2}, 0)
	c, _ := net.Join(Member{Name: "c", ID: 3}, 0)
	if _, err := net.Join(Member{Name: "a", ID: 9}, 0); err == nil {
		t.Fatal("joined a second node named a")
	}
	wa := watch(a)
	all := func(view map[string]Member) bool { return len(view) == 3 }
	wa.until(t, "a sees three", all)
	watch(b).until(t, "b sees three", all)

	net.Suspect("b")
	wa.until(t, "b suspect", func(v map[string]Member) bool { return v["b"].State == StateSuspect })
	net.Recover("b")
	wa.until(t, "b alive", func(v map[string]Member) bool { return v["b"].State == StateAlive })

	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	b.Shutdown()
	c.Shutdown()
	wa.until(t, "b left, c dead", func(v map[string]Member) bool {
		return v["b"].State == StateLeft && v["c"].State == StateDead
	})
	if got := a.Members(); len(got) != 3 || got[1].State != StateLeft || got[2].State != StateDead {
		t.Errorf("a.Members() = %+v", got)
	}
	if err := c.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown: %v", err)
	}
	// The name is free again after Shutdown.
	c2, err := net.Join(Member{Name: "c", ID: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wa.until(t, "c back", func(v map[string]Member) bool { return v["c"].State == StateAlive })
	c2.Shutdown()
	a.Shutdown()
}

// Gossip is sent uncompressed in every profile (see memberlistConfig).
func TestGossipUncompressed(t *testing.T) {
	for _, profile := range []string{ProfileLAN, ProfileLocal, ProfileWAN} {
		c := Config{Name: "n1", ID: 1, Bind: "127.0.0.1:7946", Profile: profile}
		mc, err := c.memberlistConfig()
		if err != nil {
			t.Fatalf("%s: %v", profile, err)
		}
		if mc.EnableCompression {
			t.Errorf("%s: memberlist compression is on", profile)
		}
	}
}

// TestUserMetaIsOptional: metadata without the user field (an older agent)
// decodes with none, and so does a user field that does not parse (the
// member stays usable).
func TestUserMetaIsOptional(t *testing.T) {
	old, err := encodeMeta(nodeMeta{ID: 3, Version: 1, PeerID: "p", PeerAddr: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMeta(old); err != nil || m.User != "" {
		t.Fatalf("older metadata: %+v, %v", m, err)
	}
	full, err := encodeMeta(nodeMeta{ID: 3, Version: 1, PeerID: "p", PeerAddr: "a", User: `{"a":"b"}`})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMeta(full[:len(full)-2]); err != nil || m.User != "" || m.ID != 3 {
		t.Fatalf("truncated user meta: %+v, %v; want the member without it", m, err)
	}
}

// TestMetaDigest: the settings digest round-trips, beside the user field
// or alone; older agents publish none; the longest digest and the longest
// node.meta fit beside an IPv6 address.
func TestMetaDigest(t *testing.T) {
	m := nodeMeta{ID: 9, Version: 1, PeerID: "12D3KooW", PeerAddr: "/ip4/127.0.0.1/tcp/1", Digest: "majority et=1s|1.3|n1,n2,n3"}
	b, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(b)
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, m)
	}
	// With the user field and the priority after it, and fields a newer
	// agent appends after them (an empty digest extension, then others),
	// which are skipped.
	m.User = `{"addr":"10.0.0.5:5432"}`
	m.Priority = 10
	b, _ = encodeMeta(m)
	if got, err := decodeMeta(append(b, 0, 1, 2, 3)); err != nil || got != m {
		t.Errorf("with the user field and appended fields: %+v, %v; want %+v", got, err, m)
	}
	m.Priority = 0
	// A user field with no digest writes an empty digest first.
	m.Digest = ""
	b, _ = encodeMeta(m)
	if got, err := decodeMeta(b); err != nil || got != m {
		t.Errorf("user field alone: %+v, %v; want %+v", got, err, m)
	}
	m.User = ""
	// Older agents publish none.
	m.Digest = ""
	b, _ = encodeMeta(m)
	if got, err := decodeMeta(b); err != nil || got.Digest != "" {
		t.Errorf("no digest: %+v, %v", got, err)
	}
	m.Digest = strings.Repeat("x", MaxDigestLen+1)
	if _, err := encodeMeta(m); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized digest: %v", err)
	}
	// The longest digest fits beside a real peer id and address.
	m.Digest = strings.Repeat("x", MaxDigestLen)
	m.PeerID = "12D3KooWPEYnrcyeaqaJDmT4MyGBiYmpHE4tmWt5ovnG87LQ7z9L"
	m.PeerAddr = "/ip6/fd00:1234:5678:9abc:def0:1234:5678:9abc/tcp/65535/p2p/" + m.PeerID
	m.User = strings.Repeat("u", 200) // config.MaxMetaBytes
	if _, err := encodeMeta(m); err != nil {
		t.Errorf("longest digest and node.meta with an IPv6 address: %v", err)
	}
}

// TestMetaPriority: node.priority travels in the metadata, after an empty
// digest and user field when they are not set; an older agent's metadata,
// a priority that does not parse and one above 255 all give priority 0 and
// keep the member usable; Member hands it to the protocols.
func TestMetaPriority(t *testing.T) {
	m := nodeMeta{ID: 5, Version: 1, PeerID: "p", PeerAddr: "a", Priority: 10}
	b, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := encodeMeta(nodeMeta{ID: 5, Version: 1, PeerID: "p", PeerAddr: "a"})
	if want := append(bytes.Clone(plain), 0, 0, 10); !bytes.Equal(b, want) {
		t.Fatalf("encoded %x, want %x (empty digest, empty user field, priority)", b, want)
	}
	for name, in := range map[string][]byte{
		"older agent":  plain,
		"truncated":    append(bytes.Clone(plain), 0, 0, 0x80),
		"out of range": append(bytes.Clone(plain), 0, 0, 0x80, 0x02),
	} {
		got, err := decodeMeta(in)
		if err != nil || got.Priority != 0 || got.ID != 5 {
			t.Errorf("%s: %+v, %v; want the member with priority 0", name, got, err)
		}
	}
	if pm := (Member{ID: 5, Name: "n5", Priority: 10}).ProtocolMember(); pm.Priority != 10 {
		t.Fatalf("ProtocolMember dropped the priority: %+v", pm)
	}
}

// TestMetaDigestExt: the settings digest's extension travels after the
// priority, which is then written even when 0; an older agent's metadata
// (none) and an extension that does not parse or is too long give none
// and keep the member usable; the longest of everything still fits beside
// an IPv6 address with a node id below 2^28.
func TestMetaDigestExt(t *testing.T) {
	m := nodeMeta{ID: 5, Version: 1, PeerID: "p", PeerAddr: "a", Digest: "d", DigestExt: "pv=1 cq=1"}
	b, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := encodeMeta(nodeMeta{ID: 5, Version: 1, PeerID: "p", PeerAddr: "a", Digest: "d"})
	want := append(bytes.Clone(plain), 0, 0, 9)
	want = append(want, "pv=1 cq=1"...)
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded %x, want %x (digest, empty user field, priority 0, extension)", b, want)
	}
	if got, err := decodeMeta(b); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, m)
	}
	prio := append(bytes.Clone(plain), 0, 0)
	for name, in := range map[string][]byte{
		"older agent": plain,
		"truncated":   append(bytes.Clone(prio), 9, 'p', 'v'),
		"too long":    append(append(bytes.Clone(prio), MaxDigestExtLen+1), bytes.Repeat([]byte{'x'}, MaxDigestExtLen+1)...),
		"not UTF-8":   append(bytes.Clone(prio), 2, 0xff, 0xfe),
	} {
		got, err := decodeMeta(in)
		if err != nil || got.DigestExt != "" || got.ID != 5 || got.Digest != "d" {
			t.Errorf("%s: %+v, %v; want the member without an extension", name, got, err)
		}
	}
	// A field a later agent appends after it is skipped.
	if got, err := decodeMeta(append(bytes.Clone(b), 3, 'a', 'b', 'c')); err != nil || got != m {
		t.Errorf("with a later field: %+v, %v; want %+v", got, err, m)
	}
	m.DigestExt = strings.Repeat("x", MaxDigestExtLen+1)
	if _, err := encodeMeta(m); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("oversized extension: %v", err)
	}
	big := nodeMeta{ID: 1<<28 - 1, Version: ProtocolVersion, Leaving: true,
		PeerID:   "12D3KooWPEYnrcyeaqaJDmT4MyGBiYmpHE4tmWt5ovnG87LQ7z9L",
		Digest:   strings.Repeat("x", MaxDigestLen),
		User:     strings.Repeat("u", 200), // config.MaxMetaBytes
		Priority: 255, DigestExt: strings.Repeat("e", MaxDigestExtLen)}
	big.PeerAddr = "/ip6/fd00:1234:5678:9abc:def0:1234:5678:9abc/tcp/65535/p2p/" + big.PeerID
	if b, err := encodeMeta(big); err != nil {
		t.Errorf("the longest of every field with an IPv6 address: %v", err)
	} else if got, err := decodeMeta(b); err != nil || got != big {
		t.Errorf("the longest of every field: %+v, %v", got, err)
	}
}

// A queued gossip message replaces the one of its own topic only: each
// election's newest announcement stays queued beside the others'.
func TestGossipReplacesItsOwnTopicOnly(t *testing.T) {
	q := &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 3 }, RetransmitMult: 1}
	msg := func(s string) func() []byte { return func() []byte { return []byte(s) } }
	q.QueueBroadcast(&userBroadcast{topic: "", msg: msg("default-1")})
	q.QueueBroadcast(&userBroadcast{topic: "jobs", msg: msg("jobs-1")})
	q.QueueBroadcast(&userBroadcast{topic: "", msg: msg("default-2")})
	var got []string
	for _, b := range q.GetBroadcasts(0, 1400) {
		got = append(got, string(b))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"default-2", "jobs-1"}) {
		t.Fatalf("queued %v, want the newest of each topic: default-2, jobs-1", got)
	}
}

// TestElectionPriorities: per-election priorities go out in name order,
// come back per election with node.priority for the rest, and a field
// that would not fit, or that an agent cannot read, is refused or left
// out rather than misread.
func TestElectionPriorities(t *testing.T) {
	enc, err := EncodeElectionPriorities(map[string]uint8{"web": 250, "jobs": 9})
	if err != nil || enc != "jobs=9,web=250" {
		t.Fatalf("encode: %q, %v", enc, err)
	}
	b, err := encodeMeta(nodeMeta{ID: 2, Version: 2, Priority: 5, Priorities: enc})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	m := Member{Priority: got.Priority, ElectionPriorities: got.Priorities}
	for name, want := range map[string]uint8{"web": 250, "jobs": 9, "reports": 5, "default": 5} {
		if p := m.PriorityIn(name); p != want {
			t.Errorf("PriorityIn(%s) = %d, want %d", name, p, want)
		}
	}
	long := map[string]uint8{}
	for i := range 20 {
		long[fmt.Sprintf("election-with-a-long-name-%02d", i)] = 1
	}
	if _, err := EncodeElectionPriorities(long); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("20 long names: %v, want ErrMetaTooLarge", err)
	}
	// A malformed field from a peer is left out: node.priority everywhere.
	raw, _ := encodeMeta(nodeMeta{ID: 2, Version: 2, Priority: 5, DigestExt: "x"})
	raw = append(raw, 5, 'a', '=', '9', '9', '9')
	if got, err := decodeMeta(raw); err != nil || got.Priorities != "" {
		t.Errorf("a=999: %+v, %v; want the member, without priorities", got, err)
	}
}

// TestElectionsBitmap: a member that publishes which named elections it
// runs may run those, not the others; one that says nothing may run any.
func TestElectionsBitmap(t *testing.T) {
	m := Member{Elections: ElectionsBitmap([]string{"jobs", "reports"})}
	for name, want := range map[string]bool{"jobs": true, "reports": true} {
		if m.MayRun(name) != want {
			t.Errorf("MayRun(%s) = %v, want %v", name, !want, want)
		}
	}
	missed := 0
	for i := range 200 {
		if !m.MayRun(fmt.Sprintf("other-%d", i)) {
			missed++
		}
	}
	if missed < 150 { // two of 63 bits set: about 97 % are told apart
		t.Errorf("only %d of 200 other names read as not run", missed)
	}
	if none := (Member{Elections: ElectionsBitmap(nil)}); none.MayRun("jobs") {
		t.Error("a member running no named election may run jobs")
	}
	if silent := (Member{}); !silent.MayRun("jobs") {
		t.Error("a member that does not say may not run jobs")
	}
}

// An ack payload round-trips, and any other bytes decode to "says
// nothing" without a panic (a probe's answer comes off the network).
func FuzzKnownInAck(f *testing.F) {
	f.Add([]byte{ackMagic, 1})
	f.Add([]byte{ackMagic, 0x80})
	f.Add([]byte{})
	f.Add([]byte{0x00, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := knownInAck(b)
		if !ok {
			return
		}
		again, ok := knownInAck(binary.AppendUvarint([]byte{ackMagic}, n))
		if !ok || again != n {
			t.Fatalf("%d does not round-trip: %d, %v", n, again, ok)
		}
	})
}

func TestKnownInAck(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		n    uint64
		says bool
	}{
		{nil, 0, false},                // an older agent's ack
		{[]byte{ackMagic}, 0, false},   // cut short
		{[]byte{0x01, 1}, 0, false},    // another payload
		{[]byte{ackMagic, 1}, 1, true}, // knows only itself
		{[]byte{ackMagic, 0xac, 0x02}, 300, true},
		{[]byte{ackMagic, 0x80}, 0, false}, // a varint cut short
	} {
		n, ok := knownInAck(tc.in)
		if n != tc.n || ok != tc.says {
			t.Errorf("knownInAck(%x) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.says)
		}
	}
}
