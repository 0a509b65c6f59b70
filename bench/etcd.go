package main

// The etcd side of the failover comparison: a 3-member etcd cluster on
// loopback (each member its own process, `bench etcd-node`), campaigners
// that use etcd's election recipe from client/v3/concurrency (each its own
// process, `bench etcd-campaign`), and the orchestration that SIGKILLs the
// leading campaigner (or the raft leader member) and times the failover.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// init registers the etcd child roles as bench subcommands.
func init() {
	subcommands["etcd-node"] = runEtcdNode
	subcommands["etcd-campaign"] = runEtcdCampaign
}

// etcdElectionPrefix is the key prefix the campaigners run their election on.
const etcdElectionPrefix = "/conclave-bench/election/"

// Bounds on the orchestration's waits. A failover wait adds the session TTL.
const (
	etcdStartTimeout    = 60 * time.Second // cluster healthy after start
	etcdStableTimeout   = 30 * time.Second // all campaigners agree, all queued
	etcdFailoverTimeout = 30 * time.Second // plus the TTL
	etcdKillTimeout     = 10 * time.Second // a SIGKILLed process reaped
	etcdRPCTimeout      = 2 * time.Second  // one health or count request
	etcdRaftPoll        = 5 * time.Millisecond
	etcdDefaultTTL      = 60 * time.Second       // concurrency's default session TTL
	etcdLeaseCheck      = 500 * time.Millisecond // etcd's lessor looks for expired leases this often
)

// etcdOptions configures one etcd failover measurement.
type etcdOptions struct {
	// WorkDir holds the members' data and every child's log (in a
	// subdirectory per measurement). Empty: a temporary directory, removed
	// afterwards.
	WorkDir string
	// TTL is the campaigners' session (lease) TTL, rounded up to whole
	// seconds; 0 leaves concurrency's own default (60 s).
	TTL time.Duration
	// Trials is how many failovers to measure (default 1).
	Trials int
	// Campaigners is how many campaigner processes run (default 3).
	Campaigners int
	// Log reports progress; nil discards it.
	Log func(format string, args ...any)
	// Heartbeat is the members' raft heartbeat interval; 0 leaves etcd's
	// default (100 ms).
	Heartbeat time.Duration
}

// withDefaults fills in the zero fields of o.
func (o etcdOptions) withDefaults() etcdOptions {
	if o.Trials <= 0 {
		o.Trials = 1
	}
	if o.Campaigners <= 0 {
		o.Campaigners = 3
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// ttlSeconds is the session TTL in whole seconds as concurrency.WithTTL
// takes it (0 for concurrency's default).
func (o etcdOptions) ttlSeconds() int {
	return int((o.TTL + time.Second - 1) / time.Second)
}

// effectiveTTL is the session TTL the campaigners actually get.
func (o etcdOptions) effectiveTTL() time.Duration {
	if o.TTL <= 0 {
		return etcdDefaultTTL
	}
	return time.Duration(o.ttlSeconds()) * time.Second
}

// etcdCommand builds the command that runs this binary as one of its
// internal subcommands. Tests replace it to run the test binary instead.
var etcdCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("etcd: find own executable: %w", err)
	}
	return exec.Command(exe, args...), nil
}

// ---------------------------------------------------------------------------
// Child processes.

// exitOnStdinEOF cancels when standard input reaches EOF: the parent holds
// the pipe's other end, so EOF means the parent is gone and the child must
// not outlive it.
func exitOnStdinEOF(cancel context.CancelFunc) {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
}

// runEtcdNode is the `etcd-node` subcommand: one embedded etcd member in the
// foreground until SIGINT/SIGTERM, the end of standard input (with
// -watch-stdin) or a fatal server error.
func runEtcdNode(args []string) error {
	fs := flag.NewFlagSet("etcd-node", flag.ContinueOnError)
	name := fs.String("name", "", "member name (must appear in -initial-cluster)")
	dataDir := fs.String("data-dir", "", "data directory")
	clientURL := fs.String("client-url", "", "client URL to listen on and advertise, http://127.0.0.1:PORT")
	peerURL := fs.String("peer-url", "", "peer URL to listen on and advertise, http://127.0.0.1:PORT")
	cluster := fs.String("initial-cluster", "", "NAME=PEERURL,… for all members")
	logLevel := fs.String("log-level", "warn", "etcd log level (logs go to stderr)")
	heartbeat := fs.Duration("heartbeat-interval", 0, "raft heartbeat interval (0: etcd's default, 100ms)")
	watchStdin := fs.Bool("watch-stdin", false, "exit when standard input closes (the parent is gone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || *dataDir == "" || *clientURL == "" || *peerURL == "" || *cluster == "" {
		return errors.New("etcd: -name, -data-dir, -client-url, -peer-url and -initial-cluster are required")
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("etcd: -client-url: %w", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("etcd: -peer-url: %w", err)
	}

	cfg := embed.NewConfig() // etcd's defaults: heartbeat 100 ms, election 1000 ms
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = *cluster
	cfg.InitialClusterToken = "conclave-bench"
	cfg.ClusterState = embed.ClusterStateFlagNew // ignored when the data dir has a WAL
	cfg.LogLevel = *logLevel
	if *heartbeat > 0 {
		// etcd wants the election timeout at least 5 heartbeats; its
		// default 1000 ms holds that down to 200 ms heartbeats.
		cfg.TickMs = uint(*heartbeat / time.Millisecond)
	}
	cfg.LogOutputs = []string{"stderr"}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *watchStdin {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		exitOnStdinEOF(cancel)
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd: start member %s: %w", *name, err)
	}
	defer closeEtcd(e)
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: member %s: %w", *name, err)
	case <-ctx.Done():
		return nil
	}
}

// closeEtcd stops an embedded member, giving up after a few seconds (the
// process is about to exit anyway).
func closeEtcd(e *embed.Etcd) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// etcdObservation is one line of an `etcd-campaign` child's stdout: the
// leader value its Election.Observe loop received, or its own election.
type etcdObservation struct {
	// Name is the campaigner that saw it.
	Name string `json:"name"`
	// Leader is the observed leader's value (its campaigner name); empty on
	// an "elected" line.
	Leader string `json:"leader,omitempty"`
	// Rev is the create revision of the observed leader key.
	Rev int64 `json:"rev,omitempty"`
	// Elected is set on the line that says Campaign returned for Name.
	Elected bool `json:"elected,omitempty"`
	// UnixNano is the campaigner's local wall-clock time of receipt.
	UnixNano int64 `json:"t"`
}

// runEtcdCampaign is the `etcd-campaign` subcommand: a session with the given
// TTL, Election.Campaign with its own name as the value, and an
// Election.Observe loop that prints one JSON line (etcdObservation) per
// observed leader value. It runs until killed, interrupted or its session is
// lost.
func runEtcdCampaign(args []string) error {
	fs := flag.NewFlagSet("etcd-campaign", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "", "comma-separated etcd client URLs")
	name := fs.String("name", "", "campaigner name, also the value it campaigns with")
	ttl := fs.Int("ttl", 0, "session TTL in seconds (0: concurrency's default, 60)")
	prefix := fs.String("prefix", etcdElectionPrefix, "election key prefix")
	watchStdin := fs.Bool("watch-stdin", false, "exit when standard input closes (the parent is gone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoints == "" || *name == "" {
		return errors.New("etcd: -endpoints and -name are required")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *watchStdin {
		exitOnStdinEOF(cancel)
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("etcd: campaigner %s: client: %w", *name, err)
	}
	defer cli.Close()
	opts := []concurrency.SessionOption{concurrency.WithContext(ctx)}
	if *ttl > 0 {
		opts = append(opts, concurrency.WithTTL(*ttl))
	}
	s, err := concurrency.NewSession(cli, opts...)
	if err != nil {
		return fmt.Errorf("etcd: campaigner %s: session: %w", *name, err)
	}
	defer s.Orphan() // a clean exit lets the lease expire like a crash would
	e := concurrency.NewElection(s, *prefix)

	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout) // one Write per line, unbuffered
	emit := func(o etcdObservation) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(o)
	}

	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		for resp := range e.Observe(ctx) {
			now := time.Now().UnixNano()
			if len(resp.Kvs) == 0 {
				continue
			}
			emit(etcdObservation{Name: *name, Leader: string(resp.Kvs[0].Value),
				Rev: resp.Kvs[0].CreateRevision, UnixNano: now})
		}
	}()
	campaignErr := make(chan error, 1)
	go func() { campaignErr <- e.Campaign(ctx, *name) }()

	for {
		select {
		case err := <-campaignErr:
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("etcd: campaigner %s: campaign: %w", *name, err)
			}
			emit(etcdObservation{Name: *name, Elected: true, UnixNano: time.Now().UnixNano()})
			campaignErr = nil
		case <-s.Done():
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("etcd: campaigner %s: session lost", *name)
		case <-obsDone:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("etcd: campaigner %s: observe loop ended", *name)
		case <-ctx.Done():
			return nil
		}
	}
}

// ---------------------------------------------------------------------------
// Orchestration.

// etcdProc is one child process of the orchestration.
type etcdProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open; the child exits when it closes
	done  chan struct{}  // closed once Wait returned
	err   error          // Wait's result, set before done closes
}

// startEtcdProc starts this binary as subcommand args[0], appending its
// stderr to logPath and sending its stdout to stdout (nil: discarded).
func startEtcdProc(name, logPath string, stdout io.Writer, args ...string) (*etcdProc, error) {
	cmd, err := etcdCommand(args...)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("etcd: open log of %s: %w", name, err)
	}
	defer logf.Close() // the child has its own copy
	cmd.Stderr = logf
	cmd.Stdout = stdout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("etcd: stdin pipe of %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcd: start %s: %w", name, err)
	}
	p := &etcdProc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited (and been reaped).
func (p *etcdProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and waits until it is reaped.
func (p *etcdProc) kill() error {
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Kill() // fails only if it already exited
	select {
	case <-p.done:
		return nil
	case <-time.After(etcdKillTimeout):
		return fmt.Errorf("etcd: %s (pid %d) not reaped %s after SIGKILL", p.name, p.cmd.Process.Pid, etcdKillTimeout)
	}
}

// etcdMember is one member of the bench's etcd cluster.
type etcdMember struct {
	name      string
	dataDir   string
	logPath   string
	clientURL string
	peerURL   string
	proc      *etcdProc
	cli       *clientv3.Client // this member alone, for Status
}

// etcdCluster is a running 3-member etcd cluster on loopback.
type etcdCluster struct {
	dir       string
	cluster   string        // the -initial-cluster value
	heartbeat time.Duration // 0: etcd's default
	members   []*etcdMember
	cli       *clientv3.Client // all members
	tmpDir    string           // removed on close, if we made it
}

// freeLoopbackPorts returns n TCP ports that were free on 127.0.0.1 a moment ago.
func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcd: find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startEtcdCluster starts three members in WorkDir/kind and waits until they
// agree on a raft leader and accept a write. On error nothing is left running.
func startEtcdCluster(ctx context.Context, o etcdOptions, kind string) (_ *etcdCluster, err error) {
	c := &etcdCluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	base := o.WorkDir
	if base == "" {
		if base, err = os.MkdirTemp("", "bench-etcd-"); err != nil {
			return nil, fmt.Errorf("etcd: work dir: %w", err)
		}
		c.tmpDir = base
	}
	c.dir = filepath.Join(base, kind)
	c.heartbeat = o.Heartbeat
	if err := os.RemoveAll(c.dir); err != nil {
		return nil, fmt.Errorf("etcd: clear %s: %w", c.dir, err)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("etcd: work dir: %w", err)
	}
	ports, err := freeLoopbackPorts(6)
	if err != nil {
		return nil, err
	}
	var peers, endpoints []string
	for i := range 3 {
		m := &etcdMember{
			name:      fmt.Sprintf("n%d", i),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		m.dataDir = filepath.Join(c.dir, m.name+".data")
		m.logPath = filepath.Join(c.dir, m.name+".log")
		c.members = append(c.members, m)
		peers = append(peers, m.name+"="+m.peerURL)
		endpoints = append(endpoints, m.clientURL)
	}
	c.cluster = strings.Join(peers, ",")
	for _, m := range c.members {
		if err := c.startMember(m); err != nil {
			return nil, err
		}
	}
	c.cli, err = newEtcdClient(endpoints...)
	if err != nil {
		return nil, err
	}
	o.Log("etcd: started 3 members in %s, waiting for a raft leader", c.dir)
	if _, err := c.waitRaftLeader(ctx, etcdStartTimeout, c.members); err != nil {
		return nil, fmt.Errorf("etcd: cluster not healthy: %w", err)
	}
	if err := c.rpc(ctx, func(ctx context.Context) error {
		_, err := c.cli.Put(ctx, "/conclave-bench/health", "ok")
		return err
	}); err != nil {
		return nil, fmt.Errorf("etcd: first write: %w", err)
	}
	return c, nil
}

// newEtcdClient returns a quiet client for the given endpoints.
func newEtcdClient(endpoints ...string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client for %v: %w", endpoints, err)
	}
	return cli, nil
}

// startMember starts (or restarts, on its existing data dir) member m, with
// a fresh single-endpoint client for it.
func (c *etcdCluster) startMember(m *etcdMember) error {
	p, err := startEtcdProc(m.name, m.logPath, nil, "etcd-node",
		"-name", m.name, "-data-dir", m.dataDir,
		"-client-url", m.clientURL, "-peer-url", m.peerURL,
		"-initial-cluster", c.cluster, "-watch-stdin",
		"-heartbeat-interval", c.heartbeat.String())
	if err != nil {
		return err
	}
	m.proc = p
	if m.cli != nil {
		m.cli.Close()
	}
	// A fresh connection, so a restarted member is not behind gRPC's
	// reconnect backoff.
	m.cli, err = newEtcdClient(m.clientURL)
	return err
}

// rpc runs f with the per-request timeout.
func (c *etcdCluster) rpc(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, etcdRPCTimeout)
	defer cancel()
	return f(ctx)
}

// status asks member m alone for its raft status.
func (m *etcdMember) status(ctx context.Context, timeout time.Duration) (*pb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The raw gRPC client: clientv3's Maintenance.Status dials a new
	// connection per call, too slow to poll every few milliseconds.
	return pb.NewMaintenanceClient(m.cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
}

// waitRaftLeader waits until every member in ms answers Status and they all
// name the same raft leader, and returns that leader's member ID.
func (c *etcdCluster) waitRaftLeader(ctx context.Context, timeout time.Duration, ms []*etcdMember) (uint64, error) {
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		leader, why := uint64(0), ""
		for _, m := range ms {
			if m.proc.exited() {
				return 0, fmt.Errorf("member %s exited (%v); see %s", m.name, m.proc.err, m.logPath)
			}
			st, err := m.status(ctx, 500*time.Millisecond)
			switch {
			case err != nil:
				why = fmt.Sprintf("%s: %v", m.name, err)
			case st.Leader == 0:
				why = m.name + " has no leader"
			case leader != 0 && st.Leader != leader:
				why = "members disagree on the leader"
			default:
				leader = st.Leader
				continue
			}
			break
		}
		if why == "" {
			return leader, nil
		}
		last = why
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no agreed raft leader after %s (last: %s)", timeout, last)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("etcd: waiting for a raft leader: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// close kills every member, closes the clients and removes the data
// directories (logs stay, unless the work dir was a temporary one).
func (c *etcdCluster) close() {
	if c.cli != nil {
		c.cli.Close()
	}
	for _, m := range c.members {
		_ = m.proc.kill()
		if m.cli != nil {
			m.cli.Close()
		}
		_ = os.RemoveAll(m.dataDir)
	}
	if c.tmpDir != "" {
		_ = os.RemoveAll(c.tmpDir)
	}
}

// etcdCampaigner is one `etcd-campaign` child and what it has printed.
type etcdCampaigner struct {
	name    string
	logPath string
	proc    *etcdProc
	notify  chan<- struct{} // poked on every parsed line

	mu  sync.Mutex
	obs []etcdObservation // this incarnation's observations, in order
	buf []byte            // partial stdout line
}

// Write collects the child's stdout and parses each complete JSON line
// (other lines are ignored). exec calls it from a single goroutine.
func (c *etcdCampaigner) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		var o etcdObservation
		if json.Unmarshal(c.buf[:i], &o) == nil && o.UnixNano != 0 {
			c.mu.Lock()
			c.obs = append(c.obs, o)
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
		c.buf = c.buf[i+1:]
	}
}

// current returns the last leader value this campaigner observed ("" if none).
func (c *etcdCampaigner) current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.obs) - 1; i >= 0; i-- {
		if !c.obs[i].Elected {
			return c.obs[i].Leader
		}
	}
	return ""
}

// sawSince reports whether this campaigner's latest observed leader is
// leader, seen at or after t0, and when it first saw it in that final run.
func (c *etcdCampaigner) sawSince(leader string, t0 time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for i := len(c.obs) - 1; i >= 0; i-- {
		o := c.obs[i]
		if o.Elected {
			continue
		}
		if o.Leader != leader {
			break
		}
		first = time.Unix(0, o.UnixNano)
	}
	if first.IsZero() || first.Before(t0) {
		return time.Time{}, false
	}
	return first, true
}

// etcdCampaign is the set of campaigners on one cluster.
type etcdCampaign struct {
	o       etcdOptions
	cluster *etcdCluster
	camps   []*etcdCampaigner
	notify  chan struct{}
}

// start (re)starts campaigner cp with an empty observation history.
func (e *etcdCampaign) start(cp *etcdCampaigner) error {
	var eps []string
	for _, m := range e.cluster.members {
		eps = append(eps, m.clientURL)
	}
	cp.mu.Lock()
	cp.obs, cp.buf = nil, nil
	cp.mu.Unlock()
	p, err := startEtcdProc(cp.name, cp.logPath, cp, "etcd-campaign",
		"-endpoints", strings.Join(eps, ","), "-name", cp.name,
		"-ttl", strconv.Itoa(e.o.ttlSeconds()), "-prefix", etcdElectionPrefix, "-watch-stdin")
	if err != nil {
		return err
	}
	cp.proc = p
	return nil
}

// close kills every campaigner.
func (e *etcdCampaign) close() {
	for _, cp := range e.camps {
		if cp.proc != nil {
			_ = cp.proc.kill()
		}
	}
}

// wait polls cond after every campaigner line (and every 50 ms) until it
// returns true, a campaigner other than except dies, ctx ends or timeout
// passes; what names the wait in errors.
func (e *etcdCampaign) wait(ctx context.Context, timeout time.Duration, what string, except *etcdCampaigner, cond func() (bool, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, cp := range e.camps {
			if cp != except && cp.proc.exited() {
				return fmt.Errorf("etcd: %s: campaigner %s exited (%v); see %s", what, cp.name, cp.proc.err, cp.logPath)
			}
		}
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("etcd: %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd: %s: %w", what, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("etcd: %s: not done after %s", what, timeout)
		case <-e.notify:
		case <-tick.C:
		}
	}
}

// queued counts the campaigners' keys under the election prefix.
func (e *etcdCampaign) queued(ctx context.Context) (int64, error) {
	var n int64
	err := e.cluster.rpc(ctx, func(ctx context.Context) error {
		resp, err := e.cluster.cli.Get(ctx, etcdElectionPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil {
			n = resp.Count
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("count election keys: %w", err)
	}
	return n, nil
}

// waitStable waits until every campaigner is queued (one key each) and all
// observe the same leader, one of them, and returns that leader.
func (e *etcdCampaign) waitStable(ctx context.Context) (*etcdCampaigner, error) {
	var leader *etcdCampaigner
	err := e.wait(ctx, etcdStableTimeout, "waiting for a stable leader", nil, func() (bool, error) {
		leader = nil
		want := e.camps[0].current()
		for _, cp := range e.camps {
			if cp.current() != want {
				return false, nil
			}
			if cp.name == want {
				leader = cp
			}
		}
		if leader == nil {
			return false, nil
		}
		n, err := e.queued(ctx)
		if err != nil {
			return false, err
		}
		return n == int64(len(e.camps)), nil
	})
	return leader, err
}

// measureEtcdFailover measures etcd's election recipe the way conclave's
// failover is measured: three etcd members and o.Campaigners campaigner
// processes (concurrency.Session with TTL o.TTL, Election.Campaign,
// Election.Observe). Each trial SIGKILLs the leading campaigner and times
// from just before the kill until the last surviving campaigner observes the
// new leader (the lease must expire first, so a failover takes about the
// TTL); the killed campaigner then restarts and queues as a follower. All
// children are killed before it returns.
func measureEtcdFailover(ctx context.Context, o etcdOptions) (_ []time.Duration, err error) {
	o = o.withDefaults()
	if o.Campaigners < 2 {
		return nil, fmt.Errorf("etcd: need at least 2 campaigners, got %d", o.Campaigners)
	}
	cluster, err := startEtcdCluster(ctx, o, fmt.Sprintf("etcd-election-ttl%s", o.effectiveTTL()))
	if err != nil {
		return nil, err
	}
	defer cluster.close()
	e := &etcdCampaign{o: o, cluster: cluster, notify: make(chan struct{}, 1)}
	defer e.close()

	// Start the campaigners one by one so the queue order is c0, c1, …
	for i := range o.Campaigners {
		cp := &etcdCampaigner{
			name:    fmt.Sprintf("c%d", i),
			logPath: filepath.Join(cluster.dir, fmt.Sprintf("c%d.log", i)),
			notify:  e.notify,
		}
		e.camps = append(e.camps, cp)
		if err := e.start(cp); err != nil {
			return nil, err
		}
		if err := e.wait(ctx, etcdStableTimeout, "starting campaigner "+cp.name, nil, func() (bool, error) {
			n, err := e.queued(ctx)
			return n == int64(i+1) && cp.current() != "", err
		}); err != nil {
			return nil, err
		}
	}
	o.Log("etcd: %d campaigners running (session TTL %s)", o.Campaigners, o.effectiveTTL())

	var out []time.Duration
	for trial := 1; trial <= o.Trials; trial++ {
		victim, err := e.waitStable(ctx)
		if err != nil {
			return out, err
		}
		// Each trial starts right after the previous failover, which etcd's
		// lessor ended on one of its 500 ms expiry checks; killing at once
		// would always land at the same phase of that check and of the
		// leader's keep-alives (every TTL/3), and measure one point of the
		// distribution over and over. A random pause spreads the kills.
		pause := rand.N(o.effectiveTTL()/3) + rand.N(etcdLeaseCheck)
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("etcd: trial %d: %w", trial, ctx.Err())
		case <-time.After(pause):
		}
		if victim.proc.exited() || victim.current() != victim.name {
			trial-- // the leader changed during the pause: start over
			continue
		}
		t0 := time.Now()
		if err := victim.proc.kill(); err != nil {
			return out, err
		}
		var newLeader string
		var last time.Time
		err = e.wait(ctx, o.effectiveTTL()+etcdFailoverTimeout,
			fmt.Sprintf("trial %d: waiting for the survivors to observe a new leader after killing %s", trial, victim.name),
			victim, func() (bool, error) {
				newLeader, last = "", time.Time{}
				for _, cp := range e.camps {
					if cp == victim {
						continue
					}
					cur := cp.current()
					if cur == "" || cur == victim.name || (newLeader != "" && cur != newLeader) {
						return false, nil
					}
					newLeader = cur
					at, ok := cp.sawSince(cur, t0)
					if !ok {
						return false, nil
					}
					if at.After(last) {
						last = at
					}
				}
				return true, nil
			})
		if err != nil {
			return out, err
		}
		d := last.Sub(t0)
		if d <= 0 {
			return out, fmt.Errorf("etcd: trial %d: non-positive failover %s (clock went back?)", trial, d)
		}
		out = append(out, d)
		o.Log("etcd election failover %d/%d: %s killed, all survivors see %s after %s", trial, o.Trials, victim.name, newLeader, ms(d))
		if trial < o.Trials {
			if err := e.start(victim); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// measureEtcdRaftFailover measures etcd's own raft failover: each trial
// SIGKILLs the member that is the raft leader and times from just before the
// kill until both survivors report the same new leader (Maintenance.Status
// polled every 5 ms); the killed member then restarts on its data directory.
// o.TTL and o.Campaigners are not used. All members are killed before it
// returns.
func measureEtcdRaftFailover(ctx context.Context, o etcdOptions) ([]time.Duration, error) {
	o = o.withDefaults()
	cluster, err := startEtcdCluster(ctx, o, "etcd-raft")
	if err != nil {
		return nil, err
	}
	defer cluster.close()

	var out []time.Duration
	for trial := 1; trial <= o.Trials; trial++ {
		leaderID, err := cluster.waitRaftLeader(ctx, etcdStableTimeout, cluster.members)
		if err != nil {
			return out, fmt.Errorf("etcd: trial %d: %w", trial, err)
		}
		var victim *etcdMember
		var survivors []*etcdMember
		for _, m := range cluster.members {
			st, err := m.status(ctx, etcdRPCTimeout)
			if err != nil {
				return out, fmt.Errorf("etcd: trial %d: status of %s: %w", trial, m.name, err)
			}
			if st.Header.MemberId == leaderID {
				victim = m
			} else {
				survivors = append(survivors, m)
			}
		}
		if victim == nil {
			return out, fmt.Errorf("etcd: trial %d: leader %x is none of the members", trial, leaderID)
		}

		t0 := time.Now()
		if err := victim.proc.kill(); err != nil {
			return out, err
		}
		d, err := pollRaftFailover(ctx, survivors, leaderID, t0, etcdFailoverTimeout)
		if err != nil {
			return out, fmt.Errorf("etcd: trial %d: after killing %s: %w", trial, victim.name, err)
		}
		out = append(out, d)
		o.Log("etcd raft failover %d/%d: %s killed, survivors agree on a new leader after %s", trial, o.Trials, victim.name, ms(d))
		if trial < o.Trials {
			if err := cluster.startMember(victim); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// pollRaftFailover polls the survivors' Status every etcdRaftPoll until they
// all name the same leader other than old, and returns the time since t0.
func pollRaftFailover(ctx context.Context, survivors []*etcdMember, old uint64, t0 time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := t0.Add(timeout)
	for {
		agreed := true
		var leader uint64
		for _, m := range survivors {
			st, err := m.status(ctx, 100*time.Millisecond)
			if err != nil || st.Leader == 0 || st.Leader == old || (leader != 0 && st.Leader != leader) {
				agreed = false
				break
			}
			leader = st.Leader
		}
		now := time.Now()
		if agreed {
			return now.Sub(t0), nil
		}
		if now.After(deadline) {
			return 0, fmt.Errorf("survivors agree on no new raft leader after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for a new raft leader: %w", ctx.Err())
		case <-time.After(etcdRaftPoll):
		}
	}
}
