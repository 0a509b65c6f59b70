package main

import (
	"bufio"
	"context"
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
	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/config"
	"github.com/conclave-agent/conclave/internal/loopback"
)

// devCluster is `agent dev`: N agents on loopback in one process, each with
// its own data directory and socket in a folder, controlled by commands
// read from standard input. Every command answers with what it did, and a
// kill or resign of the leader is followed by the failover it caused, timed
// from the command to the first agent that reports the new leader.
type devCluster struct {
	dir   string
	cfgs  map[string]config.Config
	names []string
	out   io.Writer
	log   *zap.Logger
	wg    sync.WaitGroup

	mu       sync.Mutex
	running  map[string]*devNode
	latest   map[string]api.Status // each running agent's last report
	pending  *devChange            // a leader change being timed
	quitting bool                  // quit: print no more changes
}

type devNode struct {
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan struct{}
}

// devChange is a kill or resign of the leader whose outcome is awaited.
type devChange struct {
	what   string // "n2 was killed", "n1 resigned"
	kind   string // "failover", "handover"
	from   string // the leader that went
	epoch  uint64 // its epoch
	issued time.Time
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dev", stderr)
	nodes := fs.Int("nodes", 3, "number of agents")
	protocol := fs.String("protocol", config.ProtocolMajority, "election protocol: majority, bully or ring")
	dir := fs.String("dir", "", "folder for data and sockets (default: a new temporary folder, removed on exit)")
	verbose := fs.Bool("v", false, "show the agents' logs")
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if !expectNoWords(fs, words) {
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
	dc := &devCluster{dir: dir, cfgs: map[string]config.Config{}, out: stdout, log: lg,
		running: map[string]*devNode{}, latest: map[string]api.Status{}}
	if err := dc.configure(n, protocol); err != nil {
		return err
	}
	// The banner first: the agents' first reports follow it.
	dc.help()
	// The agents outlive ctx: a signal ends them through quit, which stops
	// them all at once instead of letting each leader hand over in turn.
	actx := context.WithoutCancel(ctx)
	for _, name := range dc.names {
		if err := dc.start(actx, name); err != nil {
			dc.quit()
			return err
		}
	}
	commands := make(chan string)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		defer close(commands)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case commands <- sc.Text():
			case <-stopped:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			dc.quit()
			return nil
		case line, ok := <-commands:
			if !ok {
				// No more input (e.g. run in the background): keep
				// running until a signal.
				commands = nil
				continue
			}
			if quit := dc.command(actx, line); quit {
				dc.quit()
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
	cfg := dc.cfgs[name]
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
			dc.printf("%s stopped: %v", name, err)
		}
	}()
	go func() {
		defer dc.wg.Done()
		dc.follow(name, a)
	}()
	return nil
}

// follow prints every leadership change one agent reports, and ends a
// timed failover or handover at the first report of the new leader.
func (dc *devCluster) follow(name string, a *agent.Agent) {
	sub := a.Subscribe()
	defer sub.Close()
	last := ""
	for st := range sub.C() {
		now := time.Now()
		dc.mu.Lock()
		if dc.running[name] == nil || dc.running[name].a != a {
			dc.mu.Unlock()
			continue // stopped: its last words are not news
		}
		dc.latest[name] = st
		line := fmt.Sprintf("%-9s leader=%-3q epoch=%d", st.Role, st.Leader, st.Epoch)
		if line != last && !dc.quitting {
			fmt.Fprintf(dc.out, "%s  %s: %s\n", now.Format(stampLayout), name, line)
			last = line
		}
		if p := dc.pending; p != nil && !dc.quitting && st.Leader != "" && st.Leader != p.from && st.Epoch > p.epoch {
			fmt.Fprintf(dc.out, "%s  %s: %s leads epoch %d, %v after %s (first reported by %s)\n",
				now.Format(stampLayout), p.kind, st.Leader, st.Epoch, now.Sub(p.issued).Round(100*time.Microsecond), p.what, name)
			dc.pending = nil
		}
		dc.mu.Unlock()
	}
}

const stampLayout = "15:04:05.000"

// printf prints one time-stamped line.
func (dc *devCluster) printf(format string, args ...any) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	fmt.Fprintf(dc.out, "%s  "+format+"\n", append([]any{time.Now().Format(stampLayout)}, args...)...)
}

// stop stops a running node (crash: no handover, no goodbye) and returns
// the status it last reported.
func (dc *devCluster) stop(name string, crash bool) (api.Status, error) {
	dc.mu.Lock()
	dn, ok := dc.running[name]
	last := dc.latest[name]
	if ok && crash && last.Role == api.RoleLeader {
		dc.pending = &devChange{what: name + " was killed", kind: "failover", from: name, epoch: last.Epoch, issued: time.Now()}
	}
	delete(dc.running, name)
	delete(dc.latest, name)
	dc.mu.Unlock()
	if !ok {
		return api.Status{}, fmt.Errorf("%s is not running (start %s)", name, name)
	}
	if crash {
		dn.a.Kill()
	} else {
		dn.cancel()
	}
	<-dn.done
	dn.cancel()
	return last, nil
}

// quit stops every agent at once, without handing leadership over: the
// whole cluster goes, so a handover would only start elections among
// agents about to stop.
func (dc *devCluster) quit() {
	dc.mu.Lock()
	dc.quitting = true
	dc.pending = nil
	var stopped []string
	for _, name := range dc.names {
		if dn, ok := dc.running[name]; ok {
			dn.a.Kill()
			stopped = append(stopped, name)
		}
	}
	dc.mu.Unlock()
	for _, name := range stopped {
		_, _ = dc.stop(name, true)
	}
	dc.wg.Wait()
	if len(stopped) > 0 {
		fmt.Fprintf(dc.out, "%s  stopped %s\n", time.Now().Format(stampLayout), strings.Join(stopped, ", "))
	}
}

func (dc *devCluster) help() {
	fmt.Fprintf(dc.out, "conclave dev cluster: %d agents (%s) in %s\n\n", len(dc.names), dc.cfgs[dc.names[0]].Election.Protocol, dc.dir)
	for _, name := range dc.names {
		sock := dc.cfgs[name].API.Socket
		fmt.Fprintf(dc.out, "  %s  %s status -socket %s\n", name, selfName(), sock)
		fmt.Fprintf(dc.out, "      curl --unix-socket %s http://agent/v1/status\n", sock)
	}
	fmt.Fprintln(dc.out, `
Type a command and Enter (NAME is a node, or "leader" for whichever leads):
  kill NAME     crash NAME (no handover, no goodbye): watch the others fail over
  stop NAME     stop NAME gracefully (a leader hands over first)
  start NAME    start NAME again from its data directory ("start all": every stopped node)
  resign NAME   ask NAME, which must lead, to hand leadership over
  help          show this again
  quit          stop every agent and exit (so does Ctrl-C)
Leadership changes appear below as each agent reports them.`)
}

// selfName is how the banner names this program: as it was run ("agent"
// from the PATH, "bin/agent"), or, under `go run` (a binary in a
// temporary go-build directory, gone on exit), bin/agent, the binary the
// README builds for the commands it shows next.
func selfName() string {
	if arg := os.Args[0]; arg != "" && !strings.Contains(arg, string(filepath.Separator)+"go-build") && !strings.HasSuffix(arg, ".test") {
		return arg
	}
	return "bin/agent"
}

// resolve turns a command's argument into a node name: a member's name, or
// "leader" for the agent that leads now.
func (dc *devCluster) resolve(cmd, arg string) (string, error) {
	if arg == "" {
		return "", fmt.Errorf("usage: %s NAME (one of %s, or leader)", cmd, strings.Join(dc.names, ", "))
	}
	if arg == "leader" {
		dc.mu.Lock()
		defer dc.mu.Unlock()
		for _, name := range dc.names {
			if st, ok := dc.latest[name]; ok && st.Role == api.RoleLeader {
				return name, nil
			}
		}
		return "", fmt.Errorf("no agent leads right now")
	}
	if _, ok := dc.cfgs[arg]; !ok {
		return "", fmt.Errorf("unknown node %q: the nodes are %s", arg, strings.Join(dc.names, ", "))
	}
	return arg, nil
}

// command runs one line typed on standard input and says what it did; it
// reports whether to quit.
func (dc *devCluster) command(ctx context.Context, line string) bool {
	line, _, _ = strings.Cut(line, "#") // a comment, as pasted from the README
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return false
	}
	cmd, arg := fields[0], ""
	if len(fields) > 1 {
		arg = fields[1]
	}
	if len(fields) > 2 {
		dc.printf("error: %s takes one name, not %q", cmd, strings.Join(fields[1:], " "))
		return false
	}
	var err error
	switch cmd {
	case "quit", "exit":
		return true
	case "help":
		dc.help()
	case "kill", "stop":
		err = dc.stopCommand(cmd, arg)
	case "start":
		err = dc.startCommand(ctx, arg)
	case "resign":
		err = dc.resignCommand(ctx, arg)
	default:
		err = fmt.Errorf("unknown command %q (try help)", cmd)
	}
	if err != nil {
		dc.printf("error: %v", err)
	}
	return false
}

func (dc *devCluster) stopCommand(cmd, arg string) error {
	name, err := dc.resolve(cmd, arg)
	if err != nil {
		return err
	}
	last, err := dc.stop(name, cmd == "kill")
	if err != nil {
		return err
	}
	verb := "stopped"
	if cmd == "kill" {
		verb = "killed"
	}
	switch {
	case last.Role == api.RoleLeader && cmd == "kill":
		dc.printf("%s %s, the leader of epoch %d: the others elect a new leader", verb, name, last.Epoch)
	case last.Role == api.RoleLeader:
		dc.printf("%s %s, the leader of epoch %d, after it handed leadership over", verb, name, last.Epoch)
	case last.Leader != "":
		dc.printf("%s %s (a %s; %s leads)", verb, name, last.Role, last.Leader)
	default:
		dc.printf("%s %s", verb, name)
	}
	return nil
}

func (dc *devCluster) startCommand(ctx context.Context, arg string) error {
	names := []string{arg}
	if arg == "all" {
		names = nil
		dc.mu.Lock()
		for _, name := range dc.names {
			if dc.running[name] == nil {
				names = append(names, name)
			}
		}
		dc.mu.Unlock()
		if len(names) == 0 {
			return fmt.Errorf("every node is running")
		}
	} else {
		name, err := dc.resolve("start", arg)
		if err != nil {
			return err
		}
		names[0] = name
	}
	for _, name := range names {
		if err := dc.start(ctx, name); err != nil {
			return err
		}
		dc.printf("started %s from %s", name, dc.cfgs[name].Node.DataDir)
	}
	return nil
}

func (dc *devCluster) resignCommand(ctx context.Context, arg string) error {
	name, err := dc.resolve("resign", arg)
	if err != nil {
		return err
	}
	dc.mu.Lock()
	dn, ok := dc.running[name]
	last := dc.latest[name]
	dc.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s is not running (start %s)", name, name)
	}
	if last.Role != api.RoleLeader {
		leader := last.Leader
		if leader == "" {
			return fmt.Errorf("%s does not lead, and no leader is known yet", name)
		}
		return fmt.Errorf("%s does not lead; %s does (resign %s, or resign leader)", name, leader, leader)
	}
	dc.printf("resign %s, the leader of epoch %d: it hands leadership over", name, last.Epoch)
	dc.mu.Lock()
	change := &devChange{what: name + " was asked to resign", kind: "handover", from: name, epoch: last.Epoch, issued: time.Now()}
	dc.pending = change
	dc.mu.Unlock()
	if err := resignVia(ctx, dn.a.SocketPath()); err != nil {
		dc.mu.Lock()
		if dc.pending == change {
			dc.pending = nil
		}
		dc.mu.Unlock()
		return fmt.Errorf("resign %s: %s", name, explain("resign", dn.a.SocketPath(), err))
	}
	return nil
}
