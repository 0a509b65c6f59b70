package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.socket, "socket", api.DefaultSocketPath(), "agent socket (default: $"+api.EnvSocket+", then "+api.DefaultSocket+")")
	fs.BoolVar(&cf.json, "json", false, "print machine-readable JSON")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "give up after this long")
	return cf
}

func (cf *clientFlags) client() *client.Client { return client.New(cf.socket) }

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

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "agent %s: %v\n", cmd, err)
	return 1
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	consistent := fs.Bool("consistent", false, "majority: have the leader confirm its leadership with a quorum first")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
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
		return fail(stderr, "status", err)
	}
	if cf.json {
		printJSON(stdout, st)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	leader := st.Leader
	if leader == "" {
		leader = "(none)"
	}
	fmt.Fprintf(tw, "node\t%s (id %d)\n", st.Node, st.ID)
	fmt.Fprintf(tw, "protocol\t%s\n", st.Protocol)
	fmt.Fprintf(tw, "role\t%s\n", st.Role)
	fmt.Fprintf(tw, "leader\t%s\n", leader)
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
	_ = tw.Flush()
	return 0
}

func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent members", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	ms, err := c.Members(ctx)
	if err != nil {
		return fail(stderr, "members", err)
	}
	if cf.json {
		printJSON(stdout, ms)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tADDRESS\tSTATE\tPHI")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\n", m.Name, m.ID, m.Addr, m.State, m.Phi)
	}
	_ = tw.Flush()
	return 0
}

func runLeader(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent leader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	wait := fs.Duration("wait", 0, "block until the epoch passes -index (default: the current epoch) or this long passes")
	index := fs.Int64("index", -1, "with -wait: the epoch already seen")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
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
		l, err = c.Leader(ctx, idx, *wait)
	}
	if err != nil {
		return fail(stderr, "leader", err)
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

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
		return 2
	}
	ctx, cancel := signalContext(ctx, 0)
	defer cancel()
	c := cf.client()
	defer c.Close()
	w, err := c.Watch(ctx)
	if err != nil {
		return fail(stderr, "watch", err)
	}
	defer w.Close()
	for {
		st, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			return fail(stderr, "watch", err)
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
		fmt.Fprintf(stdout, "%s  %-9s leader=%s epoch=%d\n", time.Now().Format("15:04:05.000"), st.Role, leader, st.Epoch)
	}
}

func runResign(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent resign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
		return 2
	}
	ctx, cancel := signalContext(ctx, cf.timeout)
	defer cancel()
	if err := resignVia(ctx, cf.socket); err != nil {
		return fail(stderr, "resign", err)
	}
	if cf.json {
		printJSON(stdout, api.Resigned{Resigned: true})
		return 0
	}
	fmt.Fprintln(stdout, "resigned: leadership is being handed over")
	return 0
}

func resignVia(ctx context.Context, socket string) error {
	c := client.New(socket)
	defer c.Close()
	return c.Resign(ctx)
}
