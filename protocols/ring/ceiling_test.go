package ring

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/protocols"
)

// A node whose next epoch would pass protocols.Ceiling does not take the
// lead (it would wrap), and an absurd epoch is refused without a trace.
func TestNoEpochBeyondTheCeiling(t *testing.T) {
	last := protocols.Ceiling >> protocols.EpochIDBits << protocols.EpochIDBits
	var log lineLog
	n, err := New(Config{ID: 1, Members: []protocols.Member{{ID: 1, Name: "n1"}, {ID: 2, Name: "n2"}}, HardState: protocols.HardState{Epoch: last}, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	n.MemberDown(0, 2) // alone: it would lead at once
	n.Campaign(0)
	for n.HasReady() {
		rd := n.Ready()
		if rd.HardState != nil && rd.HardState.Epoch > protocols.Ceiling {
			t.Fatalf("persisted epoch %d beyond the ceiling", rd.HardState.Epoch)
		}
		n.Advance(rd)
	}
	if st := n.Status(0); st.Role == protocols.Leader || st.Epoch > protocols.Ceiling {
		t.Fatalf("status %+v: led or passed the ceiling", st)
	}
	if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "at the ceiling") }) {
		t.Fatalf("the node did not say why it does not lead: %q", log)
	}
	m := protocols.Message{Kind: protocols.MsgRingLeader, From: 2, To: 1, Leader: 2, Epoch: math.MaxUint64 - 1}
	if err := n.Step(0, m); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("Step(absurd epoch) = %v, want ErrBeyondCeiling", err)
	}
	if _, err := New(Config{ID: 1, HardState: protocols.HardState{Epoch: math.MaxUint64 - 1}}); !errors.Is(err, protocols.ErrBeyondCeiling) {
		t.Fatalf("New from an absurd epoch = %v, want ErrBeyondCeiling", err)
	}
}

// lineLog records the protocol's log messages.
type lineLog []string

func (l *lineLog) Debugw(msg string, _ ...any) { *l = append(*l, msg) }
func (l *lineLog) Infow(msg string, _ ...any)  { *l = append(*l, msg) }
