// Command wakefloor measures the floor under an idle agent's CPU on this
// machine: the cost of a bare Go process that the network wakes as often
// as an agent's heartbeats do, with no libp2p, no Noise, no memberlist and
// no election logic. It starts, as child processes, a "leader" that sends
// a 16-byte message to each of N "followers" every interval over plain
// TCP on loopback, each follower echoing it back — the message pattern of
// an idle majority cluster at the default 50 ms heartbeat — and reports
// each process's CPU (user + system, /proc/PID/stat) over the window.
//
//	cd bench && go run ./cmd/wakefloor                  # 4 followers, 50 ms, 30 s
//	cd bench && go run ./cmd/wakefloor -followers 1 -window 20s
//
// Children run with GOMAXPROCS=1, as `agent run` does. The figures and
// what they say about the idle targets are in docs/benchmarks/analysis.md.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

const msgSize = 16

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "wakefloor child:", err)
			os.Exit(1)
		}
		return
	}
	followers := flag.Int("followers", 4, "followers the leader sends to")
	interval := flag.Duration("interval", 50*time.Millisecond, "how often the leader sends to each follower")
	udp := flag.Bool("udp", false, "send datagrams over UDP instead of a TCP stream")
	answerEvery := flag.Int("answer-every", 1, "followers echo every Nth message only")
	window := flag.Duration("window", 30*time.Second, "measurement window")
	settle := flag.Duration("settle", 3*time.Second, "pause before the window")
	flag.Parse()
	if err := run(*followers, *interval, *answerEvery, *udp, *window, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "wakefloor:", err)
		os.Exit(1)
	}
}

func run(followers int, interval time.Duration, answerEvery int, udp bool, window, settle time.Duration) error {
	network := "tcp"
	if udp {
		network = "udp"
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	start := func(args ...string) (*exec.Cmd, *bufio.Reader, error) {
		c := exec.Command(self, append([]string{"-child"}, args...)...)
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := c.Start(); err != nil {
			return nil, nil, err
		}
		procs = append(procs, c)
		return c, bufio.NewReader(out), nil
	}
	var addrs []string
	for range followers {
		_, out, err := start("echo", strconv.Itoa(answerEvery), network)
		if err != nil {
			return fmt.Errorf("start follower: %w", err)
		}
		line, err := out.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read follower address: %w", err)
		}
		addrs = append(addrs, strings.TrimSpace(line))
	}
	if _, _, err := start("leader", interval.String(), strings.Join(addrs, ","), network); err != nil {
		return fmt.Errorf("start leader: %w", err)
	}
	time.Sleep(settle)
	before := make([]time.Duration, len(procs))
	for i, p := range procs {
		if before[i], err = cpuOf(p.Process.Pid); err != nil {
			return err
		}
	}
	load := loadAvg()
	time.Sleep(window)
	fmt.Printf("%s: %d followers, a message to each every %v answered every %d, %v window, load %s → %s\n", network, followers, interval, answerEvery, window, load, loadAvg())
	for i, p := range procs {
		after, err := cpuOf(p.Process.Pid)
		if err != nil {
			return err
		}
		role := "follower"
		if i == len(procs)-1 {
			role = "leader"
		}
		fmt.Printf("%-8s %.2f %% of a core\n", role, 100*float64(after-before[i])/float64(window))
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

func child(args []string) error {
	switch args[0] {
	case "echo":
		every, err := strconv.Atoi(args[1])
		if err != nil || every < 1 {
			return fmt.Errorf("answer every %q: want a positive count", args[1])
		}
		if args[2] == "udp" {
			return echoDatagrams(every)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		fmt.Println(ln.Addr())
		c, err := ln.Accept()
		if err != nil {
			return err
		}
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
	case "leader":
		interval, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		var conns []net.Conn
		for _, a := range strings.Split(args[2], ",") {
			c, err := net.Dial(args[3], a)
			if err != nil {
				return err
			}
			conns = append(conns, c)
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
	}
	return fmt.Errorf("unknown role %q", args[0])
}

// echoDatagrams answers every Nth datagram to its sender.
func echoDatagrams(every int) error {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(pc.LocalAddr())
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
