package testnet

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/conclave-agent/conclave/protocols"
)

// Args are a golden-file command's arguments: the bare words in order and
// the key=value pairs.
type Args struct {
	Pos []string
	KV  map[string]string
	d   *datadriven.TestData
}

// ParseArgs splits d's arguments.
func ParseArgs(d *datadriven.TestData) Args {
	a := Args{KV: map[string]string{}, d: d}
	for _, c := range d.CmdArgs {
		if len(c.Vals) == 0 {
			a.Pos = append(a.Pos, c.Key)
		} else {
			a.KV[c.Key] = strings.Join(c.Vals, ",")
		}
	}
	return a
}

// Num parses s, a number or a node name n<number>.
func (a Args) Num(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(strings.TrimPrefix(s, "n"))
	if err != nil {
		a.d.Fatalf(t, "bad number %q", s)
	}
	return v
}

// ID parses the i-th bare word as a node id.
func (a Args) ID(t *testing.T, i int) protocols.ID {
	t.Helper()
	if i >= len(a.Pos) {
		a.d.Fatalf(t, "missing node argument %d", i+1)
	}
	return protocols.ID(a.Num(t, a.Pos[i]))
}

// Priorities parses prio=(ID:P,...) into each listed node's priority; nil
// when the argument is absent.
func (a Args) Priorities(t *testing.T) map[protocols.ID]uint8 {
	t.Helper()
	v, ok := a.KV["prio"]
	if !ok {
		return nil
	}
	prio := map[protocols.ID]uint8{}
	for _, pair := range strings.Split(v, ",") {
		id, p, found := strings.Cut(pair, ":")
		n, err := strconv.ParseUint(p, 10, 8)
		if !found || err != nil {
			a.d.Fatalf(t, "bad priority %q: want id:priority", pair)
		}
		prio[protocols.ID(a.Num(t, id))] = uint8(n)
	}
	return prio
}

// Dur parses s as a duration.
func (a Args) Dur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		a.d.Fatalf(t, "bad duration %q", s)
	}
	return d
}

// Has reports whether word is among the bare words.
func (a Args) Has(word string) bool {
	for _, p := range a.Pos {
		if p == word {
			return true
		}
	}
	return false
}

// Golden runs one of the commands every protocol's golden scenarios share
// and returns its output ("ok" when there is none to show); handled is
// false for a command it does not know, which the caller then runs. After
// every input the network delivers until quiet, and the output is the
// recorded events (leadership changes, and messages with trace on).
//
//	run DUR            advance virtual time
//	status             every live node's role, leader and epoch
//	isolate N          cut every link of N
//	cut A B            drop messages from A to B
//	heal               restore every link
//	crash N [tell]     stop N (tell: the others get MemberDown)
//	restart N          rebuild N from its disk; the others get MemberUp
//	resign N           N.Resign
//	suspect N M [off]  N's detector suspects M (off: no longer)
//	down N M           N hears from gossip that M is down
//	agree N max=DUR    advance until every live node follows N
//	disk N             N's durable state
//	trace on|off       record every message sent too
//	campaign N...      the nodes start an election together (protocols
//	                   with a Campaign method)
func Golden[P Node](t *testing.T, nw *Net[P], d *datadriven.TestData) (out string, handled bool) {
	t.Helper()
	a := ParseArgs(d)
	switch d.Cmd {
	case "run":
		nw.Advance(a.Dur(t, a.Pos[0]))
	case "status":
		return nw.Status(), true
	case "isolate":
		nw.Isolate(a.ID(t, 0))
		return "ok", true
	case "cut":
		nw.Cut[[2]protocols.ID{a.ID(t, 0), a.ID(t, 1)}] = true
		return "ok", true
	case "heal":
		nw.Heal()
		return "ok", true
	case "crash":
		nw.Crash(a.ID(t, 0), a.Has("tell"))
		nw.Deliver()
	case "restart":
		nw.Restart(a.ID(t, 0))
		nw.Deliver()
	case "resign":
		if err := nw.Nodes[a.ID(t, 0)].Resign(nw.Now); err != nil {
			return fmt.Sprintf("error: %v", err), true
		}
		nw.Deliver()
	case "suspect":
		nw.Nodes[a.ID(t, 0)].Suspect(nw.Now, a.ID(t, 1), !a.Has("off"))
		nw.Deliver()
	case "down":
		nw.Nodes[a.ID(t, 0)].MemberDown(nw.Now, a.ID(t, 1))
		nw.Deliver()
	case "agree":
		want := a.ID(t, 0)
		took := nw.TimeToAgree(want, a.Dur(t, a.KV["max"]))
		return nw.TakeEvents() + fmt.Sprintf("n%d agreed on after %v\n", want, took), true
	case "disk":
		hs := nw.HS[a.ID(t, 0)]
		return fmt.Sprintf("term=%d vote=%d epoch=%d", hs.Term, hs.Vote, hs.Epoch), true
	case "trace":
		nw.TraceSends = a.Has("on")
		return "ok", true
	case "campaign":
		for i := range a.Pos {
			c, ok := any(nw.Nodes[a.ID(t, i)]).(interface{ Campaign(protocols.Time) })
			if !ok {
				return "", false
			}
			c.Campaign(nw.Now)
		}
		nw.Deliver()
	default:
		return "", false
	}
	if out := nw.TakeEvents(); out != "" {
		return out, true
	}
	return "ok", true
}

// RunGolden replays the golden files in testdata/ (datadriven: a command
// line, "----" and the expected output; -rewrite regenerates them). build
// runs the "new" command, which every file starts with; own, when set,
// runs the protocol's own commands first and reports whether it knew the
// command; Golden runs the rest. Empty output reads "ok".
func RunGolden[P Node](t *testing.T, build func(t *testing.T, a Args) *Net[P],
	own func(t *testing.T, nw *Net[P], d *datadriven.TestData, a Args) (string, bool)) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var nw *Net[P]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := ParseArgs(d)
			if d.Cmd == "new" {
				nw = build(t, a)
				nw.Collect()
				return orOK(nw.TakeEvents())
			}
			if nw == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			if own != nil {
				if out, ok := own(t, nw, d, a); ok {
					return orOK(out)
				}
			}
			out, ok := Golden(t, nw, d)
			if !ok {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return out
		})
	})
}

func orOK(out string) string {
	if out == "" {
		return "ok"
	}
	return out
}
