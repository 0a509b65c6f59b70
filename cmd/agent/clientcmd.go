package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	socket  string
	json    bool
	timeout time.Duration
	// election is -election, for the commands that act on one election
	// (addElectionFlag); the default election for the others.
	election electionName
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	socketFlag(fs, &cf.socket)
	fs.BoolVar(&cf.json, "json", false, "print machine-readable JSON")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "give up after this long")
	return cf
}

// socketFlag defines -socket on fs, into p. The default shown by -h is
// $CONCLAVE_SOCKET when set, else api.DefaultSocket: the one in force.
func socketFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "socket", api.DefaultSocketPath(), "the `PATH` of the agent's socket ([api] socket); $"+api.EnvSocket+" sets the default")
}

// client returns a client of the agent at -socket that acts on -election.
func (cf *clientFlags) client() *client.Client {
	return client.New(cf.socket).Election(cf.election.String())
}

// electionName is the value of -election: a valid election name, checked
// when the flag is parsed, so a bad one is a usage error (exit 2) that
// never reaches the agent.
type electionName string

func (e *electionName) String() string {
	if e == nil {
		return ""
	}
	return string(*e)
}

func (e *electionName) Set(v string) error {
	if err := api.CheckElectionName(v); err != nil {
		return err
	}
	*e = electionName(v)
	return nil
}

// electionFlag defines -election on fs, into p. Unset, p stays "": the
// client then acts on the default election.
func electionFlag(fs *flag.FlagSet, p *electionName) {
	fs.Var(p, "election", "act on the election called `NAME` (an [elections.NAME] table) instead of the default one ([election]); agent elections lists them")
}

// addElectionFlag adds -election to a command that acts on one election.
func (cf *clientFlags) addElectionFlag(fs *flag.FlagSet) { electionFlag(fs, &cf.election) }

// ofElection is " of election NAME" for a named election, "" for the
// default one, for messages that would otherwise not say which.
func ofElection(name string) string {
	if name == "" || name == api.DefaultElection {
		return ""
	}
	return " of election " + name
}

// signalContext is cancelled with parent, by SIGINT/SIGTERM, or after d
// (0: never).
func signalContext(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	if d <= 0 {
		return ctx, stop
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	return tctx, func() { cancel(); stop() }
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// fail prints err for command cmd with what to do about it, and returns
// the exit code 1.
func fail(stderr io.Writer, cmd, socket string, err error) int {
	fmt.Fprintf(stderr, "agent %s: %s\n", cmd, explain(cmd, socket, err))
	return 1
}

// explain turns a client error into a sentence that says what to do next.
func explain(cmd, socket string, err error) string {
	var ae *client.Error
	switch {
	case errors.As(err, &ae):
		// The agent's own message is prefixed with the request's name
		// ("resign: …"); the command already says it.
		msg := strings.TrimPrefix(ae.Message, cmd+": ")
		return fmt.Sprintf("%s (the agent answered %d %s)", msg, ae.StatusCode, http.StatusText(ae.StatusCode))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("may not open the socket %s: permission denied.\n  %s", socket, socketAccess(socket))
	case errors.Is(err, client.ErrNotSocket):
		// Nothing could answer there, running agent or not: say what the
		// path is, not that an agent stopped.
		if fi, serr := os.Stat(socket); serr == nil && fi.IsDir() {
			return fmt.Sprintf("%s is a directory, not a socket: point -socket at the agent's socket file, e.g. %s (its [api] socket, default data_dir/agent.sock)", socket, filepath.Join(socket, "agent.sock"))
		}
		return fmt.Sprintf("%s is a file but not a socket: point -socket at the agent's socket (its [api] socket, default data_dir/agent.sock)", socket)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("no agent socket at %s: is the agent running? Start one with 'agent run -config FILE', "+
			"or point at its socket with -socket PATH or $%s (its [api] socket, default data_dir/agent.sock)", socket, api.EnvSocket)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing answers on the socket %s: the agent that made it has stopped (start it again), or -socket names another file", socket)
	}
	return err.Error()
}

// socketAccess says who may open socket, and how to become one of them.
func socketAccess(socket string) string {
	fi, err := os.Stat(socket)
	if err != nil {
		return "Run as the agent's user, or as a member of the socket's group."
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "Run as the agent's user, or as a member of the socket's group."
	}
	owner, group := strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return fmt.Sprintf("The socket has mode %04o, owner %s, group %s: run as %s (sudo -u %s agent …) or as a member of group %s "+
		"(the agent's [api] socket_mode decides whether the group may connect).", uint32(fi.Mode().Perm()), owner, group, owner, owner, group)
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	consistent := fs.Bool("consistent", false, "majority: have the leader confirm its leadership with a quorum first")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	get := c.Status
	if *consistent {
		get = c.ConsistentStatus
	}
	st, err := get(ctx)
	if err != nil {
		return fail(stderr, "status", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, st)
		return 0
	}
	printStatus(stdout, st)
	return 0
}

func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("members", stderr)
	cf := addClientFlags(fs)
	verbose := fs.Bool("v", false, "also show each member's heartbeat gaps as this agent received them: p50, p99, p99.9, the longest, and how many (agent tune recommends timings from them)")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	ms, err := c.Members(ctx)
	if err != nil {
		return fail(stderr, "members", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, ms)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !*verbose {
		fmt.Fprintln(tw, "NAME\tID\tADDRESS\tSTATE\tPHI")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\n", m.Name, m.ID, m.Addr, m.State, m.Phi)
		}
		_ = tw.Flush()
		return 0
	}
	fmt.Fprintln(tw, "NAME\tID\tADDRESS\tSTATE\tPHI\tGAP P50\tP99\tP99.9\tMAX\tSAMPLES")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f", m.Name, m.ID, m.Addr, m.State, m.Phi)
		if h := m.Heartbeats; h != nil {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%d\n", fmtMs(h.P50Ms), fmtMs(h.P99Ms), fmtMs(h.P999Ms), fmtMs(h.MaxGapMs), h.Samples)
		} else {
			fmt.Fprintln(tw, "\t-\t-\t-\t-\t0")
		}
	}
	_ = tw.Flush()
	return 0
}

func runLeader(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("leader", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	wait := fs.Duration("wait", 0, "block until a leader is known in an epoch above -index (default: the current epoch), or this long passes")
	index := fs.Int64("index", -1, "with -wait: the epoch already seen")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout+*wait)
	defer cancel()
	c := cf.client()
	defer c.Close()
	l, err := c.Leader(ctx, 0, 0)
	if err == nil && *wait > 0 {
		idx := l.Epoch
		if *index >= 0 {
			idx = uint64(*index)
		}
		l, err = waitLeader(ctx, c, idx, *wait)
	}
	if err != nil {
		return fail(stderr, "leader", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, l)
		return 0
	}
	name := l.Leader
	if name == "" {
		name = "(none)"
	}
	self := ""
	if l.IsSelf {
		self = " (this node)"
	}
	fmt.Fprintf(stdout, "%s epoch %d%s\n", name, l.Epoch, self)
	return 0
}

// waitLeader returns the first leader known in an epoch above index, or,
// when wait passes first, the leader of that moment. It watches rather than
// blocking on the epoch (GET /v1/leader?index=): a new epoch begins with an
// election, before anyone leads it, and "(none) epoch 2" answers nothing.
func waitLeader(ctx context.Context, c *client.Client, index uint64, wait time.Duration) (api.Leader, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	w, err := c.Watch(wctx)
	for err == nil {
		var st api.Status
		if st, err = w.Next(); err == nil && st.Leader != "" && st.Epoch > index {
			w.Close()
			return st.LeaderInfo(), nil
		}
	}
	if w != nil {
		w.Close()
	}
	if wctx.Err() != nil && ctx.Err() == nil {
		return c.Leader(ctx, 0, 0) // waited long enough: say who leads now
	}
	return api.Leader{}, err
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, 0)
	defer cancel()
	c := cf.client()
	defer c.Close()
	w, err := c.Watch(ctx)
	if err != nil {
		return fail(stderr, "watch", cf.socket, err)
	}
	defer w.Close()
	for {
		st, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			return fail(stderr, "watch", cf.socket, err)
		}
		if cf.json {
			b, _ := json.Marshal(st)
			fmt.Fprintln(stdout, string(b))
			continue
		}
		leader := st.Leader
		if leader == "" {
			leader = "(none)"
		}
		line := fmt.Sprintf("%s  %-9s leader=%s epoch=%d", time.Now().Format("15:04:05.000"), st.Role, leader, st.Epoch)
		if st.Election != "" && st.Election != api.DefaultElection {
			line += " election=" + st.Election
		}
		fmt.Fprintln(stdout, line)
	}
}

func runResign(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("resign", stderr)
	cf := addClientFlags(fs)
	cf.addElectionFlag(fs)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	if err := c.Resign(ctx); err != nil {
		return fail(stderr, "resign", cf.socket, err)
	}
	if cf.json {
		printJSON(stdout, api.Resigned{Resigned: true})
		return 0
	}
	fmt.Fprintf(stdout, "resigned: leadership%s is being handed over\n", ofElection(c.ElectionName()))
	return 0
}

func resignVia(ctx context.Context, socket string) error {
	c := client.New(socket)
	defer c.Close()
	return c.Resign(ctx)
}

// printStatus writes the human form of agent status.
func printStatus(w io.Writer, st api.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	leader := st.Leader
	if leader == "" {
		leader = "(none)"
	}
	if st.Election != "" && st.Election != api.DefaultElection {
		fmt.Fprintf(tw, "election\t%s\n", st.Election)
	}
	fmt.Fprintf(tw, "node\t%s (id %d)\n", st.Node, st.ID)
	fmt.Fprintf(tw, "protocol\t%s\n", st.Protocol)
	fmt.Fprintf(tw, "role\t%s\n", st.Role)
	if st.LeaderAgeMS > 0 {
		// An observer is not heartbeated: it reports what gossip told it
		// and how old that is, never more.
		fmt.Fprintf(tw, "leader\t%s (learned by gossip, %dms ago)\n", leader, st.LeaderAgeMS)
	} else {
		fmt.Fprintf(tw, "leader\t%s\n", leader)
	}
	fmt.Fprintf(tw, "epoch\t%d\n", st.Epoch)
	if st.Role == api.RoleLeader && st.LeaseMS > 0 {
		fmt.Fprintf(tw, "lease\t%dms left\n", st.LeaseMS)
	}
	fmt.Fprintf(tw, "members\t%d live\n", st.Members)
	health := "healthy"
	if !st.Quorum.Healthy {
		health = "NOT healthy"
	}
	fmt.Fprintf(tw, "quorum\t%d of %d reachable, %s\n", st.Quorum.Reachable, st.Quorum.Voters, health)
	if st.GossipAddr != "" {
		fmt.Fprintf(tw, "gossip\t%s\n", st.GossipAddr)
	}
	if st.TransportAddr != "" {
		fmt.Fprintf(tw, "libp2p\t%s\n", st.TransportAddr)
	}
	printHealth(tw, st)
	for _, p := range st.Problems.List() {
		fmt.Fprintf(tw, "PROBLEM\t%s\n", p)
	}
	_ = tw.Flush()
}

// fmtMs prints milliseconds as a duration to the millisecond.
func fmtMs(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond).String()
}
