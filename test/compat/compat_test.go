package compat

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-agent/conclave/store"
	"github.com/conclave-agent/conclave/transport"
)

// bumpHint is what to do when a surface changed without its version.
const bumpHint = "keep the old encoding (add fields, never rename or retype them), or bump the surface's version and record the break in docs/compatibility.md and CHANGELOG.md"

// releases returns the golden copies kept, one folder per release.
func releases(t *testing.T) []string {
	dirs, err := filepath.Glob("testdata/v*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden copies under testdata/ (%v): run bash scripts/compat-golden for the last release", err)
	}
	return dirs
}

func load(t *testing.T, dir string) Golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g Golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s/golden.json: %v", dir, err)
	}
	return g
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("golden hex %q: %v", s, err)
	}
	return b
}

// bumped reports whether a surface's version changed since the release,
// and then requires docs/compatibility.md to say so.
func bumped(t *testing.T, surface string, rel, tree any) bool {
	t.Helper()
	if rel == tree {
		return false
	}
	doc, err := os.ReadFile("../../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(fmt.Sprint(tree))) {
		t.Errorf("%s went from %v to %v, and docs/compatibility.md does not mention %v: say what the new version breaks", surface, rel, tree, tree)
	}
	t.Logf("%s bumped from %v to %v: the release's copy is not required", surface, rel, tree)
	return true
}

// TestGoldenWire: the tree reads the release's election frames and voter
// forwards as the release meant them, and writes the same bytes, so agents
// of both talk while the protocol ids are the same.
func TestGoldenWire(t *testing.T) {
	tree, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range releases(t) {
		rel := load(t, dir)
		t.Run(rel.Release, func(t *testing.T) {
			msgs := Messages()
			if len(rel.Frames) != len(msgs) {
				t.Fatalf("%d golden frames, %d samples: samples.go changed; regenerate with bash scripts/compat-golden %s", len(rel.Frames), len(msgs), rel.Release)
			}
			if !bumped(t, "the election protocol", rel.ElectionProtocol, tree.ElectionProtocol) {
				for i, f := range rel.Frames {
					got, err := transport.ReadFrame(bytes.NewReader(unhex(t, f.Hex)), 1<<20)
					if err != nil {
						t.Errorf("%s's frame %q: the tree cannot read it: %v; %s", rel.Release, f.Message, err, bumpHint)
					} else if got != msgs[i] {
						t.Errorf("%s's frame %q: the tree reads %v; %s", rel.Release, f.Message, got, bumpHint)
					}
					if tree.Frames[i].Hex != f.Hex {
						t.Errorf("frame %q: the tree writes\n%s\n%s wrote\n%s\n%s", f.Message, tree.Frames[i].Hex, rel.Release, f.Hex, bumpHint)
					}
				}
			}
			if !bumped(t, "the voters protocol", rel.VotersProtocol, tree.VotersProtocol) {
				reqs, reps := VoterRequests(), VoterReplies()
				for i, h := range rel.VoterRequests {
					got, err := transport.DecodeVoterRequest(unhex(t, h)[transport.HeaderLen:])
					if err != nil || got != reqs[i] {
						t.Errorf("%s's voter request %+v: the tree reads %+v, %v; %s", rel.Release, reqs[i], got, err, bumpHint)
					}
					if tree.VoterRequests[i] != h {
						t.Errorf("voter request %+v: the tree writes %s, %s wrote %s; %s", reqs[i], tree.VoterRequests[i], rel.Release, h, bumpHint)
					}
				}
				for i, h := range rel.VoterReplies {
					got, err := transport.DecodeVoterReply(unhex(t, h)[transport.HeaderLen:])
					if err != nil || got != reps[i] {
						t.Errorf("%s's voter reply %+v: the tree reads %+v, %v; %s", rel.Release, reps[i], got, err, bumpHint)
					}
					if tree.VoterReplies[i] != h {
						t.Errorf("voter reply %+v: the tree writes %s, %s wrote %s; %s", reps[i], tree.VoterReplies[i], rel.Release, h, bumpHint)
					}
				}
			}
		})
	}
}

// TestGoldenState: the tree reads the data directory the release wrote
// (always: an upgraded agent restarts from it), and while the record
// versions are the same it writes the release's bytes, so a rolled-back
// agent reads the tree's.
func TestGoldenState(t *testing.T) {
	tree, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range releases(t) {
		rel := load(t, dir)
		t.Run(rel.Release, func(t *testing.T) {
			hss := HardStates()
			for i, h := range rel.HardStates {
				got, err := store.Decode(unhex(t, h))
				if err != nil || got != hss[i] {
					t.Errorf("%s's state record %+v: the tree reads %+v, %v: an upgraded agent would lose its vote or epoch; keep a decoder for every record version", rel.Release, hss[i], got, err)
				}
			}
			if !bumped(t, "the state record version", rel.RecordVersion, tree.RecordVersion) {
				for i, h := range rel.HardStates {
					if tree.HardStates[i] != h {
						t.Errorf("state record %+v: the tree writes %s, %s wrote %s; %s", hss[i], tree.HardStates[i], rel.Release, h, bumpHint)
					}
				}
			}
			eps := ObservedEpochs()
			for i, h := range rel.Observed {
				got, err := store.DecodeObserved(unhex(t, h))
				if err != nil || got != eps[i] {
					t.Errorf("%s's observed record %d: the tree reads %d, %v; keep a decoder for every record version", rel.Release, eps[i], got, err)
				}
			}
			if !bumped(t, "the observed record version", rel.ObservedVersion, tree.ObservedVersion) {
				for i, h := range rel.Observed {
					if tree.Observed[i] != h {
						t.Errorf("observed record %d: the tree writes %s, %s wrote %s; %s", eps[i], tree.Observed[i], rel.Release, h, bumpHint)
					}
				}
			}
		})
	}
}

// TestGoldenSocketJSON: while the API prefix is the same, the tree's
// types read every body the release wrote, knowing every field, into the
// same values; and the tree writes every field the release wrote, with the
// same value (fields may be added, never renamed, removed or retyped).
func TestGoldenSocketJSON(t *testing.T) {
	tree, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	treeJSON, err := SocketJSON()
	if err != nil {
		t.Fatal(err)
	}
	samples := Socket()
	for _, dir := range releases(t) {
		rel := load(t, dir)
		t.Run(rel.Release, func(t *testing.T) {
			if bumped(t, "the socket API prefix", rel.APIPrefix, tree.APIPrefix) {
				return
			}
			files, err := filepath.Glob(filepath.Join(dir, "socket", "*.json"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range files {
				names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
			}
			for name := range samples {
				if !slices.Contains(names, name) {
					t.Errorf("no golden socket/%s.json for sample %q: regenerate with bash scripts/compat-golden %s", name, name, rel.Release)
				}
			}
			for _, name := range names {
				sample, ok := samples[name]
				if !ok {
					t.Errorf("golden socket/%s.json has no sample in samples.go", name)
					continue
				}
				old, err := os.ReadFile(filepath.Join(dir, "socket", name+".json"))
				if err != nil {
					t.Fatal(err)
				}
				dec := json.NewDecoder(bytes.NewReader(old))
				dec.DisallowUnknownFields()
				got := reflect.New(reflect.TypeOf(sample))
				if err := dec.Decode(got.Interface()); err != nil {
					t.Errorf("%s's %s body: the tree cannot read it: %v; %s", rel.Release, name, err, bumpHint)
				} else if !reflect.DeepEqual(got.Elem().Interface(), sample) {
					t.Errorf("%s's %s body: the tree reads %+v, want %+v; %s", rel.Release, name, got.Elem().Interface(), sample, bumpHint)
				}
				var o, n any
				if err := json.Unmarshal(old, &o); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(treeJSON[name], &n); err != nil {
					t.Fatal(err)
				}
				for _, p := range missing(o, n, name) {
					t.Errorf("%s: %s; %s", name, p, bumpHint)
				}
			}
		})
	}
}

// missing lists where tree lacks a key old has, or holds another value.
// An old null is matched by an empty list or object: a client that took
// null for "none" takes an empty one too.
func missing(old, tree any, at string) []string {
	switch o := old.(type) {
	case map[string]any:
		n, ok := tree.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: was an object, the tree writes %v", at, tree)}
		}
		var out []string
		for k, v := range o {
			nv, ok := n[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: the release wrote it, the tree does not", at, k))
				continue
			}
			out = append(out, missing(v, nv, at+"."+k)...)
		}
		return out
	case []any:
		n, ok := tree.([]any)
		if !ok || len(n) != len(o) {
			return []string{fmt.Sprintf("%s: was %v, the tree writes %v", at, old, tree)}
		}
		var out []string
		for i := range o {
			out = append(out, missing(o[i], n[i], fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	case nil:
		switch n := tree.(type) {
		case nil:
			return nil
		case []any:
			if len(n) == 0 {
				return nil
			}
		case map[string]any:
			if len(n) == 0 {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: was null, the tree writes %v", at, tree)}
	default:
		if old != tree {
			return []string{fmt.Sprintf("%s: was %v, the tree writes %v", at, old, tree)}
		}
		return nil
	}
}
