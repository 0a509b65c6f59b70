package majority

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ with the actual output")

// TestGolden replays the scenarios in testdata/*.txt. Each block is a
// command line, a "----" line and the expected output, ended by a blank
// line. Run with -rewrite to regenerate after a deliberate change, then read
// the diff: these files are the protocol's stories told step by step.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runGolden(t, file)
		})
	}
}

type goldenBlock struct {
	cmd    string
	output string
}

func parseGolden(t *testing.T, text string) []goldenBlock {
	var blocks []goldenBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("line %d: command %q must be followed by ----", i+1, line)
		}
		var out []string
		j := i + 2
		for ; j < len(lines) && lines[j] != ""; j++ {
			out = append(out, lines[j])
		}
		blocks = append(blocks, goldenBlock{cmd: line, output: strings.Join(out, "\n")})
		i = j
	}
	return blocks
}

func runGolden(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blocks := parseGolden(t, string(data))
	var tn *testNet
	var rewritten strings.Builder
	for _, b := range blocks {
		got := strings.TrimRight(execGolden(t, &tn, b.cmd), "\n")
		if got == "" {
			got = "ok"
		}
		fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", b.cmd, got)
		if !*rewrite && got != b.output {
			t.Errorf("%s: %s\n--- want\n%s\n--- got\n%s", file, b.cmd, b.output, got)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func execGolden(t *testing.T, tnp **testNet, line string) string {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	kv := map[string]string{}
	var pos []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	num := func(s string) int {
		v, err := strconv.Atoi(strings.TrimPrefix(s, "n"))
		if err != nil {
			t.Fatalf("%q: bad number %q", line, s)
		}
		return v
	}
	dur := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%q: bad duration %q", line, s)
		}
		return d
	}
	if cmd == "new" {
		cfg := baseConfig()
		cfg.PreVote = kv["prevote"] != "false"
		cfg.CheckQuorum = kv["checkquorum"] != "false"
		observers := 0
		if o, ok := kv["observers"]; ok {
			observers = num(o)
		}
		seed := uint64(1)
		if s, ok := kv["seed"]; ok {
			seed = uint64(num(s))
		}
		*tnp = newTestNet(num(kv["voters"]), observers, seed, cfg)
		return (*tnp).TakeEvents()
	}
	tn := *tnp
	if tn == nil {
		t.Fatalf("%q before new", line)
	}
	switch cmd {
	case "run":
		tn.Advance(dur(pos[0]))
		return tn.TakeEvents()
	case "until-leader":
		l, d := tn.runUntilLeader(dur(kv["max"]))
		return tn.TakeEvents() + fmt.Sprintf("leader n%d after %v\n", l, d)
	case "status":
		return tn.Status()
	case "isolate":
		tn.Isolate(protocols.ID(num(pos[0])))
	case "cut":
		tn.Cut[[2]protocols.ID{protocols.ID(num(pos[0])), protocols.ID(num(pos[1]))}] = true
	case "heal":
		tn.Heal()
	case "crash":
		tn.crash(protocols.ID(num(pos[0])))
	case "restart":
		tn.start(protocols.ID(num(pos[0])))
		return tn.TakeEvents()
	case "resign":
		id := protocols.ID(num(pos[0]))
		if err := tn.Nodes[id].Resign(tn.Now); err != nil {
			return fmt.Sprintf("error: %v", err)
		}
		tn.Drain(id)
		tn.Deliver()
		return tn.TakeEvents()
	case "campaign":
		// Force simultaneous campaigns, as if the timeouts expired together.
		for _, p := range pos {
			id := protocols.ID(num(p))
			tn.Nodes[id].campaign(tn.Now, false)
			tn.Drain(id)
		}
		tn.Deliver()
		return tn.TakeEvents()
	case "disk":
		hs := tn.HS[protocols.ID(num(pos[0]))]
		return fmt.Sprintf("term=%d vote=%d epoch=%d", hs.Term, hs.Vote, hs.Epoch)
	case "trace":
		tn.TraceSends = pos[0] == "on"
	default:
		t.Fatalf("unknown command %q", line)
	}
	return ""
}
