package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The command `agent exec` runs must not outlive it, however exec ends: a
// SIGKILL, the OOM killer, a crash, a supervisor that kills the main pid
// only. Signals sent by exec cannot cover that, so exec starts the command
// through a guardian: a copy of this binary that exec starts with a
// lifeline pipe and that does only this:
//
//   - it becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so every
//     process the command starts, even one that leaves the command's
//     process group or session, is re-parented to the guardian and not to
//     init when its parent dies: the guardian can always find them;
//   - it starts the command in a process group of its own, with
//     PR_SET_PDEATHSIG=SIGKILL, so the command dies with the guardian even
//     if the guardian alone is killed;
//   - it relays the signals exec sends it to that process group;
//   - when the lifeline reaches end of file — exec closed it after the
//     grace period, or exec died and the kernel closed it, which nothing
//     can prevent — it SIGKILLs the command's group and then every
//     descendant, until it has none left, and exits. It does the same when
//     the command exits, so nothing the command left running outlives it.
//
// Why not the alternatives: a PID namespace with the command as its init
// would be airtight, but creating one needs CAP_SYS_ADMIN or an
// unprivileged user namespace, which many distributions restrict, and the
// command would see itself as root of a user namespace. A cgroup needs a
// delegated cgroup tree (systemd's Delegate=), which a plain `agent exec`
// from a shell does not have. The subreaper works for any user on any
// Linux since 3.4. Its one gap: SIGKILL of the guardian itself (not exec)
// kills the command through PDEATHSIG, but the command's own children then
// go to init. The guardian is a few megabytes and allocates nothing after
// start, so the OOM killer picks it last.

// guardianEnv marks a process started as a guardian. It is removed from
// the command's environment.
const guardianEnv = "CONCLAVE_EXEC_GUARDIAN"

// The guardian's inherited descriptors: the lifeline exec holds the write
// end of, and the pipe on which the guardian reports the command's pid (or
// why it could not start it).
const (
	guardianLifelineFD = 3
	guardianReportFD   = 4
)

// Linux prctl options (golang.org/x/sys/unix is not a direct dependency).
const (
	prSetPdeathsig      = 1
	prSetChildSubreaper = 36
)

func init() {
	// A guardian is this binary re-executed by exec: it must take over
	// before main (or a test binary's TestMain) does anything else.
	if os.Getenv(guardianEnv) == "1" {
		os.Exit(runGuardian(os.Args[1:]))
	}
}

func prctl(option, arg uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg, 0); e != 0 {
		return e
	}
	return nil
}

func runGuardian(argv []string) int {
	report := os.NewFile(guardianReportFD, "report")
	life := os.NewFile(guardianLifelineFD, "lifeline")
	fail := func(format string, args ...any) int {
		fmt.Fprintf(report, "error "+format+"\n", args...)
		return 127
	}
	if report == nil || life == nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "agent exec guardian: started without its pipes or command; it is started by agent exec only")
		return 2
	}
	syscall.CloseOnExec(guardianReportFD)
	syscall.CloseOnExec(guardianLifelineFD)
	os.Unsetenv(guardianEnv)
	if err := prctl(prSetChildSubreaper, 1); err != nil {
		return fail("cannot become a child subreaper: %v", err)
	}
	// PDEATHSIG fires when the thread that forked the child ends, not the
	// process: keep this goroutine on its thread for good.
	runtime.LockOSThread()

	// Relay what exec sends; catching (not ignoring) these signals keeps
	// their default action in the command.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	pgid := cmd.Process.Pid
	fmt.Fprintf(report, "pid %d\n", pgid)
	report.Close()

	cut := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, life)
		close(cut)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
loop:
	for {
		select {
		case sig := <-sigs:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-cut:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-done
			break loop
		case err = <-done:
			break loop
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	sweep()
	return exitCode(err)
}

// sweep SIGKILLs every descendant left (re-parented to this subreaper as
// their parents die) and reaps them, until none is left.
func sweep() {
	self := os.Getpid()
	for {
		for _, pid := range childrenOf(self) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return
		case pid <= 0:
			// Killed ones not dead yet, or one re-parented after the
			// scan: look again shortly.
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may contain anything.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if k, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			kids = append(kids, k)
		}
	}
	return kids
}

// startGuarded starts argv through a guardian (see above) and returns the
// guardian's process, the command's pid, and the lifeline: closing it
// makes the guardian SIGKILL the command and all it started.
func startGuarded(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*exec.Cmd, int, *os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("find the agent binary to run the guardian: %w", err)
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, 0, nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, 0, nil, err
	}
	g := exec.Command(self, argv...)
	g.Args[0] = "agent-exec-guardian"
	g.Env = append(env, guardianEnv+"=1")
	g.Stdin, g.Stdout, g.Stderr = stdin, stdout, stderr
	g.ExtraFiles = []*os.File{lifeR, repW} // fds 3 and 4
	// Its own process group: a terminal's Ctrl-C reaches exec, which
	// relays it once, not the guardian as well.
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = g.Start()
	lifeR.Close()
	repW.Close()
	if err != nil {
		repR.Close()
		lifeW.Close()
		return nil, 0, nil, err
	}
	line, _ := bufio.NewReader(repR).ReadString('\n')
	repR.Close()
	if pid, ok := strings.CutPrefix(strings.TrimSpace(line), "pid "); ok {
		if n, err := strconv.Atoi(pid); err == nil {
			return g, n, lifeW, nil
		}
	}
	// The guardian could not start the command and is exiting: reap it.
	lifeW.Close()
	_ = g.Wait()
	msg := strings.TrimPrefix(strings.TrimSpace(line), "error ")
	if msg == "" {
		msg = "the guardian process ended before starting it"
	}
	return nil, 0, nil, fmt.Errorf("%s", msg)
}
