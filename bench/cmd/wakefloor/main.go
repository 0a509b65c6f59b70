// Command wakefloor measures the floor under an idle agent's CPU on this
// machine: the cost of a bare Go process that the network wakes as often
// as an agent's heartbeats do, with no libp2p, no Noise and no election
// logic. It starts, as child processes, a "leader" that sends a 16-byte
// message to each of N "followers" every interval over plain TCP on
// loopback, each follower echoing it back — the message pattern of an idle
// majority cluster at the default 50 ms heartbeat — and reports each
// process's CPU (user + system, /proc/PID/stat) over the window.
//
// With -gossip lan every child also runs a stock memberlist node (the LAN
// preset, compression off as the agent sets it), all of them in one
// memberlist cluster, and -observers adds processes that run only such a
// node: what an agent's gossip costs before the agent adds anything.
//
//	cd bench && go run ./cmd/wakefloor                  # 4 followers, 50 ms, 30 s
//	cd bench && go run ./cmd/wakefloor -followers 1 -window 20s
//	cd bench && go run ./cmd/wakefloor -gossip lan -observers 2
//	cd bench && go run ./cmd/wakefloor -gossip lan -libp2p  # over libp2p streams
//	cd bench && go run ./cmd/wakefloor -gossip lan -noise   # over Noise, no muxer
//
// With -hold it measures nothing: it prints each child's role and pid as
// JSON lines, then "ready", and keeps them running until its standard
// input closes; the bench's floor part (bench/floor.go) samples them side
// by side with the agents it judges.
//
// With WAKEFLOOR_TRACE_DIR=DIR every child writes a Go execution trace of
// its life to DIR/ROLE-PID.trace, for cmd/wakes to set beside an agent's.
//
// Children run with GOMAXPROCS=1, as `agent run` does. The figures and
// what they say about the idle targets are in docs/benchmarks/analysis.md.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

const msgSize = 16

// config is what the parent was asked to start.
type config struct {
	followers, observers int
	interval             time.Duration
	answerEvery          int
	network              string // tcp or udp
	gossip               string // "" (none) or lan
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "wakefloor child:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.IntVar(&c.followers, "followers", 4, "followers the leader sends to")
	flag.DurationVar(&c.interval, "interval", 50*time.Millisecond, "how often the leader sends to each follower")
	udp := flag.Bool("udp", false, "send datagrams over UDP instead of a TCP stream")
	overLibp2p := flag.Bool("libp2p", false, "send over go-libp2p streams (TCP, Noise, yamux) instead of a plain TCP stream")
	overNoise := flag.Bool("noise", false, "send over a TCP connection secured with libp2p's Noise, without a stream multiplexer")
	flag.IntVar(&c.answerEvery, "answer-every", 1, "followers echo every Nth message only")
	flag.StringVar(&c.gossip, "gossip", "", `"lan": every child also runs a memberlist node (LAN preset), all in one cluster`)
	flag.IntVar(&c.observers, "observers", 0, "processes that run only a memberlist node (needs -gossip lan)")
	window := flag.Duration("window", 30*time.Second, "measurement window")
	settle := flag.Duration("settle", 3*time.Second, "pause before the window")
	hold := flag.Bool("hold", false, "print the children's roles and pids, then keep them running until standard input closes")
	flag.Parse()
	c.network = "tcp"
	if *udp {
		c.network = "udp"
	}
	if (*udp && *overLibp2p) || (*udp && *overNoise) || (*overLibp2p && *overNoise) {
		log.Fatal("wakefloor: -udp, -libp2p and -noise exclude each other")
	}
	if *overLibp2p {
		c.network = "libp2p"
	}
	if *overNoise {
		c.network = "noise"
	}
	if c.gossip != "" && c.gossip != "lan" {
		fmt.Fprintf(os.Stderr, "wakefloor: -gossip %q: want lan or nothing\n", c.gossip)
		os.Exit(2)
	}
	if c.observers > 0 && c.gossip == "" {
		fmt.Fprintln(os.Stderr, "wakefloor: -observers needs -gossip lan (an observer is only a memberlist node)")
		os.Exit(2)
	}
	if err := run(c, *window, *settle, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "wakefloor:", err)
		os.Exit(1)
	}
}

// proc is one child process.
type proc struct {
	role  string
	cmd   *exec.Cmd
	out   *bufio.Reader
	stdin io.WriteCloser // closing it ends the child
}

// procLine is what -hold prints per child.
type procLine struct {
	Role string `json:"role"`
	PID  int    `json:"pid"`
}

func run(c config, window, settle time.Duration, hold bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stdin.Close()
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	members := 0
	if c.gossip != "" {
		members = 1 + c.followers + c.observers
	}
	join := ""
	// start starts a child and reads the line it prints once listening:
	// its echo address (or "-") and its memberlist address (or "-").
	start := func(role string, args ...string) (echoAddr string, err error) {
		args = append([]string{"-child", "-role", role, "-gossip", c.gossip, "-join", join, "-members", strconv.Itoa(members)}, args...)
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return "", err
		}
		if err := cmd.Start(); err != nil {
			return "", err
		}
		p := &proc{role: role, cmd: cmd, out: bufio.NewReader(out), stdin: stdin}
		procs = append(procs, p)
		line, err := p.out.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("%s: read its addresses: %w", role, err)
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return "", fmt.Errorf("%s: want two addresses, got %q", role, line)
		}
		if join == "" && f[1] != "-" {
			join = f[1]
		}
		return f[0], nil
	}
	var addrs []string
	for range c.followers {
		a, err := start("follower", "-every", strconv.Itoa(c.answerEvery), "-net", c.network)
		if err != nil {
			return fmt.Errorf("start follower: %w", err)
		}
		addrs = append(addrs, a)
	}
	for range c.observers {
		if _, err := start("observer"); err != nil {
			return fmt.Errorf("start observer: %w", err)
		}
	}
	if _, err := start("leader", "-interval", c.interval.String(), "-peers", strings.Join(addrs, ","), "-net", c.network); err != nil {
		return fmt.Errorf("start leader: %w", err)
	}
	if members > 0 {
		// Each child prints "joined" once its memberlist lists everyone.
		for _, p := range procs {
			line, err := p.out.ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "joined" {
				return fmt.Errorf("%s (pid %d): memberlist did not list all %d members: %q %v", p.role, p.cmd.Process.Pid, members, line, err)
			}
		}
	}
	if hold {
		enc := json.NewEncoder(os.Stdout)
		for _, p := range procs {
			if err := enc.Encode(procLine{Role: p.role, PID: p.cmd.Process.Pid}); err != nil {
				return err
			}
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	}
	time.Sleep(settle)
	before := make([]time.Duration, len(procs))
	for i, p := range procs {
		if before[i], err = cpuOf(p.cmd.Process.Pid); err != nil {
			return err
		}
	}
	load := loadAvg()
	time.Sleep(window)
	gossip := "no memberlist"
	if c.gossip != "" {
		gossip = fmt.Sprintf("memberlist %s in each, %d observers", c.gossip, c.observers)
	}
	fmt.Printf("%s: %d followers, a message to each every %v answered every %d, %s, %v window, load %s → %s\n", c.network, c.followers, c.interval, c.answerEvery, gossip, window, load, loadAvg())
	for i, p := range procs {
		after, err := cpuOf(p.cmd.Process.Pid)
		if err != nil {
			return err
		}
		fmt.Printf("%-8s %.2f %% of a core\n", p.role, 100*float64(after-before[i])/float64(window))
	}
	return nil
}

// cpuOf is utime + stime of pid.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	// The command name may hold spaces; fields count from after its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat of %d: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat of %d: %w", pid, err)
	}
	const clockTick = 10 * time.Millisecond // USER_HZ = 100 on Linux
	return time.Duration(utime+stime) * clockTick, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// child is one process of the pattern. It prints its echo address and its
// memberlist address ("-" for none) on one line, then "joined" once its
// memberlist lists every member, and runs until its standard input closes
// (the parent is gone) or its role fails.
// traceEnv names a directory: with it set, every child writes a Go
// execution trace of its life to ROLE-PID.trace there, to compare with an
// agent's (CONCLAVE_TRACE) in bench/cmd/wakes.
const traceEnv = "WAKEFLOOR_TRACE_DIR"

// startTrace starts the child's execution trace; stop flushes it.
func startTrace(dir, role string) (stop func(), err error) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.trace", role, os.Getpid())))
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() { trace.Stop(); _ = f.Close() }, nil
}

func child(args []string) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	role := fs.String("role", "", "follower, observer or leader")
	gossip := fs.String("gossip", "", "lan: run a memberlist node")
	join := fs.String("join", "", "a memberlist address to join")
	members := fs.Int("members", 0, "memberlist members to wait for")
	every := fs.Int("every", 1, "follower: echo every Nth message")
	network := fs.String("net", "tcp", "tcp, udp, libp2p or noise")
	interval := fs.Duration("interval", 50*time.Millisecond, "leader: send interval")
	peers := fs.String("peers", "", "leader: the followers' addresses")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if dir := os.Getenv(traceEnv); dir != "" {
		stop, err := startTrace(dir, *role)
		if err != nil {
			return err
		}
		defer stop()
	}
	gone := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		gone <- nil
	}()
	echo := "-"
	var serve func() error
	switch *role {
	case "follower":
		if *every < 1 {
			return fmt.Errorf("echo every %d: want a positive count", *every)
		}
		listen := listenEcho
		switch *network {
		case "libp2p":
			listen = func(_ string, every int) (string, func() error, error) { return listenEchoLibp2p(every) }
		case "noise":
			listen = func(_ string, every int) (string, func() error, error) { return listenEchoNoise(every) }
		}
		addr, s, err := listen(*network, *every)
		if err != nil {
			return err
		}
		echo, serve = addr, s
	case "leader":
		serve = func() error {
			switch *network {
			case "libp2p":
				return leadLibp2p(*interval, strings.Split(*peers, ","))
			case "noise":
				return leadNoise(*interval, strings.Split(*peers, ","))
			}
			return lead(*network, *interval, strings.Split(*peers, ","))
		}
	case "observer":
	default:
		return fmt.Errorf("unknown role %q", *role)
	}
	gaddr := "-"
	var ml *memberlist.Memberlist
	if *gossip == "lan" {
		var err error
		if ml, err = startMemberlist(*join); err != nil {
			return err
		}
		defer func() { _ = ml.Shutdown() }()
		n := ml.LocalNode()
		gaddr = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	}
	fmt.Println(echo, gaddr)
	if serve != nil {
		go func() { gone <- serve() }()
	}
	if ml != nil {
		go func() {
			for ml.NumMembers() < *members {
				time.Sleep(100 * time.Millisecond)
			}
			fmt.Println("joined")
		}()
	}
	return <-gone
}

// startMemberlist starts a stock LAN node on a free loopback port and
// joins addr (when set).
func startMemberlist(join string) (*memberlist.Memberlist, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = fmt.Sprintf("floor-%d", os.Getpid())
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	// The agent turns compression off (membership/config.go): the floor
	// pays what the agent's memberlist pays, no more.
	mc.EnableCompression = false
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("memberlist: %w", err)
	}
	if join != "" {
		if _, err := ml.Join([]string{join}); err != nil {
			_ = ml.Shutdown()
			return nil, fmt.Errorf("memberlist: join %s: %w", join, err)
		}
	}
	return ml, nil
}

// listenEcho listens on a loopback port and returns its address and the
// loop that echoes every Nth message.
func listenEcho(network string, every int) (string, func() error, error) {
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		return pc.LocalAddr().String(), func() error { return echoDatagrams(pc, every) }, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return ln.Addr().String(), func() error {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		return echo(c, every)
	}, nil
}

// echo answers every Nth message read from c until c ends.
func echo(c io.ReadWriter, every int) error {
	buf := make([]byte, msgSize)
	for n := 1; ; n++ {
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil
		}
		if n%every != 0 {
			continue
		}
		if _, err := c.Write(buf); err != nil {
			return nil
		}
	}
}

// lead sends a message to every peer each interval and reads their echoes.
func lead(network string, interval time.Duration, peers []string) error {
	var conns []io.ReadWriter
	for _, a := range peers {
		c, err := net.Dial(network, a)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return drive(conns, interval)
}

// drive is the leader's pattern over open connections: a message to each
// every interval, and a reader per connection that takes the echoes.
func drive(conns []io.ReadWriter, interval time.Duration) error {
	for _, c := range conns {
		go func() {
			buf := make([]byte, msgSize)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
			}
		}()
	}
	msg := make([]byte, msgSize)
	for range time.Tick(interval) {
		for _, c := range conns {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// echoDatagrams answers every Nth datagram to its sender.
func echoDatagrams(pc net.PacketConn, every int) error {
	buf := make([]byte, msgSize)
	for n := 1; ; n++ {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return nil
		}
		if n%every != 0 {
			continue
		}
		if _, err := pc.WriteTo(buf, from); err != nil {
			return nil
		}
	}
}
