package client_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	conclave "github.com/conclave-agent/conclave/agent"
	"github.com/conclave-agent/conclave/api"
	"github.com/conclave-agent/conclave/client"
	"github.com/conclave-agent/conclave/config"
)

// sessionAgent runs one real agent whose default election has candidacy
// (with session_ttl ttl), and returns its socket.
func sessionAgent(t *testing.T, candidacy string, ttl time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	c := config.Default()
	c.Node = config.Node{Name: "n1", ID: 1, DataDir: filepath.Join(dir, "n1")}
	c.Gossip.Bind = "127.0.0.1:0"
	c.Gossip.Profile = config.ProfileLocal
	c.Transport.Listen = "/ip4/127.0.0.1/tcp/0"
	c.Election.Protocol = config.ProtocolBully
	c.Election.Voters = []string{"n1"}
	c.Election.ElectionTimeout = config.Duration(200 * time.Millisecond)
	c.Election.Candidacy = candidacy
	c.Election.SessionTTL = config.Duration(ttl)
	c.API.Socket = filepath.Join(dir, "n1", "agent.sock")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := conclave.New(ctx, c, conclave.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	})
	return c.API.Socket
}

// nextLeader reads s's status lines until one says this agent leads.
func nextLeader(t *testing.T, s *client.Session) api.Status {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case st, ok := <-s.Updates():
			if !ok {
				t.Fatalf("session ended before its agent led: %v", s.Err())
			}
			if st.IsLeader() {
				return st
			}
		case <-timeout:
			t.Fatalf("the agent did not lead while its session was held; last status %+v", s.Status())
		}
	}
}

// A real agent leads while a session is held; a session whose holder
// stops checking in expires, Done says so, and a heartbeat after that is
// refused with ErrSessionEnded; Close ends a session with no goroutine
// left behind (goleak, TestMain).
func TestCampaign(t *testing.T) {
	const ttl = time.Second
	c := client.New(sessionAgent(t, config.CandidacySession, ttl))
	defer c.Close()
	ctx := context.Background()

	s, err := c.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() == "" || s.TTL() != ttl {
		t.Errorf("session %q ttl %v, want an id and ttl %v", s.ID(), s.TTL(), ttl)
	}
	nextLeader(t, s)
	if err := s.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	select {
	case <-s.Done():
		t.Fatalf("session ended while held: %v", s.Err())
	case <-time.After(100 * time.Millisecond):
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err while held: %v", err)
	}
	// Not checked in: it expires.
	select {
	case <-s.Done():
	case <-time.After(20 * ttl):
		t.Fatal("session not ended long after its ttl")
	}
	if !errors.Is(s.Err(), client.ErrSessionEnded) || s.Reason() != api.SessionExpired {
		t.Errorf("after expiry: Err %v, Reason %q; want ErrSessionEnded, expired", s.Err(), s.Reason())
	}
	err = s.Heartbeat(ctx)
	var ae *client.Error
	if !errors.Is(err, client.ErrSessionEnded) || !errors.As(err, &ae) || ae.StatusCode != http.StatusGone {
		t.Errorf("heartbeat after expiry: %v, want a 410 matching ErrSessionEnded", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the end: %v", err)
	}

	// A second session, closed by its holder.
	s2, err := c.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s2.ID() == s.ID() {
		t.Errorf("a new session reuses the id %s", s.ID())
	}
	nextLeader(t, s2)
	if err := s2.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !errors.Is(s2.Err(), client.ErrSessionEnded) || s2.Reason() != api.SessionClosed {
		t.Errorf("after Close: Err %v, Reason %q; want ErrSessionEnded, closed", s2.Err(), s2.Reason())
	}
	// The agent closes the session when it sees the connection close,
	// a moment after Close returns.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := s2.Heartbeat(ctx)
		if errors.Is(err, client.ErrSessionEnded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat long after Close: %v, want ErrSessionEnded", err)
		}
	}
}

// An election that stands always refuses a campaign with a 409 that says
// what to set.
func TestCampaignRefused(t *testing.T) {
	c := client.New(sessionAgent(t, config.CandidacyAlways, 0))
	defer c.Close()
	_, err := c.Campaign(context.Background())
	var ae *client.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || !strings.Contains(ae.Message, "candidacy = \"session\"") {
		t.Errorf("campaign on an election that stands always: %v; want a 409 saying to set candidacy = \"session\"", err)
	}
}
