package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/conclave-agent/conclave/client"
)

// How long READY waits for a configured join to reach a member before it
// is sent anyway: the first node of a new cluster has nobody to reach, and
// holding its start would hold every unit ordered after it.
const notifyJoinWait = 10 * time.Second

// notifySystemd speaks systemd's notify protocol (Type=notify) when
// $NOTIFY_SOCKET is set, and does nothing otherwise. READY=1 goes out once
// the API socket answers GET /v1/health — a request that runs on the
// agent's event loop — and, when gossip.join is set, a member has been
// reached (or notifyJoinWait passed). With WatchdogSec in the unit it sends
// WATCHDOG=1 every half period, each only after another health request
// came back, so a stuck loop stops the pings and systemd restarts the
// agent. STOPPING=1 goes out when ctx ends or stop is called; stop waits
// for all of it to finish.
func notifySystemd(ctx context.Context, socket string, join bool, lg *zap.Logger) (stop func()) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		c := client.New(socket)
		defer c.Close()
		n := &notifier{c: c, lg: lg.Named("systemd")}
		if n.ready(ctx, join) {
			n.watchdog(ctx)
		}
		n.send("STOPPING=1")
	})
	return func() { cancel(); wg.Wait() }
}

type notifier struct {
	c  *client.Client
	lg *zap.Logger
}

func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.lg.Warn("sd_notify failed", zap.String("state", state), zap.Error(err))
	}
}

// health asks the agent over its own socket, bounded by d.
func (n *notifier) health(ctx context.Context, d time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return n.c.Health(hctx)
}

// ready waits for the socket and the join, then sends READY=1. It returns
// false if ctx ended first.
func (n *notifier) ready(ctx context.Context, join bool) bool {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for n.health(ctx, time.Second) != nil {
		select {
		case <-ctx.Done():
			return false
		case <-poll.C:
		}
	}
	status := "serving the socket"
	if join {
		deadline := time.Now().Add(notifyJoinWait)
		for {
			st, err := n.c.Status(ctx)
			if err == nil && st.Members > 1 {
				status = fmt.Sprintf("serving the socket; %d members", st.Members)
				break
			}
			if time.Now().After(deadline) {
				status = fmt.Sprintf("serving the socket; no member reached within %s, still joining", notifyJoinWait)
				break
			}
			select {
			case <-ctx.Done():
				return false
			case <-poll.C:
			}
		}
	}
	n.send("READY=1\nSTATUS=" + status)
	n.lg.Info("told systemd the agent is ready", zap.String("status", status))
	return true
}

// watchdog pings systemd while the event loop answers.
func (n *notifier) watchdog(ctx context.Context) {
	period, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.lg.Warn("systemd watchdog settings unreadable", zap.Error(err))
		return
	}
	if period <= 0 {
		return
	}
	every := period / 2
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.health(ctx, every); err != nil {
			if ctx.Err() == nil {
				n.lg.Warn("event loop did not answer; withholding the systemd watchdog ping", zap.Error(err))
			}
			continue
		}
		n.send("WATCHDOG=1")
	}
}
