package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/agent"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/loopback"
)

// devCluster is `agent dev`: N agents on loopback in one process, each with
// its own data directory and socket in a temporary folder, controlled by
// commands read from standard input.
type devCluster struct {
	dir     string
	cfgs    map[string]config.Config
	names   []string
	out     io.Writer
	log     *zap.Logger
	mu      sync.Mutex
	running map[string]*devNode
	wg      sync.WaitGroup
}

type devNode struct {
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan struct{}
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of agents")
	protocol := fs.String("protocol", config.ProtocolMajority, "election protocol: majority, bully or ring")
	dir := fs.String("dir", "", "folder for data and sockets (default: a new temporary folder, removed on exit)")
	verbose := fs.Bool("v", false, "show the agents' logs")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !noArgs(fs) {
		return 2
	}
	if *nodes < 1 || *nodes > 9 {
		fmt.Fprintln(stderr, "agent dev: -nodes must be between 1 and 9")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devMain(ctx, *nodes, *protocol, *dir, *verbose, os.Stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "agent dev: %v\n", err)
		return 1
	}
	return 0
}

func devMain(ctx context.Context, n int, protocol, dir string, verbose bool, in io.Reader, stdout, stderr io.Writer) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "conclave-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	lg := zap.NewNop()
	if verbose {
		var err error
		if lg, err = newLogger(config.Log{Level: "info", Format: config.FormatConsole}, stderr); err != nil {
			return err
		}
	}
	dc := &devCluster{dir: dir, cfgs: map[string]config.Config{}, out: stdout, log: lg, running: map[string]*devNode{}}
	if err := dc.configure(n, protocol); err != nil {
		return err
	}
	for _, name := range dc.names {
		if err := dc.start(ctx, name); err != nil {
			dc.stopAll()
			return err
		}
	}
	dc.help()
	commands := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			commands <- sc.Text()
		}
		close(commands)
	}()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopping the cluster…")
			dc.stopAll()
			return nil
		case line, ok := <-commands:
			if !ok {
				// No more input (e.g. run in the background): keep
				// running until a signal.
				commands = nil
				continue
			}
			if quit := dc.command(ctx, line); quit {
				dc.stopAll()
				return nil
			}
		}
	}
}

func (dc *devCluster) configure(n int, protocol string) error {
	var binds, voters []string
	for i := 1; i <= n; i++ {
		port, err := loopback.FreePort()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("n%d", i)
		dc.names = append(dc.names, name)
		voters = append(voters, name)
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for i, name := range dc.names {
		tport, err := loopback.FreePort()
		if err != nil {
			return err
		}
		c := config.Default()
		c.Node = config.Node{Name: name, ID: uint64(i + 1), DataDir: filepath.Join(dc.dir, name)}
		c.Gossip.Bind = binds[i]
		c.Gossip.Profile = config.ProfileLocal
		for j, b := range binds {
			if j != i {
				c.Gossip.Join = append(c.Gossip.Join, b)
			}
		}
		c.Transport.Listen = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", tport)
		c.Election.Protocol = protocol
		c.Election.Voters = voters
		c.API.Socket = filepath.Join(dc.dir, name, "agent.sock")
		if err := c.Validate(); err != nil {
			return err
		}
		dc.cfgs[name] = c
	}
	return nil
}

func (dc *devCluster) start(ctx context.Context, name string) error {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if _, ok := dc.running[name]; ok {
		return fmt.Errorf("%s is already running", name)
	}
	cfg, ok := dc.cfgs[name]
	if !ok {
		return fmt.Errorf("no node %q (nodes: %s)", name, strings.Join(dc.names, ", "))
	}
	actx, cancel := context.WithCancel(ctx)
	a, err := agent.New(actx, cfg, agent.Options{Logger: dc.log.With(zap.String("node", name))})
	if err != nil {
		cancel()
		return fmt.Errorf("start %s: %w", name, err)
	}
	dn := &devNode{a: a, cancel: cancel, done: make(chan struct{})}
	dc.running[name] = dn
	dc.wg.Add(2)
	go func() {
		defer dc.wg.Done()
		defer close(dn.done)
		if err := a.Run(actx); err != nil {
			fmt.Fprintf(dc.out, "%s  %s stopped: %v\n", stamp(), name, err)
		}
	}()
	go func() {
		defer dc.wg.Done()
		dc.follow(name, a)
	}()
	return nil
}

// follow prints every leadership change one agent reports.
func (dc *devCluster) follow(name string, a *agent.Agent) {
	sub := a.Subscribe()
	defer sub.Close()
	last := ""
	for st := range sub.C() {
		line := fmt.Sprintf("%-9s leader=%-3q epoch=%d", st.Role, st.Leader, st.Epoch)
		if line != last {
			fmt.Fprintf(dc.out, "%s  %s: %s\n", stamp(), name, line)
			last = line
		}
	}
}

func stamp() string { return time.Now().Format("15:04:05.000") }

func (dc *devCluster) stop(name string, crash bool) error {
	dc.mu.Lock()
	dn, ok := dc.running[name]
	delete(dc.running, name)
	dc.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s is not running", name)
	}
	if crash {
		dn.a.Kill()
	} else {
		dn.cancel()
	}
	<-dn.done
	dn.cancel()
	return nil
}

func (dc *devCluster) stopAll() {
	for _, name := range dc.names {
		_ = dc.stop(name, false)
	}
	dc.wg.Wait()
}

func (dc *devCluster) help() {
	fmt.Fprintf(dc.out, "conclave dev cluster: %d agents (%s) in %s\n\n", len(dc.names), dc.cfgs[dc.names[0]].Election.Protocol, dc.dir)
	for _, name := range dc.names {
		sock := dc.cfgs[name].API.Socket
		fmt.Fprintf(dc.out, "  %s  agent status -socket %s\n", name, sock)
		fmt.Fprintf(dc.out, "      curl --unix-socket %s http://agent/v1/status\n", sock)
	}
	fmt.Fprintln(dc.out, `
Type a command and Enter:
  kill NAME     crash NAME (no handover, no goodbye): watch the others fail over
  stop NAME     stop NAME gracefully (a leader hands over first)
  start NAME    start NAME again from its data directory
  resign NAME   ask NAME to hand leadership over
  help          show this again
  quit          stop every agent and exit (so does Ctrl-C)
Leadership changes appear below as each agent reports them.`)
}

// command runs one line typed on standard input; it reports whether to quit.
func (dc *devCluster) command(ctx context.Context, line string) bool {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return false
	}
	var err error
	arg := ""
	if len(fields) > 1 {
		arg = fields[1]
	}
	switch fields[0] {
	case "quit", "exit":
		return true
	case "help":
		dc.help()
	case "kill":
		err = dc.stop(arg, true)
	case "stop":
		err = dc.stop(arg, false)
	case "start":
		err = dc.start(ctx, arg)
	case "resign":
		dc.mu.Lock()
		dn, ok := dc.running[arg]
		dc.mu.Unlock()
		if !ok {
			err = fmt.Errorf("%s is not running", arg)
		} else {
			err = resignVia(ctx, dn.a.SocketPath())
		}
	default:
		err = fmt.Errorf("unknown command %q (try help)", fields[0])
	}
	if err != nil {
		fmt.Fprintf(dc.out, "%s  error: %v\n", stamp(), err)
	}
	return false
}
