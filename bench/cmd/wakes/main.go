// Command wakes counts what wakes a Go process, from an execution trace:
// every time a goroutine went from waiting to runnable, by where it was
// waiting and by who woke it (another goroutine's stack, or none: a timer
// or the network poller). An idle agent's CPU is mostly such wake-ups,
// each costing the scheduler more than the work it does, so this says
// where an idle agent's cost above its floor goes (the floor part of the
// bench, docs/benchmarks/analysis.md). It reads a trace and never starts
// anything.
//
//	TRACE=1 N=5 bash bench/profile-cluster.sh BIN majority /tmp/p 40
//	cd bench && go run ./cmd/wakes -skip 10s -window 40s /tmp/p/n2.trace
//
// It also names what each processor wake-up was for: the wait of the
// first goroutine that ran on the processor, or "no goroutine ran" when
// the processor woke and went idle again without running one (most often
// a runtime timer whose deadline had moved later: the runtime leaves it
// in its heap at the old time and wakes for it there).
//
// -skip and -window keep the idle window the script measured (it settles
// for SETTLE=10 seconds first), leaving out start-up and shutdown.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	skip := flag.Duration("skip", 0, "leave out this much of the trace's start")
	window := flag.Duration("window", 0, "count this long after -skip (0: to the end)")
	top := flag.Int("top", 25, "how many causes to print")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: wakes [-skip D] [-window D] [-top N] TRACE")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakes:", err)
		os.Exit(1)
	}
	defer f.Close()
	rep, err := countWakes(f, *skip, *window)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wakes: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
	rep.print(os.Stdout, *top)
}

// report is what countWakes found over Seconds of trace.
type report struct {
	Seconds float64
	// ProcWakes counts processors that went from idle to running: the
	// wake-ups that cost a thread's wake, not a hand-over on a running one.
	ProcWakes int
	// ProcCauses counts the processor wake-ups by the wait of the first
	// goroutine that ran on the woken processor: what the thread was woken
	// for.
	ProcCauses map[string]int
	// Wakes counts goroutine wake-ups by cause (see cause).
	Wakes map[string]int
}

// countWakes reads a trace and counts, between skip and skip+window
// after its first event (window 0: to the end), the processors' and
// goroutines' wake-ups.
func countWakes(r io.Reader, skip, window time.Duration) (report, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return report{}, fmt.Errorf("read trace: %w", err)
	}
	rep := report{Wakes: map[string]int{}, ProcCauses: map[string]int{}}
	woken := map[trace.ProcID]bool{}
	blockedAt := map[trace.GoID]string{}
	startedAt := map[trace.GoID]string{}
	var first, from, to, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return report{}, fmt.Errorf("read trace: %w", err)
		}
		if first == 0 {
			first = ev.Time()
			from = first + trace.Time(skip)
			if window > 0 {
				to = from + trace.Time(window)
			}
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		in := ev.Time() >= from && (to == 0 || ev.Time() < to)
		if in {
			last = ev.Time()
		}
		switch st.Resource.Kind {
		case trace.ResourceProc:
			was, is := st.Proc()
			if in && was == trace.ProcIdle && is == trace.ProcRunning {
				rep.ProcWakes++
				woken[st.Resource.Proc()] = true
			}
			if in && is == trace.ProcIdle && woken[st.Resource.Proc()] {
				delete(woken, st.Resource.Proc())
				rep.ProcCauses["(no goroutine ran before the processor idled again)"]++
			}
		case trace.ResourceGoroutine:
			g := st.Resource.Goroutine()
			was, is := st.Goroutine()
			switch {
			case was == trace.GoNotExist || was == trace.GoUndetermined:
				if fr := frames(st.Stack, false, 0); len(fr) > 0 {
					startedAt[g] = fr[len(fr)-1]
				}
			case was == trace.GoRunning && is == trace.GoWaiting:
				at := strings.Join(frames(ev.Stack(), true, 2), " < ")
				if at == "" {
					at = "a goroutine started at " + startedAt[g]
				}
				blockedAt[g] = at + " [" + st.Reason + "]"
			case was == trace.GoWaiting && is == trace.GoRunnable && in:
				rep.Wakes[cause(blockedAt[g], frames(ev.Stack(), true, 2))]++
			case is == trace.GoRunning && woken[ev.Proc()]:
				delete(woken, ev.Proc())
				if in {
					at := blockedAt[g]
					if at == "" {
						at = "a goroutine started at " + startedAt[g]
					}
					rep.ProcCauses[at]++
				}
			}
		}
	}
	if last > from {
		rep.Seconds = float64(last-from) / 1e9
	}
	return rep, nil
}

// cause names a wake-up: where the goroutine waited and who woke it.
func cause(waited string, waker []string) string {
	if waited == "" {
		waited = "(blocked before the trace or window began)"
	}
	if len(waker) == 0 {
		return waited + " ← timer or network"
	}
	return waited + " ← " + strings.Join(waker, " < ")
}

// frames returns up to n function names of s, innermost first, without
// their package path; own drops the runtime's and sync's frames so that
// what is left says whose code waited or woke.
func frames(s trace.Stack, own bool, n int) []string {
	var out []string
	for f := range s.Frames() {
		fn := f.Func
		if own && (strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") || strings.HasPrefix(fn, "internal/")) {
			continue
		}
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		out = append(out, fn)
		if n > 0 && len(out) == n {
			break
		}
	}
	return out
}

// print writes the report, the top causes per second first.
func (r report) print(w io.Writer, top int) {
	per := func(n int) float64 {
		if r.Seconds == 0 {
			return 0
		}
		return float64(n) / r.Seconds
	}
	fmt.Fprintf(w, "%.1f s of trace: %d processor wake-ups (%.1f/s)\n", r.Seconds, r.ProcWakes, per(r.ProcWakes))
	printRows(w, r.ProcCauses, top, per, "processor wake-ups by the first goroutine run; it waited at [reason]")
	printRows(w, r.Wakes, top, per, "goroutine wake-ups; waited at [reason] ← woken by")
}

// printRows writes counts, the largest per second first, up to top rows.
func printRows(w io.Writer, counts map[string]int, top int, per func(int) float64, title string) {
	type row struct {
		cause string
		n     int
	}
	var rows []row
	total := 0
	for c, n := range counts {
		rows = append(rows, row{c, n})
		total += n
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.cause, b.cause))
	})
	fmt.Fprintf(w, "%s: %d (%.1f/s)\n", title, total, per(total))
	for i, x := range rows {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%8.1f/s  %s\n", per(x.n), x.cause)
	}
}
