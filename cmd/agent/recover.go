package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/protocols"
	"github.com/conclave-agent/conclave/store"
)

// runRecover is `agent recover`: the offline way out of a permanent loss of
// the quorum (raft's peers.json, etcd's --force-new-cluster). Run on each
// survivor's data directory while its agent is stopped, it replaces the
// voter configuration with the given voters, marked committed, and raises
// the term (the fencing epoch) past anything this node has seen, so that
// tokens from before stay below every token after.
func runRecover(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("recover", stderr)
	path := fs.String("config", "", "the stopped agent's TOML configuration (its node.data_dir is rewritten)")
	dataDir := fs.String("data-dir", "", "the data directory to rewrite, instead of -config")
	votersFlag := fs.String("voters", "", "the new voters, comma-separated: the survivors, e.g. n3,n4,n5 (required)")
	minTerm := fs.Uint64("term", 0, "set the term to at least this (give every survivor the same value: the highest term 'agent recover' printed on any of them)")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	dir, name := *dataDir, ""
	switch {
	case (*path == "") == (*dataDir == ""):
		fmt.Fprintln(stderr, "agent recover: give exactly one of -config FILE and -data-dir DIR")
		return 2
	case *path != "":
		cfg, err := config.Load(*path)
		if err != nil {
			fmt.Fprintf(stderr, "agent recover: %v\n", err)
			return 2
		}
		if cfg.Election.Protocol != config.ProtocolMajority {
			fmt.Fprintf(stderr, "agent recover: %s runs protocol %q, which has no voter set to recover; only majority has one\n", *path, cfg.Election.Protocol)
			return 2
		}
		dir, name = cfg.Node.DataDir, cfg.Node.Name
	}
	var voters []string
	for v := range strings.SplitSeq(*votersFlag, ",") {
		if v = strings.TrimSpace(v); v != "" {
			voters = append(voters, v)
		}
	}
	if len(voters) == 0 {
		fmt.Fprintln(stderr, "agent recover: -voters is required: the members that survive, e.g. -voters n3,n4,n5")
		return 2
	}
	if err := recoverDir(dir, name, voters, *minTerm, stdout); err != nil {
		fmt.Fprintf(stderr, "agent recover: %v\n", err)
		return 1
	}
	return 0
}

// recoverDir rewrites the state in dir. It holds the data directory's lock
// throughout, so it refuses while the agent runs.
func recoverDir(dir, name string, voters []string, minTerm uint64, out io.Writer) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("no data directory at %s: recover rewrites an existing agent's data", dir)
	}
	lock, err := store.LockDir(dir)
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("%w; stop that agent first: recover works only on a stopped agent's data", err)
		}
		return err
	}
	defer func() { _ = lock.Unlock() }()
	st, err := store.Open(dir)
	if err != nil {
		return err
	}
	old, err := st.Load()
	if err != nil {
		return err
	}
	seen := max(old.Term, old.Epoch)
	if seen >= protocols.Ceiling || minTerm > protocols.Ceiling {
		return fmt.Errorf("term %d leaves no room below the ceiling %d", max(seen, minTerm), protocols.Ceiling)
	}
	term := max(seen+1, minTerm)
	conf, err := protocols.NewConfiguration(term, old.Config.Index+1, voters)
	if err != nil {
		return fmt.Errorf("-voters: %w", err)
	}
	next := protocols.HardState{Term: term, Epoch: term, Config: conf, ConfigCommitted: true}
	if err := st.Save(next); err != nil {
		return err
	}
	who := dir
	if name != "" {
		who = fmt.Sprintf("%s (data directory %s)", name, dir)
	}
	fmt.Fprintf(out, "recovered %s:\n", who)
	fmt.Fprintf(out, "  term and epoch %d → %d\n", seen, term)
	if old.Config.IsZero() {
		fmt.Fprintf(out, "  voters (none recorded) → %s (index %d, committed)\n", strings.Join(conf.VoterList(), " "), conf.Index)
	} else {
		fmt.Fprintf(out, "  voters %s (index %d) → %s (index %d, committed)\n", strings.Join(old.Config.VoterList(), " "), old.Config.Index, strings.Join(conf.VoterList(), " "), conf.Index)
	}
	if name != "" && !slices.Contains(conf.VoterList(), name) {
		fmt.Fprintf(out, "  note: %s is not among the new voters; it will start as an observer\n", name)
	}
	var lost []string
	for _, v := range old.Config.VoterList() {
		if !conf.Has(v) {
			lost = append(lost, v)
		}
	}
	fmt.Fprintf(out, "Run it on every other survivor with the same -voters and -term %d (or the highest term another printed), then start them.\n", term)
	fmt.Fprintln(out, "UNSAFE if a member left out of -voters comes back with its old data: it still holds the old voter set")
	if len(lost) > 0 {
		fmt.Fprintf(out, "and could elect a second leader with the other lost members. Before starting %s again, delete the data directory.\n", strings.Join(lost, " or "))
	} else {
		fmt.Fprintln(out, "and could elect a second leader with the other lost members. Delete their data directories before starting them again.")
	}
	return nil
}
